"""Run a step until nothing changes: the one fixpoint loop of the optimizer.

    fixpoint(step, start, limit, changed=None) -> the last value

Every "rerun the passes until a round changes nothing" (the clean-ups' rounds, the
pipeline's rounds, the targets' fix-up rounds) is this loop with its own ``step`` and its
own cap ``limit`` (a work bound: the same input stops in the same round on any machine).
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


def fixpoint(step: Callable[[T], T], start: T, limit: int, changed: Callable[[int, T], None] | None = None) -> T:
    """Apply ``step`` until its output equals its input, at most ``limit`` times; the last
    output (``start`` when ``limit`` is 0). ``changed(k, value)`` is called after each round
    ``k`` (0-based) that changed the value."""
    value = start
    for k in range(limit):
        new = step(value)
        if new == value:
            return new
        if changed is not None:
            changed(k, new)
        value = new
    return value


__all__ = ["fixpoint"]
