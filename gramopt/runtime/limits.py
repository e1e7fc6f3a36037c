"""Runtime limits: caps on the memory a matcher's Earley chart may take, with a clear error.

The chart grows by doubling when a kernel runs out of room (chart.py). Without a cap a
grammar/input pair that makes the chart explode (highly ambiguous grammars, very long
outputs) would eat memory until the process dies; with one, the step that would cross the
cap raises ``RuntimeLimitError`` naming the limit and its value, and the matcher keeps the
state it had before that step (every kernel leaves the committed sets intact on overflow).

Limits count work units (items, sets), never seconds, so the same input fails the same way
on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass


class RuntimeLimitError(RuntimeError):
    """A step needed more than a ``RuntimeLimits`` cap allows; the matcher state is unchanged."""


@dataclass(frozen=True)
class RuntimeLimits:
    """Caps per chart. ``max_items``: Earley items stored over all sets (8 bytes each);
    ``max_sets``: Earley sets, i.e. bytes of accepted text plus the deepest trie walk;
    ``max_groups``: waiter groups (completion index entries). ``None`` = no cap."""

    max_items: int | None = 1 << 26  # 512 MiB of items
    max_sets: int | None = 1 << 22  # 4 MiB of text
    max_groups: int | None = 1 << 25

    def check(self, items: int, sets: int, groups: int) -> None:
        """Raise ``RuntimeLimitError`` when a capacity exceeds its cap."""
        for what, have, cap in (("max_items", items, self.max_items), ("max_sets", sets, self.max_sets),
                                ("max_groups", groups, self.max_groups)):
            if cap is not None and have > cap:
                raise RuntimeLimitError(
                    f"runtime limit {what}={cap} reached (the Earley chart needs {have}); the step "
                    f"was not applied: raise the limit (Matcher(..., limits=RuntimeLimits({what}=...))) "
                    "or shorten the output")

