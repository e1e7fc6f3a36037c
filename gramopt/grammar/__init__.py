"""The grammar IR: expressions, rules, grammars, the canonical BNF lowering, analyses.

Imports nothing else of gramopt.
"""

from .expr import (Alt, CharClass, Epsilon, Expr, Literal, Ref, Regex, Repeat, Seq, Terminal,
                   alt, char, refs, rename_refs, seq, transform, walk)
from .grammar import Directive, Grammar, GrammarError, Rule, SourcePos
from .bnf import BNF, Production, lower

__all__ = [
    "Alt", "CharClass", "Epsilon", "Expr", "Literal", "Ref", "Regex", "Repeat", "Seq", "Terminal",
    "alt", "char", "refs", "rename_refs", "seq", "transform", "walk",
    "Directive", "Grammar", "GrammarError", "Rule", "SourcePos",
    "BNF", "Production", "lower",
]
