"""A static estimate of structural ambiguity cost (SAC), for extraction.

Until the calibrated engine models land, SAC is estimated from grammar shapes known to
make a packed parse forest grow faster than linearly per input symbol:

    feature                                   weight   example
    ----------------------------------------  ------   -------------------------------
    ambiguous self-concatenation A → A A        W_CONCAT  S → S S | a   (Θ(t²) splits/step)
    ambiguous infix A → A op A                  W_INFIX   E → E "+" E | n
    repetition of a nullable item (x?)*          W_NULLREP (infinitely ambiguous)
    union with ≥ 2 nullable alternatives         W_NULLALT per extra nullable alternative

The extractor charges the same weights per e-node (``gramopt.egraph.extract``); here they
are counted over a grammar's rules, so a report can show the estimate before and after.
"""

from __future__ import annotations

from ..grammar import Alt, Grammar, Ref, Repeat, Seq, walk
from ..grammar.analysis import nullable_expr, nullable_rules

W_CONCAT = 20.0
W_INFIX = 20.0
W_NULLREP = 20.0
W_NULLALT = 5.0


def sac_proxy(grammar: Grammar) -> float:
    """The weighted count of the features above over ``grammar``'s rules."""
    nullable = nullable_rules(grammar)
    total = 0.0
    for rule in grammar.rules:
        alts = rule.body.items if isinstance(rule.body, Alt) else (rule.body,)
        for a in alts:
            if isinstance(a, Seq) and a.items[0] == Ref(rule.name) == a.items[-1]:
                total += W_CONCAT if len(a.items) == 2 else W_INFIX
        for node in walk(rule.body):
            if isinstance(node, Repeat) and node.max is None and nullable_expr(node.item, nullable):
                total += W_NULLREP
            if isinstance(node, Alt):
                n = sum(1 for i in node.items if nullable_expr(i, nullable))
                total += W_NULLALT * max(0, n - 1)
    return total
