"""Helpers the reshapings share: alternatives, fresh names, class covers."""

from __future__ import annotations

from ...grammar import Alt, CharClass, Expr, Literal


def _alternatives(e: Expr) -> tuple[Expr, ...]:
    return e.items if isinstance(e, Alt) else (e,)


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


def _as_class(e: Expr) -> tuple[tuple[int, int], ...] | None:
    if isinstance(e, CharClass):
        return e.code_points()
    if isinstance(e, Literal) and len(e.text) == 1:
        return ((ord(e.text), ord(e.text)),)
    return None


def _covers(big, small) -> bool:
    big = CharClass(tuple(big)).ranges if big else ()
    return all(any(lo <= a and b <= hi for lo, hi in big) for a, b in small)
