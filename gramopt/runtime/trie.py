"""The vocabulary as a byte trie stored depth-first (llguidance's toktrie layout).

Node 0 is the root (empty prefix). Node i > 0 has ``byte[i]`` (the edge into it),
``depth[i]`` (bytes from the root) and ``size[i]`` (nodes in its subtree, itself
included), so its subtree is the contiguous run ``[i, i + size[i])`` and a walk that
finds a prefix dead skips it with ``i += size[i]`` — no recursion, no pointers.
``tok_start[i]:tok_start[i+1]`` index ``tok_ids``: the tokens whose bytes end at node i.
Tokens with no bytes (special tokens) are in no node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np



@dataclass
class TokenTrie:
    byte: np.ndarray
    depth: np.ndarray
    size: np.ndarray
    tok_start: np.ndarray
    tok_ids: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.byte)

    def arrays(self) -> tuple:
        return (self.byte, self.depth, self.size, self.tok_start, self.tok_ids)


def _build(flat, offs, order):
    """Nodes in depth-first order (byte, depth, size; and each token's node, -1 for an
    empty token) from the tokens' bytes ``flat[offs[t]:offs[t+1]]`` and their order by
    bytes. Token j (of the non-empty ones, in that order) adds the nodes of its bytes past
    ``lcp[j]``, its common prefix with token j - 1; a node (j, depth d) spans every later
    node up to the first node of the first later token whose lcp is below d (the nodes of
    depth > d under it), or to the end. In numpy, no kernel: 0.3 s for Qwen's 151,644
    tokens, less than loading a compiled loop from the cache (0.4 s), and nothing to
    compile in a new environment (tests/test_runtime_trie.py checks it against that loop)."""
    lens = offs[1:] - offs[:-1]
    seq = order[lens[order] > 0]
    m = len(seq)
    tlen = lens[seq]
    start = offs[seq]
    lcp = np.zeros(m, np.int64)
    live = np.arange(1, m)  # tokens still equal to their predecessor in bytes [0, k)
    k = 0
    while live.size:
        live = live[(tlen[live - 1] > k) & (tlen[live] > k)]
        live = live[flat[start[live - 1] + k] == flat[start[live] + k]]
        lcp[live] += 1
        k += 1
    cnt = tlen - lcp
    first = 1 + np.cumsum(cnt) - cnt  # the first node token j adds
    n = 1 + int(cnt.sum())
    owner = np.repeat(np.arange(m), cnt)  # the token that added node i (i >= 1)
    depth = np.zeros(n, np.int32)
    depth[1:] = lcp[owner] + (np.arange(1, n) - first[owner]) + 1
    byte = np.zeros(n, np.int32)
    byte[1:] = flat[start[owner] + depth[1:] - 1]
    node_of = np.full(len(lens), -1, np.int32)
    # a token adding no node repeats its predecessor's bytes: its node is the predecessor's
    node_of[seq] = np.maximum.accumulate(np.where(cnt > 0, first + cnt - 1, 0))
    size = np.ones(n, np.int32)
    size[0] = n
    top = np.append(first, n)
    by_depth = np.argsort(depth[1:], kind="stable") + 1
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    most = int(lcp.max()) if m else 0
    for d in range(1, int(depth.max()) + 1):
        nodes = by_depth[bounds[d]:bounds[d + 1]]
        j = owner[nodes - 1]
        if d > most:
            after = j + 1
        else:  # the first token after j whose lcp is below d (m: none)
            cut = np.flatnonzero(lcp < d)
            cut = np.append(cut[cut > 0], m)
            after = cut[np.searchsorted(cut, j, side="right")]
        size[nodes] = top[after] - nodes
    return byte, depth, size, node_of


def build_trie(token_bytes: list[bytes]) -> TokenTrie:
    offs = np.zeros(len(token_bytes) + 1, np.int64)
    offs[1:] = np.cumsum([len(b) for b in token_bytes])
    flat = np.frombuffer(b"".join(token_bytes), dtype=np.uint8).astype(np.int32)
    order = np.array(sorted(range(len(token_bytes)), key=token_bytes.__getitem__), dtype=np.int64)
    if max((len(b) for b in token_bytes), default=0) >= 4000:
        raise ValueError("token longer than 4000 bytes")
    byte, depth, size, node_of = _build(flat, offs, order)
    n = len(byte)
    has = node_of >= 0
    ids = np.nonzero(has)[0].astype(np.int32)
    nodes = node_of[has]
    srt = np.argsort(nodes, kind="stable")
    tok_ids = ids[srt]
    counts = np.bincount(nodes, minlength=n)
    tok_start = np.zeros(n + 1, np.int32)
    tok_start[1:] = np.cumsum(counts)
    return TokenTrie(byte, depth, size, tok_start, tok_ids.astype(np.int32))
