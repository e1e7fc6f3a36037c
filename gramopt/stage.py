"""Which stage of a command is running, so that a safety limit which stops it can say where.

    with stage("verification"): ...        nested stages restore the outer one on exit
    current() -> "verification"

One name per process (commands run one stage at a time on the main thread), set by the
places that start a stage: reading the input, each pass by name, the engine check,
verification, writing. Standard library only, so that every floor may import it.
"""

from __future__ import annotations

from contextlib import contextmanager

_current = ["starting"]


@contextmanager
def stage(name: str):
    """Run the body as stage ``name`` (the enclosing stage again afterwards, however it ends)."""
    outer = _current[0]
    _current[0] = name
    try:
        yield
    finally:
        _current[0] = outer


def current() -> str:
    """The stage running now ("starting" before the first)."""
    return _current[0]
