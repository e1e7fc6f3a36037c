"""The algebra of powers of one language: the laws every repetition rewrite applies.

A repetition ``x{m,n}`` is the union of powers L^m ∪ … ∪ L^n of L = L(x), written here as
its bounds ``(m, n)`` with ``n = None`` for ∞. Two laws, true for every language L:

    concat   L^{a..b} · L^{c..d} = L^{a+c..b+d}
             L^i · L^j = L^{i+j}, so the product of the unions is the union over i + j,
             which ranges over every k in [a+c, b+d] (and is unbounded when b or d is).
             e.g. x x* = x+, x* x* = x*, x? x* = x*, x+ x+ = x{2,}.

    nest     (L^{a..b})^{c..d} = L^{ca..db}  when the ranges [ka, kb] for c ≤ k ≤ d leave
             no gap: (k+1)·a ≤ k·b + 1 for every c ≤ k < d (true for k ≥ 1 when b = ∞;
             at k = 0 it asks a ≤ 1). (L^{a..b})^k = ∪_{a≤i≤b} L^{i_1+…+i_k} = L^{ka..kb}, and
             a union of ranges without a gap is the range of its ends. e.g. (x*)^{c..d} = x*,
             (x+){c,d} = x{c,}, (x?){c,d} = x{0,d}, (x+)* = x*, (x{1,2}){2,3} = x{2,6}.
             With a gap it is not one power range (for a general L), so None: (x{2})* (even
             counts only), (x{2,})* (no x¹).

The e-graph rules (``gramopt.rewrites``) and the IR clean-ups
(``gramopt.transforms.cleanup.repetition``) both compute their results here, so a law has
one statement and one argument. Every function requires d ≥ 1 for an outer range (x{0,0}
is ε, handled by the callers).
"""

from __future__ import annotations

Bounds = tuple[int, "int | None"]

STAR: Bounds = (0, None)
PLUS: Bounds = (1, None)
OPTIONAL: Bounds = (0, 1)
ONCE: Bounds = (1, 1)


def concat(p: Bounds, q: Bounds) -> Bounds:
    """The bounds of L^p · L^q (law ``concat``)."""
    (a, b), (c, d) = p, q
    return a + c, (None if b is None or d is None else b + d)


def nest(inner: Bounds, outer: Bounds) -> Bounds | None:
    """The bounds of (L^inner)^outer when it is one power range of L (law ``nest``), else None."""
    (a, b), (c, d) = inner, outer
    if d is None or c < d:  # a union of more than one range: look for a gap
        if c == 0 and a > 1:
            return None
        # for k ≥ 1, (k+1)·a ≤ k·b + 1 ⟺ a − 1 ≤ k·(b − a): the smallest k ≥ 1 decides
        k = max(c, 1)
        if (d is None or k < d) and b is not None and (k + 1) * a > k * b + 1:
            return None
    if b == 0:
        return 0, 0
    return c * a, (None if b is None or d is None else d * b)


__all__ = ["Bounds", "ONCE", "OPTIONAL", "PLUS", "STAR", "concat", "nest"]
