"""Costly deterministic results computed once per test run, whatever the number of test
processes (pytest-xdist runs its workers as separate processes).

``once(folder, key, compute)`` returns ``compute()``: the first process of the run to ask for
``key`` computes it and leaves it pickled in ``folder`` (a folder of this run: conftest's
``once`` fixture gives the one every worker shares), and every later ask, in any process,
reads it back. A process holds the key's lock while it computes, so a second process that
asks meanwhile waits for the result instead of computing it again. ``key`` must name
everything the result depends on: the result of the first ask is the answer to every later
one. Only for computations that depend on nothing a test patches (a test that monkeypatches
the optimizer computes for itself).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

_MEMO: dict[tuple[str, str], object] = {}  # (folder, key) -> result, in this process


def once(folder: Path, key: str, compute: Callable[[], T]) -> T:
    """``compute()``, computed once per ``folder`` and ``key`` across processes (module docstring)."""
    memo = (str(folder), key)
    if memo in _MEMO:
        return _MEMO[memo]  # type: ignore[return-value]
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    path = folder / f"{name}.pickle"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                with open(path, "rb") as f:
                    stored_key, value = pickle.load(f)
                assert stored_key == key, f"two keys share {path.name}: {stored_key!r}, {key!r}"
            else:
                value = compute()
                tmp = folder / f"{name}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    pickle.dump((key, value), f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _MEMO[memo] = value
    return value
