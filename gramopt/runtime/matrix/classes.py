"""The matrix backend's mask cache: token classes per seed nonterminal (the adaptive token
mask cache of xgrammar, keyed by the seeds of Pred instead of a parser state).

Seeds(n) = { C : A → B C, A ∈ Pred(i), B ∈ cell(i, n) } ({S} at n = 0), so that
Pred(n) = LC*(Seeds(n)); each seed X comes with its follow context F(X), the union of
follow(A) over those rules with C = X (∅ for S at 0). kernel.py writes both per column.
For a nonterminal X and a byte set F, over the vocabulary (one table walk per X, whose
start is X, gives AW(X) and the nodes where X may end; U(X, F) is read off them):

    AW(X)     tokens that are prefixes of a sentence of X                    (accepted)
    U(X, F)   tokens not in AW(X) with a proper prefix u ∈ L(X) whose next byte is in
              F, every adjacent byte pair possible inside a sentence        (undecided)

Claim, for the committed text w of length n:

    mask(w) = ⋃_{X ∈ Seeds(n)} AW(X)  ∪  { x ∈ ⋃_{X ∈ Seeds(n)} U(X, F(X)) : w·x viable }

⊇: X ∈ Seeds(n) means S ⇒* w X γ with every symbol of γ productive (the CNF is trimmed),
so w·x·(the rest of a sentence of X)·(a string of γ) is a sentence. ⊆: if w·x is viable,
take a parse tree of some w·x·z and its highest node X whose span starts at n (the leaf
of x's first byte starts there; a unit parent would start there too): X is the root
(n = 0) or the right child of a binary A → B X with B spanning (i, n), A ∈ Pred(i), so
X ∈ Seeds(n). If X's span covers x, x is a prefix of a sentence of X: x ∈ AW(X).
Otherwise X's span ends inside x after some u ∈ L(X); X is the last child of A, so the
next byte of x comes right after A's span in this tree: it is in follow(A) ⊆ F(X); and
every adjacent pair of x is adjacent in the sentence: x ∈ AW(X) ∪ U(X, F(X)). (At n = 0
X is the root, whose span covers all of x.)

So a mask is a copy of the union cached for the key Seeds(n) plus a table walk over the
sub-trie of the key's undecided tokens (often empty) — not a walk of the whole trie.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from ..jit import kernel
from ..trie import TokenTrie
from .cnf import CNF
from .table import Table


class MaskEntry(NamedTuple):
    """The cached part of the mask for one key: the union of AW over the seeds (uint32
    words) and the sub-trie of the undecided tokens (None when there are none)."""

    aw: np.ndarray
    sub: TokenTrie | None
    undecided: int


class TokenClasses:
    """AW/U per nonterminal and the mask entries per seed set, for one CNF × trie.
    ``entries`` is bounded (``max_entries``, the oldest goes first; a hit is a plain dict
    look-up); the per-nonterminal classes are kept (token id arrays, per nonterminal met)."""

    def __init__(self, cnf: CNF, trie: TokenTrie, n_words: int, max_entries: int = 2048):
        self.cnf = cnf
        self.trie = trie
        self.n_words = n_words
        self.max_entries = max_entries
        self.node_ok = _node_ok(trie.byte, trie.depth, cnf.follows)
        self._table: Table | None = None
        self._nt: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.entries: dict[bytes, MaskEntry] = {}

    def classes(self, x: int) -> tuple[np.ndarray, np.ndarray]:
        """AW(X) as token ids, and the trie nodes where X may end and a token go on."""
        hit = self._nt.get(x)
        if hit is None:
            if self._table is None:
                self._table = Table(self.cnf, start=x)
                self._acc = np.zeros(self.trie.n_nodes + 1, np.int32)
            else:
                self._table.restart(x)
            aw = np.zeros(self.n_words, np.uint32)
            self._acc[0] = 0
            self._table.walk(self.trie, aw, self._acc)
            hit = self._nt[x] = (_ids(aw), self._acc[1:1 + self._acc[0]].copy())
        return hit

    def entry(self, key: bytes) -> MaskEntry:
        """The entry for the seed set ``key`` (Table.seed_key's bytes)."""
        e = self.entries.get(key)
        if e is not None:
            return e
        seeds = np.frombuffer(key, np.uint64).reshape(-1, 5)
        aw = np.zeros(self.n_words, np.uint32)
        u = np.zeros(self.n_words, np.uint32)
        t = self.trie
        for row in seeds:
            a, ends = self.classes(int(row[0]))
            _set_ids(aw, a)
            _undecided(ends, row[1:], t.byte, t.size, t.tok_start, t.tok_ids, self.node_ok, u)
        u &= ~aw
        undecided = int(np.unpackbits(u.view(np.uint8)).sum())
        sub = None
        if undecided:
            sub = TokenTrie(*_sub_trie(t.byte, t.depth, t.size, t.tok_start, t.tok_ids, u))
        e = self.entries[key] = MaskEntry(aw, sub, undecided)
        if len(self.entries) > self.max_entries:
            del self.entries[next(iter(self.entries))]
        return e


_CLASSES: "OrderedDict[tuple[int, int], tuple[CNF, TokenTrie, TokenClasses]]" = OrderedDict()


def token_classes(cnf: CNF, trie: TokenTrie, n_words: int) -> TokenClasses:
    """The classes of ``cnf`` over ``trie``, shared by every matcher of the pair (the 8
    pairs used last are kept)."""
    k = (id(cnf), id(trie))
    hit = _CLASSES.get(k)
    if hit is None or hit[0] is not cnf or hit[1] is not trie:
        hit = _CLASSES[k] = (cnf, trie, TokenClasses(cnf, trie, n_words))
        if len(_CLASSES) > 8:
            _CLASSES.popitem(last=False)
    else:
        _CLASSES.move_to_end(k)
    return hit[2]


def _ids(words: np.ndarray) -> np.ndarray:
    return np.nonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))[0].astype(np.int32)


