"""The recognizer state: the committed columns of the incremental table and their growth.

    tab = Table(build_cnf(grammar))
    tab.push(b"text")        # → bool (False: not viable, state unchanged)
    tab.n                    # bytes committed; tab.truncate(n) rolls back
    tab.accepting()          # the committed text is in the language
    tab.walk(trie, out)      # OR the viable tokens into ``out`` (uint32 words)
    tab.seed_key()           # the seeds of Pred(n) as bytes: the mask cache's key

Arrays are numpy (the numba kernels of kernel.py work on them in place); a capacity that
runs out makes the kernel return OVERFLOW with nothing committed, and the array doubles.
"""

from __future__ import annotations

import numpy as np

from .kernel import N_COUNTERS, OVERFLOW, DEAD, push_byte, walk_trie, write_pred0
from .cnf import CNF


class CommittedText:
    """What every table backend keeps of the committed bytes: their count ``n`` and, per
    committed length, whether that prefix is a sentence (``_accepting``)."""

    def __init__(self, cnf: CNF):
        self.cnf = cnf
        self._accepting = [cnf.start_nullable]  # per committed length
        self.n = 0

    def truncate(self, n: int) -> None:
        if not 0 <= n <= self.n:
            raise ValueError(f"cannot truncate to {n}: {self.n} bytes committed")
        self.n = n
        del self._accepting[n + 1:]

    def accepting(self) -> bool:
        return self._accepting[self.n]

    def viable(self) -> bool:
        """The committed text is a viable prefix (always, except ε of an empty language)."""
        return self.n > 0 or self.cnf.start >= 0 or self.cnf.start_nullable


