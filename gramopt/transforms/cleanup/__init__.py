"""Clean-up passes users expect: pure ``Grammar -> Grammar`` functions, one per module.

Each pass is deterministic, preserves the language (its module docstring gives the
before/after forms and the argument), never increases κ, and is idempotent. They rewrite
rule bodies only (Lark terminal definitions are lexer rules and stay as written) and, on
Lark grammars, never fuse or merge across a terminal boundary.

    merge_equivalent_rules         equivalent_rules.py  D ::= E, and rules equal up to renaming
    remove_unproductive            unproductive.py   rules / alternatives deriving nothing
    remove_unreachable             unreachable.py    rules the start rule cannot reach
    simplify_epsilon               epsilon.py        "" items, ("" | x) → x?, x? of nullable x
    canonicalize_repetition        repetition.py     x x* → x+, (x*)* → x*, x{1,1} → x, …
    remove_duplicate_alternatives  duplicates.py     a | b | a → a | b
    merge_char_alternatives        char_classes.py   "a" | "b" | [c-d] → [a-d]   (not Lark)
    fuse_literals                  fusion.py         "a" "b" → "ab"              (not Lark)
    factor_alternatives            factoring.py      "ab" X | "ac" Y → "a" ("b" X | "c" Y)

The ``cleanup`` pass of the one registry (``transforms.registry``, ``CLEANUP_ORDER``) runs them
in that order, in rounds, until a round changes nothing.
The order: equal rules merged first (later passes reshape each rule on its own, and two
copies of a recursive rule would stop looking alike), then pruning (it removes alternatives, exposing unreachable rules), then the
local normal forms that the later passes match on (ε as ``?``, canonical repetitions,
no duplicates), then class merging and fusion (which factoring reads as code points), and
factoring last (it creates ``("" | …)`` and duplicate members the next round tidies).
"""

from __future__ import annotations

from .char_classes import merge_char_alternatives
from .duplicates import remove_duplicate_alternatives
from .epsilon import simplify_epsilon
from .equivalent_rules import merge_equivalent_rules
from .factoring import factor_alternatives
from .fusion import fuse_literals
from .repetition import canonicalize_repetition
from .unproductive import remove_unproductive
from .unreachable import remove_unreachable

__all__ = ["canonicalize_repetition", "factor_alternatives", "fuse_literals", "merge_char_alternatives",
           "merge_equivalent_rules", "remove_duplicate_alternatives", "remove_unproductive", "remove_unreachable",
           "simplify_epsilon"]
