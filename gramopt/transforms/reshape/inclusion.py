"""A small inclusion prover over rule bodies (is L(x) ⊆ L(y)?), sound, incomplete:
what the star rules need to absorb ``U+`` into ``U`` when U·U ⊆ U."""

from __future__ import annotations

from ...grammar import Alt, Epsilon, Expr, Ref, Repeat, Seq, alt, seq
from .common import _as_class, _covers


def _star_item(name: str, bodies: dict[str, Expr]) -> Expr | None:
    """T when rule ``name`` is ``T*``: written so, or as ``"" | t₁ name | … | tₙ name``."""
    body = bodies.get(name)
    if isinstance(body, Repeat) and (body.min, body.max) == (0, None):
        return body.item
    if isinstance(body, Alt) and Epsilon() in body.items:
        steps = [a for a in body.items if a != Epsilon()]
        if steps and all(isinstance(a, Seq) and a.items[-1] == Ref(name) for a in steps):
            return alt(*(seq(*a.items[:-1]) for a in steps))
    return None


def _star_of(e: Expr, bodies: dict[str, Expr]) -> Expr | None:
    """T when ``e`` is ``T*`` or a reference to a rule that is T*."""
    if isinstance(e, Repeat) and (e.min, e.max) == (0, None):
        return e.item
    return _star_item(e.name, bodies) if isinstance(e, Ref) else None


def _nullable(e: Expr, bodies: dict[str, Expr]) -> bool:
    """ε ∈ L(e), shown without a fixpoint: a star, an optional, ε, or a star rule."""
    if isinstance(e, Epsilon) or (isinstance(e, Repeat) and e.min == 0):
        return True
    if isinstance(e, Alt):
        return any(_nullable(a, bodies) for a in e.items)
    return isinstance(e, Ref) and _star_item(e.name, bodies) is not None


def _items(e: Expr) -> list[Expr]:
    return list(e.items) if isinstance(e, Seq) else [e]


def _subsumed(x: Expr, y: Expr, bodies: dict[str, Expr], depth: int) -> bool:
    """L(x) ⊆ L(y), by structure (False when unsure)."""
    if x == y:
        return True
    if depth < 0:
        return False
    ys = _items(y)
    if len(ys) >= 2 and _nullable(ys[-1], bodies) and _subsumed(x, seq(*ys[:-1]), bodies, depth):
        return True  # y = z n with n ⇒* ε: L(z) ⊆ L(y)
    if isinstance(x, Alt):
        return all(_subsumed(a, y, bodies, depth) for a in x.items)
    xs, ys = _items(x), _items(y)
    if isinstance(xs[0], Repeat) and (xs[0].min, xs[0].max) == (0, 1):  # q? r: both r and q r
        return _subsumed(seq(*xs[1:]), y, bodies, depth) and _subsumed(seq(xs[0].item, *xs[1:]), y, bodies, depth)
    if isinstance(y, Alt):
        if any(_subsumed(x, a, bodies, depth) for a in y.items):
            return True
        return _split_head(xs, y, bodies, depth)
    if isinstance(ys[0], Repeat) and (ys[0].min, ys[0].max) == (0, 1):  # y = r? s
        if _subsumed(x, seq(*ys[1:]), bodies, depth):
            return True
        return len(xs) >= 2 and _subsumed(xs[0], ys[0].item, bodies, depth) and \
            _subsumed(seq(*xs[1:]), seq(*ys[1:]), bodies, depth)
    if len(xs) == len(ys) >= 2:
        return all(_subsumed(a, b, bodies, depth) for a, b in zip(xs, ys))
    if isinstance(y, Repeat) and y.min <= 1 and (y.max is None or y.max >= 1):
        return _subsumed(x, y.item, bodies, depth)
    cx, cy = _as_class(x), _as_class(y)
    if cx is not None and cy is not None:
        return _covers(cy, cx)
    if isinstance(y, Ref) and y.name in bodies:
        return _subsumed(x, bodies[y.name], bodies, depth - 1)
    if isinstance(x, Ref) and x.name in bodies:
        return _subsumed(bodies[x.name], y, bodies, depth - 1)
    return False


def _split_head(xs: list[Expr], y: Alt, bodies, depth: int) -> bool:
    """x = c·rest with c a class: each of c's characters is the head of some alternative of
    y whose rest covers x's rest."""
    c = _as_class(xs[0])
    if c is None:
        return False
    rest = seq(*xs[1:])
    covered: list[tuple[int, int]] = []
    for a in y.items:
        ys = _items(bodies.get(a.name, a) if isinstance(a, Ref) else a)
        head = ys[0].item if isinstance(ys[0], Repeat) and (ys[0].min, ys[0].max) == (0, 1) else ys[0]
        hc = _as_class(head)
        if hc is not None and _subsumed(rest, seq(*ys[1:]), bodies, depth):
            covered.extend(hc)
    return _covers(tuple(covered), c)


def _closed_under_concat(u: Expr, bodies: dict[str, Expr]) -> bool:
    """L(u)·L(u) ⊆ L(u), shown as u = P·T*·Q with Q·P ⊆ T: then u·u = P T* (Q P) T* Q ⊆
    P T* T T* Q ⊆ P T* Q (Q may be empty). References are unfolded (a rule's body put in its
    place, at most three times) to find the star."""
    items = _items(u)
    for _ in range(4):
        k = next((i for i, x in enumerate(items) if i > 0 and _star_of(x, bodies) is not None), None)
        if k is not None:
            return _subsumed(seq(*items[k + 1:], *items[:k]), _star_of(items[k], bodies), bodies, 3)
        j = next((i for i, x in enumerate(items) if isinstance(x, Ref) and x.name in bodies
                  and isinstance(bodies[x.name], Seq)), None)
        if j is None:
            return False
        items = items[:j] + list(bodies[items[j].name].items) + items[j + 1:]
    return False
