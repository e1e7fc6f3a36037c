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
    flat_stars       a repetition's body written flat: leaf rules read through, groups distributed,
                     the wide class last
                     (``(c | "\\" e)*`` → ``(c | "\\" a | "\\" b)*``); and a rule of one wide
                     character written flat where it is used (``flatten_character_rules``)
    counted          counted repetitions of a group written out (``G{3,}`` → ``G G G G*``)
    deep_groups      groups nested deeper than the passes' bound lifted into rules, as the reader does
    empty_first      repetitions as rules whose empty alternative is written first (llama.cpp)
    widest_last      alternatives ordered by the width of their FIRST sets, widest last (llama.cpp)
    any_char         the any-character class written as every engine reads it (``.`` → ``[^\\n] | "\\n"``)

Each is a pass of the one registry (``transforms.registry.PASSES["reshape-<name>"]``), which
every target's fix-up (``registry.reshaping``) and the law tests read them from.
"""

from .any_char import spell_any_char
from .counted import write_out_counted_groups
from .deep_groups import lift_deep_groups
from .empty_first import write_repetitions_empty_first
from .flat_stars import flatten_character_rules, flatten_repetition_bodies
from .left_recursion import remove_left_recursion
from .lookaheads import infer_lookaheads
from .regular_rules import inline_small_regular_rules
from .root_wrapper import wrap_referenced_root
from .rule_names import gbnf_rule_names
from .star_rules import lift_star_alternations
from .widest_last import order_alternatives_widest_last

__all__ = ["flatten_character_rules", "flatten_repetition_bodies", "gbnf_rule_names", "infer_lookaheads", "inline_small_regular_rules",
           "lift_deep_groups", "lift_star_alternations", "order_alternatives_widest_last", "remove_left_recursion", "spell_any_char", "wrap_referenced_root",
           "write_out_counted_groups", "write_repetitions_empty_first"]
