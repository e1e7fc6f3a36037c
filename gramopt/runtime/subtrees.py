"""Subtree classes: a state's token classes below one big trie node, for the U walks.

A mask's U walk (tokens.py) that leaves its root's rule goes on in the context; at a
free-text position (an identifier after ``int ``, an expression after ``= ``) that is most
of the trie. The split of tokens.py holds below any trie node i: with walk set t (the
exact Earley set after i's bytes), a token below i is allowed iff for some root q of t its
bytes after i's are in AW_i(q), or in U_i(q) and the walk from t keeps them alive
(earley.memo_walk_frames). AW_i(q) / U_i(q) depend on q and i alone (``classify_state``
rooted at i), so they are built once per pair and kept here, per token table:

  * ``key``/``val``: open addressing, key ``cls_index << 32 | node`` (-1 empty; at most
    half full) -> row s;
  * ``info[5 s: 5 s + 5]`` = (first entry, end entry, first AW word, end AW word, work);
  * U_i(q) as walk entries ``ent_node/ent_kind/ent_skip[first:end]`` (as tokens.py's);
  * AW_i(q) sparse: the non-zero words of the row, ``aw_word`` (index) / ``aw_bits`` (the
    word, as int32): a subtree holds few tokens, spread over the whole id range, so a dense
    row (19 KB for Qwen) would cost a memory stream per split;
  * ``work`` = the nodes the U entries walk at most plus a quarter of the AW words: what a
    split through this row costs, weighed by the walk against the subtree's size.

Arrays only grow, by replacement (a reader keeps the arrays it was handed, whole); a row is
written before the key that names it. ``MAX_ROWS`` bounds the rows of a table.
"""

from __future__ import annotations

import numpy as np

from . import earley as K

MAX_ROWS = 4096
INFO_W = K.INFO_W


def grown(a: np.ndarray, need: int, fill: int = 0) -> np.ndarray:
    """``a`` itself when it holds ``need`` items, else a copy at least twice as long (a
    reader holding ``a`` keeps it whole; the owner repacks: packed.py)."""
    if need <= len(a):
        return a
    b = np.full(max(need, 2 * len(a)), fill, a.dtype)
    b[:len(a)] = a
    return b


class SubtreeClasses:
    def __init__(self) -> None:
        self.rows: dict[tuple[int, int], int] = {}
        self.key = np.full(64, -1, np.int64)
        self.val = np.zeros(64, np.int32)
        self.info = np.zeros(INFO_W * 16, np.int32)
        self.ent_node = np.zeros(256, np.int32)
        self.ent_kind = np.zeros(256, np.int32)
        self.ent_skip = np.zeros(256, np.int32)
        self.aw_word = np.zeros(1024, np.int32)
        self.aw_bits = np.zeros(1024, np.int32)
        self.n_ents = 0
        self.n_words = 0

    def arrays(self) -> tuple:
        """What the kernels read (the tail of TokenTable.P, layout earley.LAYOUT_P)."""
        return (self.key, self.val, self.info, self.ent_node, self.ent_kind, self.ent_skip,
                self.aw_word, self.aw_bits)

    def wants(self, key: tuple[int, int]) -> bool:
        """Whether (cls_index, node) has no row yet and there is room for one."""
        return key not in self.rows and len(self.rows) < MAX_ROWS

    def add(self, key: tuple[int, int], aw: np.ndarray, node, kind, skip, tsize) -> int:
        """A row for ``key`` (AW as a dense row, U as walk entries); returns its index."""
        s = len(self.rows)
        e0, e1 = self.n_ents, self.n_ents + len(node)
        words = np.flatnonzero(aw)
        w0, w1 = self.n_words, self.n_words + len(words)
        work = int(np.where(kind == 1, tsize[node], 1).sum()) + len(words) // 4
        before = self.arrays()
        self.info = grown(self.info, INFO_W * (s + 1))
        for name in ("ent_node", "ent_kind", "ent_skip"):
            setattr(self, name, grown(getattr(self, name), e1))
        self.aw_word = grown(self.aw_word, w1)
        self.aw_bits = grown(self.aw_bits, w1)
        replaced = any(a is not b for a, b in zip(before, self.arrays()))
        self.ent_node[e0:e1] = node
        self.ent_kind[e0:e1] = kind
        self.ent_skip[e0:e1] = skip
        self.aw_word[w0:w1] = words
        self.aw_bits[w0:w1] = aw[words].view(np.int32)
        self.info[INFO_W * s: INFO_W * (s + 1)] = (e0, e1, w0, w1, min(work, 2**31 - 1))
        self.n_ents, self.n_words = e1, w1
        self.rows[key] = s
        k = (key[0] << 32) | key[1]
        if replaced or 2 * len(self.rows) > len(self.key):
            # new key arrays: a reader holding the old ones never names a row its arrays lack
            keys = np.full(len(self.key) * (2 if 2 * len(self.rows) > len(self.key) else 1), -1, np.int64)
            vals = np.zeros(len(keys), np.int32)
            for (a, b), r in self.rows.items():
                _put(keys, vals, (a << 32) | b, r)
            self.key, self.val = keys, vals
        else:
            _put(self.key, self.val, k, s)
        return s


def _put(keys: np.ndarray, vals: np.ndarray, key: int, val: int) -> None:
    """key -> val into the open-addressing table earley._sub_class probes (the value
    first: a reader that finds the key finds its value)."""
    m = len(keys) - 1
    h = int(K.hash_key(key)) & m
    while keys[h] >= 0 and keys[h] != key:
        h = (h + 1) & m
    vals[h] = val
    keys[h] = key
