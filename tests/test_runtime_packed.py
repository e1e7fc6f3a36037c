"""The packed kernel entry (runtime/packed.py): layouts are checked, and a matcher's masks
stay those of the plain walk through chart growth, new token classes and forks (each of
which replaces arrays the address vector names)."""

from __future__ import annotations

import numpy as np
import pytest

from gramopt.runtime import Matcher
from gramopt.runtime import earley as K
from gramopt.runtime.chart import Chart
from gramopt.runtime.packed import Packed, pack, packed_at

from test_runtime_masks import GRAMMARS, small_vocab


def test_pack_checks_item_size_rank_and_order():
    a32, a64, m = np.zeros(3, np.int32), np.zeros(3, np.int64), np.zeros((2, 3), np.uint32)
    out = pack((a32, a64, m), "i32 i64 u32x2")
    assert out[0] == a32.ctypes.data and out[1] == 3
    assert out[6] == m.ctypes.data and tuple(out[7:9]) == (2, 3)
    with pytest.raises(TypeError, match="array 1"):
        pack((a32, a32), "i32 i64")
    with pytest.raises(TypeError, match="array 0"):
        pack((m,), "u32")
    with pytest.raises(TypeError, match="array 0"):
        pack((np.zeros((3, 2), np.uint32).T,), "u32x2")  # Fortran order
    with pytest.raises(ValueError):
        pack((a32,), "i32 i32")


def test_a_packed_tuple_is_the_tuple_in_python_and_its_views_in_a_kernel():
    """A kernel reads and writes a Packed's arrays (constant indices, a matrix included)
    as it does a plain tuple's, and ``packed_at`` over its vector is the same value."""
    from numba import njit

    def body(t):
        t[0][1] = 40
        return t[0][1] + t[1][2] + t[2][1, 2] + t[2].shape[0] * 100 + len(t[1])

    layout = "i64 i32 u32x2"
    arrays = (np.zeros(3, np.int64), np.arange(5, dtype=np.int32),
              np.arange(6, dtype=np.uint32).reshape(2, 3))
    p = Packed(arrays, layout)
    assert isinstance(p, tuple) and all(a is b for a, b in zip(p, arrays)) and len(p) == 3
    kernel = njit(body)

    @njit
    def through_vector(vec):
        return kernel(packed_at(vec, 0, layout))

    want = body(tuple(a.copy() for a in arrays))
    assert kernel(p) == want == through_vector(p.vec) == 40 + 2 + 5 + 200 + 5
    assert arrays[0][1] == 40  # the kernel wrote into the tuple's own array
    with pytest.raises(TypeError, match="array 1"):
        Packed(arrays, "i64 i64 u32x2")


def _trajectory(m: Matcher, n: int, seed: int) -> list[int]:
    """Up to ``n`` allowed non-stop tokens chosen at random, each accepted."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = [t for t in m.allowed_tokens() if t not in m.vocab.eos_ids]
        if not ids:
            break
        t = int(rng.choice(ids))
        assert m.accept_token(t)
        out.append(t)
    return out


@pytest.mark.parametrize("name", ["expr", "ambiguous_SS", "anbn_nested", "star"])
def test_masks_equal_walk_through_growth_and_forks(name):
    """A chart that starts tiny grows (new arrays: repacked) many times along the way."""
    v = small_vocab()
    g = GRAMMARS[name]
    m = Matcher(g, v)
    m.chart = Chart(m.cg.n_rules, items=8, sets=4, groups=4, hash_bits=3, mask_words=v.n_words)
    m.reset()
    toks = _trajectory(Matcher(g, v, mode="walk"), 30, seed=len(name))
    ref = Matcher(g, v, mode="walk")
    out = np.zeros(v.n_words, np.int32)
    for i, t in enumerate(toks):
        c = m.fill_next_token_bitmask(out)
        assert np.array_equal(out.view(np.uint32), ref.compute_mask()), (name, i)
        assert c == m.last_counters and c.trie_nodes >= 0
        if i % 7 == 3:  # a fork shares nothing mutable: advancing it leaves m alone
            f = m.fork()
            f.accept_token(t)
            f.fill_next_token_bitmask(np.zeros(v.n_words, np.int32))
            m.fill_next_token_bitmask(out)
            assert np.array_equal(out.view(np.uint32), ref.compute_mask()), (name, i, "fork")
        assert m.accept_token(t) and ref.accept_token(t)
    assert len(m.chart.S[K.I_ITEMS]) > 8  # it did grow


def test_row_buffer_reused_and_replaced():
    """The caller's bitmask view is reused for the same array and row, and rebuilt when
    either changes."""
    v = small_vocab()
    m = Matcher(GRAMMARS["expr"], v)
    two = np.zeros((2, v.n_words), np.int32)
    m.fill_next_token_bitmask(two, 1)
    m.fill_next_token_bitmask(two, 1)
    assert not two[0].any() and two[1].any()
    m.fill_next_token_bitmask(two, 0)
    assert np.array_equal(two[0], two[1])
    other = np.zeros(v.n_words, np.int32)
    m.fill_next_token_bitmask(other)
    assert np.array_equal(other, two[0])
