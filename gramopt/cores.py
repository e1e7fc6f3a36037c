"""The cores one optimization may count on, so that it runs work side by side only where a
core would otherwise idle.

    share(n)      this process is one of ``n`` optimizing at once (a batch's workers say so)
    cores()       the cores this process may run on
    spare()       whether a second thread of one optimization finds a core of its own

Why: the judge runs the input's trace beside the candidate's masks (``judge.masks``) and the
final language check beside the engine check (``passes._VerifyAhead``). On a command-line run
the second core is idle and the item's wall time falls; in a batch whose workers already fill
every core the same threads only add switching, so they are not started. Scheduling only:
what is computed, and so every output byte, is the same either way. Standard library only.
"""

from __future__ import annotations

import os

_workers = 1


def share(n: int) -> None:
    """This process is one of ``n`` optimizing at once (set once, by a batch's worker)."""
    global _workers
    _workers = max(1, int(n))


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def spare() -> bool:
    """Whether each of the processes optimizing at once has a second core of its own."""
    return cores() // _workers >= 2
