"""Kernel arguments as one vector of addresses: a mask call unboxes two arrays, not fifty.

numba unboxes every array argument of a call (a tuple of 32 chart arrays included) at
~50 ns each, which made the dispatch of a cache-hit mask cost more than the mask itself.
Here the arrays are described once by ``pack`` as ``(address, rows, cols)`` int64 triples,
and inside the kernel ``view1`` (or a constant index of a ``Packed``, below) rebuilds each
as a C-contiguous array over the same memory (no copy, no ownership: the caller keeps the
arrays alive, see ``Matcher._packed``, which holds the tuples it packed; a ``Packed``
holds its own).

Invariant: a packed vector names arrays that are alive and unchanged in shape; whoever
replaces an array (``Chart.grow``, ``TokenTable._store``) makes its owner repack before
the next call. ``pack`` checks each array against the expected layout (dtype, rank,
C order), so a layout change fails loudly in Python, never as a bad read in a kernel.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.datamodel import models
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer, signature
from numba.extending import NativeValue, intrinsic, register_model, typeof_impl, unbox

from . import twins

WIDTH = 3  # int64 slots per array: address, rows, cols (cols = rows for a vector)


def _view_codegen(arrty, ndim):
    def codegen(context, builder, sig, args):
        dt = context.get_data_type(arrty.dtype)
        itemsize = context.get_abi_sizeof(dt)
        ary = context.make_array(arrty)(context, builder)
        dims = list(args[1:1 + ndim])
        strides, s = [], context.get_constant(types.intp, itemsize)
        for d in reversed(dims):
            strides.insert(0, s)
            s = builder.mul(s, d)
        context.populate_array(ary, data=builder.inttoptr(args[0], dt.as_pointer()),
                               shape=cgutils.pack_array(builder, dims),
                               strides=cgutils.pack_array(builder, strides),
                               itemsize=context.get_constant(types.intp, itemsize), meminfo=None)
        return ary._getvalue()
    return codegen


@intrinsic
def view1(typingctx, addr, n, dtype):
    """The vector of ``n`` ``dtype`` items at address ``addr`` (a borrowed view)."""
    arrty = types.Array(dtype.dtype, 1, "C")
    return arrty(addr, n, dtype), _view_codegen(arrty, 1)


def _slot_codegen(arrty, ndim):
    """Codegen of a view over the array whose triple is slot ``args[1]`` of vector ``args[0]``."""
    view = _view_codegen(arrty, ndim)

    def codegen(context, builder, sig, args):
        vec = context.make_array(sig.args[0])(context, builder, args[0])
        first = builder.mul(args[1], context.get_constant(types.intp, WIDTH))
        at = [builder.add(first, context.get_constant(types.intp, i)) for i in range(1 + ndim)]
        triple = [builder.load(builder.gep(vec.data, [i])) for i in at]
        return view(context, builder, sig, triple)
    return codegen


@intrinsic
def slot1(typingctx, vec, k, dtype):
    """``view1`` of the vector in array slot ``k`` of the address vector ``vec`` (``pack``),
    in one intrinsic."""
    arrty = types.Array(dtype.dtype, 1, "C")
    return arrty(vec, types.intp, dtype), _slot_codegen(arrty, 1)


@intrinsic
def fetch_add(typingctx, counter):
    """Atomically ``counter[0] += 1``; returns the value before (an int64 vector): threads
    running the same kernel take distinct values."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", ary.data, ir.Constant(ir.IntType(64), 1), "seq_cst")
    return types.int64(counter), codegen


def pack_width(slots: int) -> int:
    """The int64 length of ``slots`` array slots (the index of slot ``slots``'s first int)."""
    return WIDTH * slots


def pack(arrays, layout: str, out: np.ndarray | None = None, at: int = 0) -> np.ndarray:
    """Write the ``(address, rows, cols)`` triples of ``arrays`` (a tuple) into ``out`` from
    array slot ``at`` (a new vector when ``out`` is None). ``layout`` names each array's
    type, space-separated: ``i32``, ``i64``, ``u32`` (vectors) or ``u32x2`` (matrix); an
    array of another item size or rank, or not C-ordered, raises TypeError (what a view
    relies on to stay inside the array's memory) and writes nothing.

    Plain Python (a few µs per array): it runs when a matcher is built or its chart or
    token pools are replaced, never per mask, and a kernel here cost five numba compiles
    (one per tuple type) on first use."""
    kinds = _layout(layout)
    if len(kinds) != len(arrays):
        raise ValueError(f"layout names {len(kinds)} arrays, got {len(arrays)}")
    if out is None:
        out = np.zeros(WIDTH * len(arrays), np.int64)
    triples = []
    for k, (a, (size, rank)) in enumerate(zip(arrays, kinds)):
        if a.itemsize != size or a.ndim != rank or not a.flags.c_contiguous:
            raise TypeError(f"array {k} is {a.dtype}[{a.ndim}d], expected {layout.split()[k]} (C order)")
        triples += (a.ctypes.data, a.shape[0], a.shape[-1])
    out[WIDTH * at:WIDTH * at + len(triples)] = triples
    return out


_KINDS = {"i32": (4, 1), "i64": (8, 1), "u32": (4, 1), "u32x2": (4, 2)}
_LAYOUTS: dict = {}


def _layout(layout: str) -> list[tuple[int, int]]:
    """(item size, rank) of each array a layout names."""
    got = _LAYOUTS.get(layout)
    if got is None:
        got = _LAYOUTS[layout] = [_KINDS[k] for k in layout.split()]
    return got


