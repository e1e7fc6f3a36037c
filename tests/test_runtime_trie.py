"""The vocabulary trie (runtime/trie.py): its numpy build against the loop it replaced.

``trie._build`` computes the depth-first nodes with array operations; ``loop_build`` is
the plain loop over the sorted tokens that was the runtime's numba kernel. Random
vocabularies over a 3-letter alphabet (shared prefixes, repeated and empty tokens) and
Qwen's must give the same arrays.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from gramopt.runtime import trie


def loop_build(flat, offs, order):
    """The trie build as one loop over the sorted tokens (a stack of the current path):
    the runtime's numba kernel until it became numpy (trie._build)."""
    total = len(flat) + 1
    byte = np.zeros(total, np.int32)
    depth = np.zeros(total, np.int32)
    size = np.ones(total, np.int32)
    node_of = np.full(len(order), -1, np.int32)
    path = np.zeros(4096, np.int32)  # node at each depth of the current path
    n = 1
    prev_lo = 0
    prev_hi = 0
    for j in range(len(order)):
        t = order[j]
        lo = offs[t]
        hi = offs[t + 1]
        if hi == lo:
            continue
        # common prefix with the previous token
        lcp = 0
        while lcp < hi - lo and lcp < prev_hi - prev_lo and flat[lo + lcp] == flat[prev_lo + lcp]:
            lcp += 1
        for d in range(lcp, hi - lo):
            byte[n] = flat[lo + d]
            depth[n] = d + 1
            path[d + 1] = n
            n += 1
        node_of[t] = path[hi - lo]
        prev_lo = lo
        prev_hi = hi
    byte = byte[:n]
    depth = depth[:n]
    size = size[:n]
    # subtree sizes: a node's subtree ends where the next node of depth <= its own starts
    stack = np.zeros(4097, np.int32)
    sp = 0
    for i in range(n):
        while sp > 0 and depth[stack[sp - 1]] >= depth[i]:
            sp -= 1
            k = stack[sp]
            size[k] = i - k
        stack[sp] = i
        sp += 1
    while sp > 0:
        sp -= 1
        k = stack[sp]
        size[k] = n - k
    return byte, depth, size, node_of


def trie_inputs(tokens: list[bytes]):
    offs = np.zeros(len(tokens) + 1, np.int64)
    offs[1:] = np.cumsum([len(b) for b in tokens])
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8).astype(np.int32)
    order = np.array(sorted(range(len(tokens)), key=tokens.__getitem__), dtype=np.int64)
    return flat, offs, order


def assert_same_trie(tokens: list[bytes], reference=loop_build) -> None:
    args = trie_inputs(tokens)
    for want, got in zip(reference(*args), trie._build(*args)):
        assert want.dtype == got.dtype and np.array_equal(want, got)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=6).map(lambda b: bytes(x % 3 + 97 for x in b)), max_size=40))
def test_the_numpy_build_gives_the_loops_trie(tokens):
    assert_same_trie(tokens)


def test_the_numpy_build_gives_the_loops_trie_of_qwen(qwen):
    from numba import njit
    assert_same_trie(qwen.token_bytes, njit(loop_build))  # a million bytes: the loop compiled


def test_a_vocabulary_without_bytes_has_the_root_alone():
    t = trie.build_trie([b"", b""])
    assert t.n_nodes == 1 and t.size.tolist() == [1] and t.tok_start.tolist() == [0, 0]


def test_a_big_vocabularys_trie_is_kept_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAMOPT_CACHE", str(tmp_path))
    monkeypatch.setattr(trie, "CACHE_FROM_TOKENS", 8)
    tokens = [b"ab", b"a", b"", b"abc", b"b", b"ba", b"c", b"ca", b"a"]
    want = trie.build_trie(tokens)
    first = trie.cached_trie(tokens)
    files = list((tmp_path / "trie").glob("*.npz"))
    assert len(files) == 1
    second = trie.cached_trie(tokens)  # read back from the file
    for t in (first, second):
        for a, b in zip(want.arrays(), t.arrays()):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert trie.cached_trie(tokens[:-1]).n_nodes == want.n_nodes  # other tokens: another file
    assert len(list((tmp_path / "trie").glob("*.npz"))) == 2
    files[0].write_bytes(b"not a trie")  # a damaged file is rebuilt
    assert np.array_equal(trie.cached_trie(tokens).size, want.size)
    assert np.array_equal(trie.cached_trie(tokens).size, want.size)
