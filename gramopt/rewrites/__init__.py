"""The e-graph rewrite families, each in its own module with its soundness argument beside it.

    repetition   (x*)* → x*, x{1} → x, …              egglog rules
    sequence     a (b c) → a b c, x x* → x+, …        Python searchers
    alternation  set semantics of Alt, x | ε → x?, char-class merging
    delegation   rules equal up to renaming (bisimulation by partition refinement)
    recursion    X ::= X w | T → T w*, X ::= X X | T → T+, E op E → T (op T)*, and back

Only e-graph rules live here (they must not depend on a cost model); the IR → IR passes
(clean-ups, the inliner) live in ``gramopt.transforms``.
"""

from . import alternation, delegation, recursion, repetition, sequence

FAMILIES = {
    "repetition": repetition.RULES,
    "sequence": sequence.RULES,
    "alternation": alternation.RULES,
    "delegation": delegation.RULES,
    "recursion": recursion.RULES,
}


def rules(families=None):
    """The rewrites of the named families (all by default), in a fixed order."""
    names = list(FAMILIES) if families is None else [f for f in FAMILIES if f in families]
    return [r for f in names for r in FAMILIES[f]]


__all__ = ["FAMILIES", "rules"]