# ---------------------------------------------------------------- a tuple of arrays as one pointer
#
# The kernels take the grammar, chart, trie and pools as tuples of arrays (G, S, T, P) and
# read them with constant indices (``S[I_META]``). A tuple of 33 arrays is a big numba type:
# typing it, and passing it by value (seven fields per array) from helper to helper, cost
# ~0.4 s of compile per helper (benchmarks/results/cold_start-2026-11-27.md). ``Packed`` is
# such a tuple (a ``tuple`` subclass: Python code reads it as before) that kernels receive
# as ``PackedType``: one pointer to its arrays' ``(address, rows, cols)`` triples; a
# constant index builds the view of that array (as ``view1`` does: same memory, same
# shape), so a kernel's source and results are the same for a tuple and a Packed.


class Packed(tuple):
    """A tuple of arrays with ``layout`` (``pack``), also described by the int64 vector
    ``vec`` of their triples; kernels receive it as ``PackedType(layout)``. The arrays are
    the tuple's own, so they live as long as it; replacing one is making a new Packed."""

    def __new__(cls, arrays, layout: str):
        self = super().__new__(cls, arrays)
        self.layout = layout
        self.vec = pack(self, layout)  # checks each array against the layout
        self.addr = int(self.vec.ctypes.data)
        return self

    def __reduce__(self):
        return (Packed, (tuple(self), self.layout))


class PackedType(types.Type):
    """numba type of a ``Packed`` with ``layout``: a pointer to its triples."""

    def __init__(self, layout: str):
        self.layout = layout
        self.kinds = tuple(_layout(layout))
        super().__init__(name=f"Packed({layout})")

    def slot_type(self, k: int) -> types.Array:
        size, rank = self.kinds[k]
        kind = self.layout.split()[k]
        dtype = {"i32": types.int32, "i64": types.int64, "u32": types.uint32, "u32x2": types.uint32}[kind]
        assert dtype.bitwidth == 8 * size
        return types.Array(dtype, rank, "C")


@register_model(PackedType)
class _PackedModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(64).as_pointer())


@typeof_impl.register(Packed)
def _typeof_packed(val, c):
    return PackedType(val.layout)


@unbox(PackedType)
def _unbox_packed(typ, obj, c):
    addr = c.pyapi.object_getattr_string(obj, "addr")
    value = c.pyapi.long_as_longlong(addr)
    c.pyapi.decref(addr)
    return NativeValue(c.builder.inttoptr(value, ir.IntType(64).as_pointer()),
                       is_error=c.pyapi.c_api_error())


@infer
class _PackedStaticGetItem(AbstractTemplate):
    key = "static_getitem"

    def generic(self, args, kws):
        obj, idx = args
        if isinstance(obj, PackedType) and isinstance(idx, int) and 0 <= idx < len(obj.kinds):
            return signature(obj.slot_type(idx), *args)


@lower_builtin("static_getitem", PackedType, types.IntegerLiteral)
def _packed_getitem(context, builder, sig, args):
    ptr, idx = args
    arrty = sig.return_type
    triple = [builder.load(builder.gep(ptr, [context.get_constant(types.intp, WIDTH * idx + i)]))
              for i in range(1 + arrty.ndim)]
    return _view_codegen(arrty, arrty.ndim)(context, builder, sig, triple)


@intrinsic
def packed_at(typingctx, vec, at, layout):
    """The ``PackedType(layout)`` whose triples start at array slot ``at`` of the address
    vector ``vec`` (``layout`` a constant string)."""
    if not isinstance(layout, types.StringLiteral):
        return None

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.gep(a.data, [builder.mul(args[1], context.get_constant(types.intp, WIDTH))])
    return PackedType(layout.literal_value)(vec, types.intp, layout), codegen


# ---------------------------------------------------------------- the intrinsics' Python twins (twins.py)

_DTYPES = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u32x2": np.uint32}


def _py_view(addr, shape: tuple, dtype) -> np.ndarray:
    """The C-ordered array of ``shape`` and ``dtype`` at address ``addr`` (a borrowed view,
    as the intrinsics build: same memory, no owner)."""
    dtype = np.dtype(dtype)
    n = 1
    for s in shape:
        n *= int(s)
    if n <= 0:
        return np.zeros(tuple(int(s) for s in shape), dtype)
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(int(addr))
    return np.frombuffer(buf, dtype).reshape(tuple(int(s) for s in shape))


def _py_view1(addr, n, dtype):
    return _py_view(addr, (n,), dtype)


def _py_slot1(vec, k, dtype):
    at = WIDTH * int(k)
    return _py_view(vec[at], (vec[at + 1],), dtype)


def _py_packed_at(vec, at, layout):
    out = []
    for i, kind in enumerate(layout.split()):
        a = WIDTH * (int(at) + i)
        shape = (vec[a + 1], vec[a + 2]) if kind == "u32x2" else (vec[a + 1],)
        out.append(_py_view(vec[a], shape, _DTYPES[kind]))
    return tuple(out)


_FETCH_LOCK = threading.Lock()


def _py_fetch_add(counter):
    with _FETCH_LOCK:
        v = counter[0]
        counter[0] = v + 1
    return v


twins.register(view1, None, _py_view1)
twins.register(slot1, None, _py_slot1)
twins.register(packed_at, None, _py_packed_at)
twins.register(fetch_add, None, _py_fetch_add)
