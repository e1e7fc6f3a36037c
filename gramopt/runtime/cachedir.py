"""The user's cache folder for gramopt, the one home of its location (standard library only).

``$GRAMOPT_CACHE``, else ``$XDG_CACHE_HOME/gramopt``, else ``~/.cache/gramopt``. Its users
keep their files in sub-folders: ``numba/`` (the runtime's compiled kernels,
gramopt.runtime.jit), ``gguf/`` (vocabulary files for llama.cpp, gramopt.engines.llamacpp).
Never the package's own folder: a wheel install or a read-only image cannot write there.
"""

from __future__ import annotations

import os
import tempfile


def cache_dir() -> str:
    """``$GRAMOPT_CACHE``, else ``$XDG_CACHE_HOME/gramopt``, else ``~/.cache/gramopt``."""
    return os.environ.get("GRAMOPT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gramopt")


def writable_folder(path: str) -> bool:
    """Whether ``path`` is (or can be made) a folder this process can write files into."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True
