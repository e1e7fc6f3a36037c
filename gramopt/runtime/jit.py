"""The runtime's numba kernels: one decorator, one cache folder, one type per argument.

``@kernel`` is ``numba.njit`` (``nogil``, no NRT unless asked) plus four things:

* **the cache lives in the user's cache folder**: ``cachedir.cache_dir()/numba``
  (``$GRAMOPT_CACHE``), never the package's folder, which a wheel install or a read-only
  image cannot write. The location is a numba cache locator (``_Locator``) given to these
  kernels only: numba's process-wide ``NUMBA_CACHE_DIR`` must be set before numba is
  imported and would move every other library's cache too. A folder that cannot be
  written gives a one-line note and in-memory compiles (correct, paid once per process).
* **one specialization per kernel**: numba compiles a callee once per tuple of argument
  types, and a literal ``0`` (``Literal[int](0)``), an int32 read from an array and an
  int64 are three tuples, each a full compile of the callee and all it calls. Every
  integer argument narrower than 64 bits, and every literal, is typed as int64 (calls
  from kernels and from Python alike), so each kernel compiles once. Widening an integer
  keeps its value; no kernel relies on a narrow argument's wrap-around (the mask tests
  compare every kernel's masks with the oracle's).
* **a note on stderr** when a compile (a cache miss, not a load) has run for more than a
  second: the first use in a new environment; later processes load the cache.
* **no wait for the compile**: a new environment's first call runs the kernels'
  plain-Python twins (twins.py: the same source, run by CPython) while a background
  process (background.py, running warm.py) compiles them into the cache; once it is done
  (looked at every ``RECHECK_S`` by later calls: a ``waitpid`` or a ``stat``) calls load
  the compiled kernels. Why a process: the compile is ~20 s of CPU, mostly Python
  (numba's typing), so a thread would hold the GIL the twins need, while a second core
  runs a process freely; and the process fills the cache for every later process too.
  Measured on the JSON grammar and Qwen's vocabulary (benchmarks/cold_start.py, load
  ~12): the first mask 2.2 s after the process's launch instead of ~115 s (~20 s of CPU
  compiling); a twin's mask costs ms where a compiled one costs µs, and the first mask of
  a state whose classes walk the whole trie (inside a JSON string) ~4 s instead of 30 ms.
  A process switches at its next kernel call after the compile is done, so it waits at
  most for the twin call under way. The mode, per process: ``$GRAMOPT_KERNELS`` =
  ``auto`` (default: compiled when the cache holds them, ``ready_stamp``, else twins and
  a background compile), ``compiled`` (compile here on first use, as numba does) or
  ``python`` (twins only).

Invariant: the masks are the kernels' own; only where their machine code lives, how
often it is built, and whether CPython or machine code runs them changes (twins.py).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import threading
import time

import numba
from numba import njit, types
from numba.core import caching

from . import twins
from .cachedir import cache_dir, writable_folder

NOTE_AFTER_S = 1.0  # a compile running this long gets a note on stderr
RECHECK_S = 0.2  # while twins serve, how often a call looks whether the compile is done
MODES = ("auto", "compiled", "python")


class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba's cache locator for gramopt's kernels: ``ROOT``/<source folder's name>_<hash of
    its path>/ (numba's own naming below the root; entries are keyed by the source file's
    content hash, so an edited or reinstalled module recompiles)."""

    ROOT = ""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(self.ROOT, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path


class _Impl(caching.CompileResultCacheImpl):
    _locator_classes = [_Locator]


class _FunctionCache(caching.FunctionCache):
    _impl_class = _Impl

    def load_overload(self, sig, target_context):
        got = super().load_overload(sig, target_context)
        if got is None:
            _STATE["missed"] = True  # numba compiles next (the note below says so)
        return got


def kernel_cache_root() -> str:
    """Where the compiled kernels are kept: ``cache_dir()/numba``."""
    return os.path.join(cache_dir(), "numba")


def writable_cache_root() -> str | None:
    """The kernel cache folder if writable (once per process), else None after a note."""
    if _STATE["root"] is None:
        root = kernel_cache_root()
        if writable_folder(root):
            _Locator.ROOT = _STATE["root"] = root
        else:
            _STATE["root"] = ""
            print(f"gramopt: cannot write the kernel cache {root}; compiling in memory "
                  f"(set GRAMOPT_CACHE to a writable folder to keep them)", file=sys.stderr)
    return _STATE["root"] or None


_STATE: dict = {"root": None, "depth": 0, "noted": False, "missed": False,
                "mode": None, "job": None, "checked": 0.0}
_LOCK = threading.Lock()


def canonical_type(t):
    """The type a kernel is compiled for when called with an argument of type ``t``:
    literals as their base type, integers narrower than 64 bits as int64."""
    t = types.unliteral(t)
    if isinstance(t, types.Integer) and t.bitwidth < 64:
        return types.int64
    return t


def _note() -> None:
    """Print the note once, if a compile (not a cache load) is under way; else look again."""
    with _LOCK:
        if _STATE["depth"] == 0 or _STATE["noted"]:
            return
        if not (_STATE["missed"] or not _STATE["root"]):
            _arm(0.5)
            return
        _STATE["noted"] = True
        where = _STATE["root"] or "memory"
    print(f"gramopt: compiling the mask kernels (first use, once per environment; "
          f"cached in {where})…", file=sys.stderr, flush=True)


def _arm(after_s: float) -> threading.Timer:
    timer = threading.Timer(after_s, _note)
    timer.daemon = True
    timer.start()
    _STATE["timer"] = timer
    return timer


def _compiling(d, compile_for_args):
    """``compile_for_args`` (a dispatcher's compile on a call from Python), noting on
    stderr when the outermost one runs longer than NOTE_AFTER_S and has missed the cache;
    while twins serve (``serving_twins``), it returns the twin instead, which numba's
    dispatcher then calls with the same arguments (it calls whatever this returns)."""
    def run(*args, **kws):
        if _STATE["mode"] != "compiled" and serving_twins():
            return twins.entry(d)
        with _LOCK:
            _STATE["depth"] += 1
            outer = _STATE["depth"] == 1
        if outer and not _STATE["noted"]:
            with _LOCK:
                _STATE["missed"] = False
                _arm(NOTE_AFTER_S)
        try:
            return compile_for_args(*args, **kws)
        finally:
            with _LOCK:
                _STATE["depth"] -= 1
                if _STATE["depth"] == 0 and _STATE.get("timer") is not None:
                    _STATE["timer"].cancel()
                    _STATE["timer"] = None
    return run


def _one_specialization(d) -> None:
    """Type every call of dispatcher ``d`` with canonical argument types (``canonical_type``):
    calls from kernels (``get_call_template``) and from Python (``typeof_pyval``)."""
    get_call_template = d.get_call_template
    typeof_pyval = d.typeof_pyval
    d.get_call_template = lambda args, kws: get_call_template(tuple(map(canonical_type, args)), kws)
    d.typeof_pyval = lambda value: canonical_type(typeof_pyval(value))
    d._compile_for_args = _compiling(d, d._compile_for_args)


def kernel(fn=None, *, nogil: bool = True, nrt: bool = False, inline: str = "never",
           helper: bool = False):
    """``numba.njit`` for the runtime (see the module docstring): cached under
    ``kernel_cache_root()``, one specialization per kernel, a note while compiling.
    ``inline="always"`` inlines at numba's IR level (re-typed at every call site, so costly
    to compile): for the helpers that must be (a kernel returning a view of memory it did
    not receive, packed.view1) and the tiny leaf helpers of the inner loops (hashing, a
    state's flags and edges), which LLVM does not inline across numba's calling convention
    (masks 1.1-1.4x slower without); the big helpers (closure, commit) stay calls.
    ``helper=True``: called from kernels only, so numba builds no Python wrapper for it
    (unboxing a chart tuple of 33 arrays: ~40% of a helper's compile)."""
    def wrap(f):
        opts = dict(nogil=nogil, inline=inline)
        if not nrt:
            opts["_nrt"] = False
        if helper:
            opts["no_cpython_wrapper"] = opts["no_cfunc_wrapper"] = True
        d = njit(**opts)(f)
        twins.register(d, f)
        if inline == "always":
            return d  # inlined into its callers' IR: never compiled, never cached on its own
        if writable_cache_root() is not None:
            d._cache = _FunctionCache(f)
        _one_specialization(d)
        return d
    return wrap(fn) if fn is not None else wrap


# ---------------------------------------------------------------- compiled kernels or twins


def cache_key() -> str:
    """What the cached machine code depends on, hashed: numba's and Python's versions,
    the machine and CPU, and this package's runtime sources (path, size, modification
    time: numba's own test of a cache entry's freshness, and its entries are per path)."""
    from llvmlite import binding
    here = os.path.dirname(os.path.abspath(__file__))
    parts = [numba.__version__, sys.version, platform.machine(), binding.get_host_cpu_name(), here]
    for folder, dirs, files in sorted(os.walk(here)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                st = os.stat(path)
                parts.append(f"{os.path.relpath(path, here)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def ready_stamp(root: str) -> str:
    """The file warm.py writes in the kernel cache ``root`` once every kernel a decoding
    step uses is compiled there (for this ``cache_key``)."""
    return os.path.join(root, f"ready-{cache_key()}")


def kernel_mode() -> str:
    """``$GRAMOPT_KERNELS`` (``auto``, ``compiled`` or ``python``; default ``auto``)."""
    mode = os.environ.get("GRAMOPT_KERNELS", "auto") or "auto"
    if mode not in MODES:
        raise ValueError(f"GRAMOPT_KERNELS is one of {', '.join(MODES)}, not {mode!r}")
    return mode


def use(mode: str, note: bool = True) -> None:
    """Fix this process's mode (``compiled`` or ``python``) before its first kernel call
    (warm.py compiles: it must not start a background compile of its own); ``note=False``:
    no note on stderr while compiling."""
    if mode not in ("compiled", "python"):
        raise ValueError(f"mode is 'compiled' or 'python', not {mode!r}")
    _STATE["mode"] = mode
    if not note:
        _STATE["noted"] = True


def serving_twins() -> bool:
    """Whether a call from Python runs the twins now. Decided on the first call: ``auto``
    serves twins when the cache can be written and does not hold the compiled kernels
    yet, and starts the background compile (warm.py); from then on a call every
    RECHECK_S looks whether it is done and switches to the compiled kernels for good."""
    mode = _STATE["mode"]
    if mode is None:
        with _LOCK:
            if _STATE["mode"] is None:
                _STATE["mode"] = _decide()
        mode = _STATE["mode"]
    if mode == "python" and _STATE["job"] is not None:
        now = time.monotonic()
        if now - _STATE["checked"] >= RECHECK_S:
            with _LOCK:
                _STATE["checked"] = now
                job = _STATE["job"]
                state = job.state() if job is not None else "ready"
                if state != "running":
                    _STATE["job"] = None
                    _STATE["mode"] = mode = "compiled"
                    if state == "failed":
                        print(f"gramopt: the background compile of the mask kernels failed "
                              f"({job.log}); compiling here", file=sys.stderr, flush=True)
    return mode == "python"


def _decide() -> str:
    """This process's mode on its first kernel call (``serving_twins``): ``python`` only
    with a background compile under way (started here or by another process)."""
    mode = kernel_mode()
    if mode != "auto":
        return mode
    root = writable_cache_root()
    if root is None:
        return "compiled"  # nothing another process could share: compile here
    stamp = ready_stamp(root)
    if os.path.exists(stamp):
        return "compiled"  # the cache holds them: load
    from .background import Background
    job = Background.start(root, stamp)
    if job is None:
        return "compiled"
    _STATE["job"] = job
    print(f"gramopt: compiling the mask kernels in the background (first use, once per "
          f"environment; cached in {root}); masks meanwhile come from their Python twins",
          file=sys.stderr, flush=True)
    return "python"
