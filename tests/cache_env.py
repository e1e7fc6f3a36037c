"""``GRAMOPT_CACHE`` pointed at a test's folder for a block only: ``with cache_at(folder): ...``.

A test that writes its small vocabularies' GGUF files (llama.cpp's engine) to a temporary cache
must not leave the variable set: every later test of the same process, and every process it
spawns (batch workers, CLI runs, the kernel twins' drivers), would then look for the runtime's
compiled kernels, Qwen's token trie and the GGUF files in that empty folder and build them again.
"""

from __future__ import annotations

import os
from contextlib import contextmanager


@contextmanager
def cache_at(folder):
    """``GRAMOPT_CACHE=folder`` inside the block; its value before (or its absence) after it."""
    saved = os.environ.get("GRAMOPT_CACHE")
    os.environ["GRAMOPT_CACHE"] = str(folder)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("GRAMOPT_CACHE", None)
        else:
            os.environ["GRAMOPT_CACHE"] = saved
