"""Kernel arguments as one vector of addresses: a mask call unboxes two arrays, not fifty.

numba unboxes every array argument of a call (a tuple of 32 chart arrays included) at
~50 ns each, which made the dispatch of a cache-hit mask cost more than the mask itself.
Here the arrays are described once by ``pack`` as ``(address, rows, cols)`` int64 triples,
and inside the kernel ``view1``/``view2`` rebuild each as a C-contiguous array over the
same memory (no copy, no ownership: the caller keeps the arrays alive, see
``Matcher._packed``, which holds the tuples it packed).

Invariant: a packed vector names arrays that are alive and unchanged in shape; whoever
replaces an array (``Chart.grow``, ``TokenTable._store``) makes its owner repack before
the next call. ``pack`` checks each array against the expected layout (dtype, rank,
C order), so a layout change fails loudly in Python, never as a bad read in a kernel.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

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


@intrinsic
def view2(typingctx, addr, n0, n1, dtype):
    """The C-ordered ``n0 x n1`` matrix of ``dtype`` at address ``addr`` (a borrowed view)."""
    arrty = types.Array(dtype.dtype, 2, "C")
    return arrty(addr, n0, n1, dtype), _view_codegen(arrty, 2)


def _slot_codegen(arrty, ndim):
    """Codegen of a view over the array whose triple is slot ``args[1]`` of vector ``args[0]``."""
    view = _view_codegen(arrty, ndim)

    def codegen(context, builder, sig, args):
        vec = context.make_array(sig.args[0])(context, builder, args[0])
        first = builder.mul(args[1], context.get_constant(types.intp, WIDTH))
        triple = [builder.load(builder.gep(vec.data, [builder.add(first, context.get_constant(types.intp, i))]))
                  for i in range(1 + ndim)]
        return view(context, builder, sig, triple)
    return codegen


@intrinsic
def slot1(typingctx, vec, k, dtype):
    """``view1`` of the vector in array slot ``k`` of the address vector ``vec`` (``pack``):
    one intrinsic, where ``view1(vec[3 * k], vec[3 * k + 1], dtype)`` types two getitems and
    an inlined helper per array at every use."""
    arrty = types.Array(dtype.dtype, 1, "C")
    return arrty(vec, types.intp, dtype), _slot_codegen(arrty, 1)


@intrinsic
def slot2(typingctx, vec, k, dtype):
    """``view2`` of the matrix in array slot ``k`` of the address vector ``vec`` (``pack``)."""
    arrty = types.Array(dtype.dtype, 2, "C")
    return arrty(vec, types.intp, dtype), _slot_codegen(arrty, 2)


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
