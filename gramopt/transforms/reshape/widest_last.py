"""Alternatives ordered widest-last: llama.cpp tries the alternative written last first
(the llama.cpp target's fix-up, ``gramopt.targets.llamacpp``, where the measurement lives).

In every alternation the alternatives are stably sorted by how many code points can begin
them (their FIRST set's width), nullable alternatives first. Argument: union is
commutative, so the language is unchanged (and llama.cpp has no ordered choice: it keeps
every stack, so its masks are unchanged too). Idempotent: sorting a sorted alternation
keeps it.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, Expr, Grammar, transform
from ...grammar.analysis import first_of_expr, first_sets, nullable_expr, nullable_rules

WIDEST = 0x110000


def order_alternatives_widest_last(g: Grammar) -> tuple[Grammar, int]:
    """Every alternation stably sorted by FIRST width, nullable alternatives first."""
    nullable = nullable_rules(g)
    firsts = first_sets(g, nullable)
    rule_ranges = {n: set(f.ranges) for n, f in firsts.items()}
    changed = 0

    def key(e: Expr) -> int:
        if nullable_expr(e, nullable):
            return -1
        ranges: set = set()
        first_of_expr(e, False, nullable, rule_ranges, {}, ranges, set())
        covered = 0
        for lo, hi in _merge(ranges):
            covered += hi - lo + 1
        return min(covered, WIDEST)

    def order(e: Expr) -> Expr:
        nonlocal changed
        if not isinstance(e, Alt):
            return e
        keys = [key(i) for i in e.items]
        ordered = tuple(item for _, _, item in sorted(zip(keys, range(len(keys)), e.items)))
        if ordered == e.items:
            return e
        changed += 1
        return Alt(ordered)

    rules = tuple(replace(r, body=transform(r.body, order)) for r in g.rules)
    return (replace(g, rules=rules), changed) if changed else (g, 0)


def _merge(ranges) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


__all__ = ["order_alternatives_widest_last"]
