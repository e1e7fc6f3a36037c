"""The same incremental table as dense torch tensors, on any device (CPU or CUDA).

    tab = TorchTable(cnf, device="cuda")    # same interface as table.Table

Cells are a bool tensor ``cell[i, t, A]`` and predictions ``pred[t, A]``; the grammar is
dense matrices: unit closure ``up_star[C, A]`` (A ⇒* C by units), left-corner closure
``lc_star[A, X]``, and the binary rules as index vectors (``lhs``, ``left``, ``right``)
with a one-hot ``lhs_onehot[r, A]``. A column is computed as in kernel.py — back-
substitution over the split point k = t-1 … 0 — but each step is a batched product over
all origins i < k at once:

    x        = (cell(k, t) @ up_star > 0) ∧ Pred(k)                  unit closure, filter
    cell(·, t)[:k] |= ((cell[:k, k, left] ∧ x[right]) @ lhs_onehot) > 0

and Pred(t) = LC*({ right[r] : cell(i, t, left[r]) ∧ Pred(i, lhs[r]) }). Memory is
O(T²·N) and a column is t small kernels: this path exists to run the recognizer on a GPU
and to check the numba kernels against an independent formulation (tests compare masks);
the numba path (table.py) is the fast one on CPU.
"""

from __future__ import annotations

import numpy as np

from .cnf import CNF
from .table import CommittedText


class TorchTable(CommittedText):
    """Columns 0..n of the table as torch tensors on ``device``."""

    def __init__(self, cnf: CNF, device: str = "cpu", capacity: int = 64):
        import torch
        super().__init__(cnf)
        self.torch = torch
        self.device = torch.device(device)
        n = max(cnf.n, 1)
        self.counters = np.zeros(6, np.int64)
        dev = self.device
        up = torch.zeros((n, n), dtype=torch.float32)
        for c in range(cnf.n):
            for a in cnf.up[cnf.up_start[c]:cnf.up_start[c + 1]]:
                up[c, int(a)] = 1
        self.up_star = up.to(dev)
        lc = torch.zeros((n, n), dtype=torch.bool)
        for a in range(cnf.n):
            lc[a, a] = True
        for a in range(cnf.n):  # transitive closure of the left-corner edges, by squaring
            for x in cnf.lc[cnf.lc_start[a]:cnf.lc_start[a + 1]]:
                lc[a, int(x)] = True
        lcf = lc.float()
        while True:
            nxt = (lcf @ lcf > 0).float()
            if torch.equal(nxt, lcf):
                break
            lcf = nxt
        self.lc_star = lcf.to(dev)
        r2 = np.arange(len(cnf.r2_lhs))
        self.lhs = torch.as_tensor(cnf.r2_lhs.astype(np.int64), device=dev)
        self.left = torch.as_tensor(cnf.r2_b.astype(np.int64), device=dev)
        self.right = torch.as_tensor(np.repeat(np.arange(cnf.n), np.diff(cnf.r2_start)).astype(np.int64),
                                     device=dev)
        onehot = torch.zeros((len(r2), n), dtype=torch.float32)
        onehot[torch.as_tensor(r2), torch.as_tensor(cnf.r2_lhs.astype(np.int64))] = 1
        self.lhs_onehot = onehot.to(dev)
        pre = torch.zeros((256, n), dtype=torch.bool)
        for b in range(256):
            for p in cnf.byte_pre[cnf.byte_start[b]:cnf.byte_start[b + 1]]:
                pre[b, int(p)] = True
        self.pre = pre.to(dev)
        self._alloc(capacity)
        if cnf.start >= 0:
            self.pred[0] = self.lc_star[cnf.start] > 0
        self._keys = [np.array([cnf.start, 0, 0, 0, 0], np.uint64).tobytes() if cnf.start >= 0 else b""]
        self._lhs_np = cnf.r2_lhs.astype(np.int64)
        self._right_np = np.repeat(np.arange(cnf.n), np.diff(cnf.r2_start)).astype(np.int64)

    def _alloc(self, cap: int) -> None:
        torch = self.torch
        n = max(self.cnf.n, 1)
        old = getattr(self, "cell", None)
        self.cell = torch.zeros((cap + 1, cap + 1, n), dtype=torch.bool, device=self.device)
        pred = torch.zeros((cap + 1, n), dtype=torch.bool, device=self.device)
        if old is not None:
            m = old.shape[0]
            self.cell[:m, :m] = old
            pred[:m] = self.pred
        self.pred = pred

    def _column(self, t: int, b: int) -> tuple[bool, bool]:
        """Compute column t for byte b at position t-1, and Pred(t); (viable, accepting)."""
        torch = self.torch
        if t >= self.cell.shape[0]:
            self._alloc(2 * t)
        self.counters[0] += 1
        col = self.cell[:, t]
        col[:t] = False
        col[t - 1] = self.pre[b] & self.pred[t - 1]
        for k in range(t - 1, -1, -1):
            if not bool(col[k].any()):
                continue
            self.counters[1] += 1
            x = ((col[k].float() @ self.up_star) > 0) & self.pred[k]
            col[k] = x
            if k >= 1 and bool(x.any()):
                both = self.cell[:k, k][:, self.left] & x[self.right]  # origins × rules
                col[:k] |= (both.float() @ self.lhs_onehot) > 0
        accepting = self.cnf.start >= 0 and bool(col[0, self.cnf.start])
        fire = (col[:t][:, self.left] & self.pred[:t][:, self.lhs]).any(0)  # rules
        seeds = torch.zeros(self.lc_star.shape[0], dtype=torch.float32, device=self.device)
        seeds.index_add_(0, self.right, fire.float())
        self._fire = fire
        self.pred[t] = (seeds @ self.lc_star) > 0
        return bool(self.pred[t].any()) or accepting, accepting

    # ------------------------------------------------------------ Table's interface
    def seed_key(self) -> bytes:
        """The seeds of Pred(n) with their follow contexts, in table.Table.seed_key's layout."""
        return self._keys[self.n]

    def _key(self) -> bytes:
        """The key of the column just computed, from its fired rules A → B C (kernel.push_byte)."""
        fired = np.flatnonzero(self._fire.cpu().numpy())
        c, a = self._right_np[fired], self._lhs_np[fired]
        ctx = np.zeros((max(self.cnf.n, 1), 4), np.uint64)
        np.bitwise_or.at(ctx, c, self.cnf.follow[a])
        seeds = np.unique(c)
        return np.concatenate([seeds[:, None].astype(np.uint64), ctx[seeds]], axis=1).tobytes()

    def push(self, data: bytes) -> bool:
        acc, keys = [], []
        for i, b in enumerate(data):
            ok, a = self._column(self.n + i + 1, b)
            if not ok:
                return False
            acc.append(a)
            keys.append(self._key())
        self._accepting[self.n + 1:] = acc
        self._keys[self.n + 1:] = keys
        self.n += len(data)
        return True

    def walk(self, trie, out: np.ndarray) -> None:
        """OR into ``out`` the tokens of ``trie`` that keep the committed text viable."""
        if self.cnf.start < 0:
            return
        i, n0 = 1, self.n
        while i < trie.n_nodes:
            t = n0 + int(trie.depth[i])
            self.counters[5] += 1
            ok, _ = self._column(t, int(trie.byte[i]))
            if not ok:
                i += int(trie.size[i])
                continue
            for tid in trie.tok_ids[trie.tok_start[i]:trie.tok_start[i + 1]]:
                out[tid >> 5] |= np.uint32(1 << (int(tid) & 31))
            i += 1