@kernel(nogil=False, nrt=True)
def _set_ids(words, ids):
    for tid in ids:
        words[tid >> 5] |= np.uint32(1) << np.uint32(tid & 31)


@kernel(nogil=False, nrt=True)
def _undecided(ends, follow_ctx, tbyte, tsize, tok_start, tok_ids, node_ok, out):
    """Set in ``out`` the tokens below a child j of a node in ``ends`` whose byte is in
    ``follow_ctx`` (4 words) and whose bytes pass ``node_ok`` (a node that fails fails for
    its whole subtree)."""
    for i in ends:
        j = i + 1
        while j < i + tsize[i]:
            c = tbyte[j]
            if node_ok[j] and (follow_ctx[c >> 6] >> np.uint64(c & 63)) & np.uint64(1):
                k = j
                end = j + tsize[j]
                while k < end:
                    if not node_ok[k]:
                        k += tsize[k]
                        continue
                    for q in range(tok_start[k], tok_start[k + 1]):
                        tid = tok_ids[q]
                        out[tid >> 5] |= np.uint32(1) << np.uint32(tid & 31)
                    k += 1
            j += tsize[j]


@kernel(nogil=False, nrt=True)
def _node_ok(byte, depth, follows):
    """Per trie node: every adjacent byte pair on its path may occur inside a sentence
    (``follows``); the root and the nodes of depth 1 pass."""
    n = byte.shape[0]
    ok = np.ones(n, np.bool_)
    path = np.zeros(4097, np.int32)
    for i in range(1, n):
        d = depth[i]
        path[d] = i
        if d >= 2:
            p = path[d - 1]
            ok[i] = ok[p] and follows[byte[p], byte[i]]
    return ok


@kernel(nogil=False, nrt=True)
def _sub_trie(byte, depth, size, tok_start, tok_ids, want):
    """The trie of the tokens in ``want`` (uint32 words): the nodes on their paths, in the
    same depth-first order, sizes recounted, each node listing only wanted tokens."""
    n = byte.shape[0]
    own = np.zeros(n + 1, np.int64)  # prefix sums of wanted tokens per node
    for i in range(n):
        c = 0
        for k in range(tok_start[i], tok_start[i + 1]):
            tid = tok_ids[k]
            if (want[tid >> 5] >> np.uint32(tid & 31)) & np.uint32(1):
                c += 1
        own[i + 1] = own[i] + c
    keep = np.zeros(n + 1, np.int64)  # prefix sums of kept nodes
    for i in range(n):
        k = 1 if i == 0 or own[i + size[i]] > own[i] else 0
        keep[i + 1] = keep[i] + k
    m = keep[n]
    nb = np.zeros(m, np.int32)
    nd = np.zeros(m, np.int32)
    ns = np.zeros(m, np.int32)
    nts = np.zeros(m + 1, np.int32)
    nids = np.zeros(own[n], np.int32)
    j = 0
    q = 0
    for i in range(n):
        if keep[i + 1] == keep[i]:
            continue
        nb[j] = byte[i]
        nd[j] = depth[i]
        ns[j] = keep[i + size[i]] - keep[i]
        nts[j] = q
        for k in range(tok_start[i], tok_start[i + 1]):
            tid = tok_ids[k]
            if (want[tid >> 5] >> np.uint32(tid & 31)) & np.uint32(1):
                nids[q] = tid
                q += 1
        j += 1
    nts[m] = q
    return nb, nd, ns, nts, nids
