"""Which stage of a command is running, so that a safety limit which stops it can say where.

    with stage("verification"): ...        nested stages restore the outer one on exit
    current() -> "verification"

One name per thread, set by the places that start a stage: reading the input, each pass by
name, the engine check, verification, writing. A command runs on the main thread, where its
safety limits read it; a serving stack's optimizations run on worker threads
(``gramopt.integrations``) and never change the main thread's stage. Standard library only,
so that every floor may import it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

_names: dict[int, str] = {}  # thread ident -> its stage (absent: "starting")


@contextmanager
def stage(name: str):
    """Run the body as stage ``name`` (the enclosing stage again afterwards, however it ends)."""
    tid = threading.get_ident()
    outer = _names.get(tid)
    _names[tid] = name
    try:
        yield
    finally:
        if outer is None:
            _names.pop(tid, None)
        else:
            _names[tid] = outer


def current(thread: threading.Thread | None = None) -> str:
    """The stage running now on ``thread`` (default: the calling one; "starting" before the
    first). A watchdog thread asks for the main thread's."""
    return _names.get((thread or threading.current_thread()).ident, "starting")