class Table(CommittedText):
    """Columns 0..n of the table for the bytes pushed so far (see kernel.py). ``start``
    (default the grammar's) is the nonterminal whose prefixes are recognized: the mask
    cache's classifier runs one table per nonterminal X with start X."""

    def __init__(self, cnf: CNF, capacity: int = 256, start: int | None = None):
        super().__init__(cnf)
        self.start = cnf.start if start is None else int(start)
        n = max(cnf.n, 1)
        self._g = cnf.arrays()
        self.counters = np.zeros(N_COUNTERS, np.int64)
        self.cur_idx = np.full(n, -1, np.int32)
        self.prev_idx = np.full(n, -1, np.int32)
        self.in_f = np.zeros(n, np.bool_)
        self.seed_flag = np.zeros(n, np.bool_)
        self.fctx = np.zeros((n, 4), np.uint64)
        self.finals = np.zeros(n, np.int32)
        self.stack = np.zeros(n, np.int32)
        self._alloc(capacity, 4 * n + 64, 16 * n + 1024, 20 * n + 64)
        self._none = np.zeros(0, np.int32)
        write_pred0(self.start, cnf.lc_start, cnf.lc, self.pred_row, self.pred_t, self.seed_start,
                    self.seed_pool, self.stack)

    def restart(self, start: int) -> None:
        """Empty the table and recognize the prefixes of ``start`` instead."""
        self.start = int(start)
        self.truncate(0)
        write_pred0(self.start, self.cnf.lc_start, self.cnf.lc, self.pred_row, self.pred_t, self.seed_start,
                    self.seed_pool, self.stack)

    # ------------------------------------------------------------ storage
    def _alloc(self, cap_t: int, cap_e: int, cap_p: int, cap_s: int) -> None:
        n = max(self.cnf.n, 1)
        self.col_start = np.zeros(cap_t + 2, np.int64)
        self.col_pool = np.zeros(cap_t + 2, np.int64)
        self.col_r1 = np.zeros(cap_t + 2, np.int64)
        self.ent_nt = np.zeros(cap_e, np.int32)
        self.ent_off = np.zeros(cap_e, np.int64)
        self.ent_lo = np.zeros(cap_e, np.int64)
        self.pool = np.zeros(cap_p, np.uint64)
        self.pred_row = np.zeros((cap_t + 2, self.cnf.words), np.uint64)
        self.seed_start = np.zeros(cap_t + 2, np.int64)
        self.seed_pool = np.zeros(cap_s, np.uint64)
        self.pred_t = np.zeros((n, (cap_t + 2 + 63) // 64), np.uint64)

    def _grow(self, need_t: int) -> None:
        """Make room for column ``need_t`` (columns below it in use), keeping the contents."""
        old = (self.col_start, self.col_pool, self.col_r1, self.ent_nt, self.ent_off, self.ent_lo,
               self.pool, self.seed_start, self.seed_pool, self.pred_row, self.pred_t)
        n = max(self.cnf.n, 1)
        cap_t = len(self.col_start) - 2
        if need_t + 2 >= cap_t:
            cap_t = max(2 * cap_t, need_t + 8)
        top = min(need_t, len(self.col_start) - 1)
        e_used = int(self.col_start[top])
        p_used = int(self.col_pool[top - 1]) if top >= 1 else 0
        nw = (need_t + 63) // 64 + 1
        cap_e = max(len(self.ent_nt), 2 * (e_used + n))
        cap_p = max(len(self.pool), 2 * (p_used + n * nw))
        cap_s = max(len(self.seed_pool), 2 * (int(self.seed_start[top]) + 5 * n))
        self._alloc(cap_t, cap_e, cap_p, cap_s)
        for new, o in zip((self.col_start, self.col_pool, self.col_r1, self.ent_nt, self.ent_off,
                           self.ent_lo, self.pool, self.seed_start, self.seed_pool), old):
            new[:len(o)] = o[:len(new)]
        self.pred_row[:old[9].shape[0]] = old[9]
        self.pred_t[:, :old[10].shape[1]] = old[10]

    def _state(self) -> tuple:
        return (*self._g, self.start, self.col_start, self.col_pool, self.col_r1, self.ent_nt,
                self.ent_off, self.ent_lo, self.pool, self.pred_row, self.pred_t, self.seed_start, self.seed_pool,
                self.cur_idx, self.prev_idx, self.in_f, self.finals, self.seed_flag, self.fctx, self.stack,
                self.counters)

    # ------------------------------------------------------------ steps
    def push(self, data: bytes) -> bool:
        """Append ``data``; False (state unchanged) when the prefix stops being viable."""
        n0 = self.n
        acc = []
        for i, b in enumerate(data):
            t = n0 + i + 1
            while True:
                st, ok = push_byte(*self._state(), t, b, False)
                if st != OVERFLOW:
                    break
                self._grow(t)
            if st == DEAD:
                return False
            acc.append(bool(ok))
        self.n = n0 + len(data)
        self._accepting[n0 + 1:] = acc
        return True

    def seed_key(self) -> bytes:
        """The seeds of Pred(n) with their follow contexts (kernel.push_byte), as bytes:
        what the tokens allowed next depend on, beyond the walk of the undecided ones
        (classes.py)."""
        n = self.n
        return self.seed_pool[self.seed_start[n]:self.seed_start[n + 1]].tobytes()

    def walk(self, trie, out: np.ndarray, acc_nodes: np.ndarray | None = None) -> None:
        """OR into ``out`` the tokens of ``trie`` that keep the committed text viable;
        with ``acc_nodes``, also list the nodes where the start may end and go on
        (kernel.walk_trie)."""
        if self.start < 0:
            return
        depth = _max_depth(trie)
        extra = acc_nodes if acc_nodes is not None else self._none
        while True:
            if self.n + depth + 2 >= len(self.col_start) - 2 or \
                    (self.n + depth + 2) // 64 >= self.pred_t.shape[1]:
                self._grow(self.n + depth + 2)
                continue
            st = walk_trie(*self._state(), self.n, self.cnf.follows, trie.byte, trie.depth, trie.size,
                           trie.tok_start, trie.tok_ids, out, extra)
            if st >= 0:
                return
            self._grow(-st)


def _max_depth(trie) -> int:
    """The longest token's length in bytes (kept on the trie object)."""
    d = getattr(trie, "_matrix_max_depth", None)
    if d is None:
        d = int(trie.depth.max()) if trie.n_nodes > 1 else 0
        trie._matrix_max_depth = d
    return d
