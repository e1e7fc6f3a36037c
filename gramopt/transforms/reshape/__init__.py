"""Reshapings: language-preserving IR passes that put a grammar in the shapes an engine
decides well (the xgrammar target composes them in ``gramopt.targets.xgrammar``, where the
measurements that motivate each live). Each returns ``(grammar, what it changed)`` (rule
names, a count) and states its argument in its docstring.

    left_recursion   A ::= A α | β  →  A ::= β α*
    regular_rules    small regular rules (``ws ::= [ \\t]*``) inlined into their callers
    star_rules       repetitions as right-recursive star rules; ``c+`` → ``c c*``; U+ → U when
                     U·U ⊆ U (``inclusion``: a small sound inclusion prover)
    root_wrapper     a start rule that rules reference delegates to a fresh rule
    rule_names       rule names in llama.cpp's characters (``a_b`` → ``a-b``)
    lookaheads       lookahead assertions ``(= [F])`` from FOLLOW sets (``grammar.follow``)
"""

from .left_recursion import remove_left_recursion
from .lookaheads import infer_lookaheads
from .regular_rules import inline_small_regular_rules
from .root_wrapper import wrap_referenced_root
from .rule_names import gbnf_rule_names
from .star_rules import lift_star_alternations

RESHAPINGS = {  # stable name -> step
    "left-recursion": remove_left_recursion,
    "inline-regular": inline_small_regular_rules,
    "star-rules": lift_star_alternations,
    "root-wrapper": wrap_referenced_root,
    "lookaheads": infer_lookaheads,
}

__all__ = ["RESHAPINGS", "gbnf_rule_names", "infer_lookaheads", "inline_small_regular_rules", "lift_star_alternations",
           "remove_left_recursion", "wrap_referenced_root"]
