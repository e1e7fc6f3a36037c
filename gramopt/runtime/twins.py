"""The kernels' plain-Python twins: each kernel's own source, run by CPython instead of numba.

A kernel (jit.py) is a Python function that numba compiles; its twin is the same code
object given globals in which every kernel, every module of kernels and every intrinsic
(packed.py) it names is replaced by its twin, so a twin calls twins all the way down and
never compiles. Kernels work on numpy arrays in place, so a twin reads and writes the
same chart, trie and pools as the compiled kernel would: the two may take turns on one
matcher between calls (jit.py switches from twins to compiled kernels once the compiled
ones are cached).

Invariant: a twin computes what its kernel computes. The source is the same; the
differences are CPython's numbers, which the kernels' code already keeps apart: values
read from arrays are numpy scalars (int64 arithmetic wraps as numba's does: the hashes),
and a Python int never leaves the int64 range in these kernels (indices and counts).
``tests/test_twins.py`` compares every mask of corpus grammars, step by step. The
intrinsics (packed.py), which have no Python source, register hand-written twins.

A twin is slow (a trie node costs microseconds, not nanoseconds): it serves the first
masks of a new environment while the compiled kernels are built in the background.
"""

from __future__ import annotations

import threading
import types
from typing import Callable

import numpy as np

_SOURCES: dict[int, tuple] = {}  # id(dispatcher or intrinsic) -> (object, python function, own twin?)
_TWINS: dict[int, Callable] = {}
_ENTRIES: dict[int, Callable] = {}
_GLOBALS: dict[str, dict] = {}
_PARTIAL: dict[str, dict] = {}
_SHADOWS: dict[str, object] = {}
_BUILDING = threading.RLock()  # twins are built whole before any thread runs them


def register(obj, py_func: Callable, twin: Callable | None = None) -> None:
    """Record that ``obj`` (a numba dispatcher or intrinsic) runs ``py_func``'s source;
    ``twin``, when given, is its hand-written Python equivalent (an intrinsic's)."""
    _SOURCES[id(obj)] = (obj, py_func, twin)


def is_kernel(obj) -> bool:
    return id(obj) in _SOURCES and _SOURCES[id(obj)][0] is obj


def entry(obj) -> Callable:
    """The twin of ``obj`` as called from Python: with numpy's overflow warnings off (the
    kernels' int64 hashes wrap on purpose, as they do compiled)."""
    got = _ENTRIES.get(id(obj))
    if got is None:
        inner = twin(obj)

        def run(*args):
            with np.errstate(over="ignore"):
                return inner(*args)
        run.__name__ = run.__qualname__ = getattr(inner, "__name__", "twin")
        got = _ENTRIES[id(obj)] = run
    return got


def twin(obj) -> Callable:
    """The plain-Python twin of kernel or intrinsic ``obj`` (built once)."""
    got = _TWINS.get(id(obj))
    if got is None:
        with _BUILDING:
            got = _TWINS.get(id(obj))
            if got is None:
                _, py_func, own = _SOURCES[id(obj)]
                if own is not None:
                    got = own
                else:
                    got = types.FunctionType(py_func.__code__, _twin_globals(py_func.__module__),
                                             py_func.__name__, py_func.__defaults__, py_func.__closure__)
                    got.__doc__ = py_func.__doc__
                    got.__wrapped__ = py_func
                _TWINS[id(obj)] = got
    return got


def _has_kernels(module) -> bool:
    name = module.__name__
    return any(f is not None and f.__module__ == name for _, f, _ in _SOURCES.values())


class _Shadow:
    """A module of kernels as twins see it: attribute reads come from its twin globals."""

    def __init__(self, name: str):
        self.__name__ = name

    def __getattr__(self, attr):
        return _twin_globals(self.__name__)[attr]


def _twin_value(value):
    if is_kernel(value):
        return twin(value)
    if isinstance(value, types.ModuleType) and _has_kernels(value):
        name = value.__name__
        if name not in _SHADOWS:
            _SHADOWS[name] = _Shadow(name)
        return _SHADOWS[name]
    return value


def _twin_globals(module_name: str) -> dict:
    """A copy of the module's globals with kernels, modules of kernels and intrinsics as
    their twins (one dict per module, shared by its twins)."""
    import sys
    g = _GLOBALS.get(module_name)  # complete ones only
    if g is not None:
        return g
    with _BUILDING:
        g = _GLOBALS.get(module_name) or _PARTIAL.get(module_name)
        if g is None:  # twins of this module met again while building it see this dict
            g = _PARTIAL[module_name] = dict(vars(sys.modules[module_name]))
            for name, value in list(g.items()):
                g[name] = _twin_value(value)
            _GLOBALS[module_name] = _PARTIAL.pop(module_name)
    return g
