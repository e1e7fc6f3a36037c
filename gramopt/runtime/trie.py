"""The vocabulary as a byte trie stored depth-first (llguidance's toktrie layout).

Node 0 is the root (empty prefix). Node i > 0 has ``byte[i]`` (the edge into it),
``depth[i]`` (bytes from the root) and ``size[i]`` (nodes in its subtree, itself
included), so its subtree is the contiguous run ``[i, i + size[i])`` and a walk that
finds a prefix dead skips it with ``i += size[i]`` — no recursion, no pointers.
``tok_start[i]:tok_start[i+1]`` index ``tok_ids``: the tokens whose bytes end at node i.
Tokens with no bytes (special tokens) are in no node. A big vocabulary's trie is kept in
the user's cache folder (``cached_trie``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from .cachedir import cache_dir, writable_folder



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


CACHE_FROM_TOKENS = 16_384  # vocabularies this big keep their trie in the cache folder
_FORMAT = b"gramopt-trie-1"


def cached_trie(token_bytes: list[bytes]) -> TokenTrie:
    """``build_trie``, kept for a big vocabulary (CACHE_FROM_TOKENS) in the user's cache
    folder (``$GRAMOPT_CACHE/trie/<digest of the tokens' bytes>.npz``): Qwen's loads in
    ~10 ms where building it takes ~0.5 s, in every process. The digest names the tokens
    exactly (lengths and bytes), so a file is the trie of those tokens or is not used; a
    file that cannot be read or written is rebuilt / skipped, never an error."""
    if len(token_bytes) < CACHE_FROM_TOKENS:
        return build_trie(token_bytes)
    lengths = np.fromiter((len(b) for b in token_bytes), np.int64, len(token_bytes))
    h = hashlib.blake2b(_FORMAT, digest_size=16)
    h.update(lengths.tobytes())
    h.update(b"".join(token_bytes))
    folder = os.path.join(cache_dir(), "trie")
    path = os.path.join(folder, f"{h.hexdigest()}.npz")
    try:
        with np.load(path) as f:
            t = TokenTrie(*(f[k] for k in ("byte", "depth", "size", "tok_start", "tok_ids")))
        if len(t.tok_start) == t.n_nodes + 1 == len(t.depth) + 1 == len(t.size) + 1:
            return t
    except (OSError, ValueError, KeyError, EOFError):
        pass
    t = build_trie(token_bytes)
    if writable_folder(folder):
        tmp = f"{path}.{os.getpid()}.tmp.npz"
        try:
            np.savez(tmp, byte=t.byte, depth=t.depth, size=t.size, tok_start=t.tok_start, tok_ids=t.tok_ids)
            os.replace(tmp, path)
        except OSError:
            pass
    return t


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
