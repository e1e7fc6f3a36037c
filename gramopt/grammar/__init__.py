"""The grammar IR: expressions, rules, grammars, the canonical BNF lowering, analyses.

Imports nothing else of gramopt.
"""

from .expr import (Alt, CharClass, Epsilon, Expr, Literal, Ref, Regex, Repeat, Seq, Terminal,
                   alt, char, depth, rebuilds_as_is, refs, rename_refs, seq, transform, walk, MAX_PASS_DEPTH)
from .grammar import Directive, Grammar, GrammarError, Native, Rule, SourcePos
from .bnf import BNF, Production, lower
from .size import MAX_EXPANDED, check_size, expanded_size

__all__ = [
    "Alt", "CharClass", "Epsilon", "Expr", "Literal", "Ref", "Regex", "Repeat", "Seq", "Terminal",
    "alt", "char", "depth", "MAX_PASS_DEPTH", "rebuilds_as_is", "refs", "rename_refs", "seq", "transform", "walk",
    "Directive", "Grammar", "GrammarError", "Native", "Rule", "SourcePos",
    "BNF", "Production", "lower", "MAX_EXPANDED", "check_size", "expanded_size",
]
