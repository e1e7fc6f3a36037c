"""Token-level matcher over the matrix recognizer: the Earley Matcher's API and semantics.

    m = Matcher(grammar, vocab, backend="valiant")    # or ValiantMatcher(grammar, vocab)
    m.fill_next_token_bitmask(bitmask); m.accept_token(tid); m.rollback(k); m.is_terminated()

A token is allowed when the text so far followed by its bytes is a viable prefix (so a
token may end inside a multi-byte character); a stop token exactly when the text so far
is in the language, and accepting it terminates. The mask is a depth-first search of the
vocabulary's byte trie (trie.py), one table column per trie node: a token spanning several
terminals is just several columns, and a dead prefix prunes its whole subtree. With
``cache=True`` (default) most of it comes from the mask cache (classes.py): the union of
the token classes of the seeds of Pred(n), plus a walk of the sub-trie of the undecided
tokens only; ``cache=False`` walks the whole trie every time (the cross-check).

``device="cpu"`` computes the columns with the numba bitset kernels (kernel.py, the fast
path); ``"cuda"`` (or ``"torch"``: torch on the CPU) with dense torch products
(torch_table.py), an independent formulation the tests hold to the same masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...grammar import Grammar
from ..bitmask import allowed_ids, write_row
from ..vocab import Vocab
from .kernel import N_COUNTERS
from .classes import token_classes
from .cnf import CNF, build_cnf
from .table import Table


@dataclass(frozen=True)
class MatrixCounters:
    """Work of one step (deltas): table columns computed, non-empty split points visited,
    cells made final, bitset products and the 64-bit words they OR-ed, trie nodes walked."""

    columns: int = 0
    splits: int = 0
    cells: int = 0
    products: int = 0
    words: int = 0
    trie_nodes: int = 0

    @staticmethod
    def delta(after: np.ndarray, before: np.ndarray) -> "MatrixCounters":
        d = [int(x) for x in after - before]
        return MatrixCounters(*d[:N_COUNTERS])

    def as_dict(self) -> dict:
        return dict(columns=self.columns, splits=self.splits, cells=self.cells,
                    products=self.products, words=self.words, trie_nodes=self.trie_nodes)


_ZERO = MatrixCounters()


@lru_cache(maxsize=16)
def cnf_of(grammar: Grammar) -> CNF:
    """The binarised normal form of ``grammar`` (cached per grammar)."""
    return build_cnf(grammar)


class ValiantMatcher:
    """Grammar-constrained decoding state over one vocabulary, on the matrix recognizer."""

    backend = "valiant"

    def __init__(self, grammar: Grammar | CNF, vocab: Vocab | None = None, *, device: str = "cpu",
                 cache: bool = True):
        self.cnf = grammar if isinstance(grammar, CNF) else cnf_of(grammar)
        self.vocab = vocab if vocab is not None else Vocab.qwen()
        self.device = device
        if device == "cpu":
            self.table = Table(self.cnf)
        elif device == "torch" or device == "cuda" or device.startswith("cuda:"):
            from .torch_table import TorchTable  # torch is optional: imported only here
            self.table = TorchTable(self.cnf, "cpu" if device == "torch" else device)
        else:
            raise ValueError(f"device is 'cpu' (numba), 'torch' (torch on CPU) or 'cuda', not {device!r}")
        self._buf = np.zeros(self.vocab.n_words, np.uint32)
        self._classes = token_classes(self.cnf, self.vocab.trie, self.vocab.n_words) if cache else None
        self._eos = [(e >> 5, np.uint32(1 << (e & 31))) for e in self.vocab.eos_ids]
        self._out = self._out_row = self._out_words = None
        self.last_counters = _ZERO
        self.reset()

    # ------------------------------------------------------------ state
    def reset(self) -> None:
        self.table.truncate(0)
        self._history: list[tuple[int, bool, bytes]] = []  # (bytes, stop token, key) before each step
        self._terminated = False
        self._key = self.table.seed_key()  # the mask cache's key of the committed text

    def is_terminated(self) -> bool:
        return self._terminated

    def can_terminate(self) -> bool:
        """True when the text so far is in the language (a stop token is allowed)."""
        return not self._terminated and self.table.accepting()

    def rollback(self, k: int = 1) -> None:
        if k > len(self._history):
            raise ValueError(f"cannot roll back {k} tokens: only {len(self._history)} accepted")
        for _ in range(k):
            n, eos, self._key = self._history.pop()
            if eos:
                self._terminated = False
            else:
                self.table.truncate(n)

    @property
    def num_tokens(self) -> int:
        return len(self._history)

    # ------------------------------------------------------------ steps
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when the token is not allowed."""
        before = self.table.counters.copy()
        ok = self._accept(int(token_id))
        self.last_counters = MatrixCounters.delta(self.table.counters, before)
        return ok

    def _accept(self, tid: int) -> bool:
        if self._terminated or not 0 <= tid < len(self.vocab):
            return False
        if tid in self.vocab.eos_ids:
            if self.table.accepting():
                self._history.append((self.table.n, True, self._key))
                self._terminated = True
                return True
            return False
        data = self.vocab.token_bytes[tid]
        return bool(data) and self._push(data)

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (one history step); for tests and text prefixes."""
        return not self._terminated and self._push(bytes(data))

    def _push(self, data: bytes) -> bool:
        n = self.table.n
        if not self.table.viable() or not self.table.push(data):
            return False
        self._history.append((n, False, self._key))
        self._key = self.table.seed_key()
        return True

    # ------------------------------------------------------------ masks
    def compute_mask(self) -> np.ndarray:
        """The packed mask as uint32 words (a view of an internal buffer)."""
        return self._fill(self._buf)

    def _fill(self, buf: np.ndarray) -> np.ndarray:
        """Write the mask into ``buf`` (a C-contiguous uint32 vector of at least
        ``vocab.n_words`` words; words past them are cleared)."""
        tab = self.table
        self.last_counters = _ZERO
        if self._terminated:
            buf[:] = 0
            return buf
        if self._classes is None:
            before = tab.counters.copy()
            buf[:] = 0
            tab.walk(self.vocab.trie, buf)
            self.last_counters = MatrixCounters.delta(tab.counters, before)
        else:
            e = self._classes.entries.get(self._key)
            if e is None:
                e = self._classes.entry(self._key)
            nw = len(e.aw)
            if len(buf) == nw:
                buf[:] = e.aw
            else:
                buf[:nw] = e.aw
                buf[nw:] = 0
            if e.sub is not None:
                before = tab.counters.copy()
                tab.walk(e.sub, buf)
                self.last_counters = MatrixCounters.delta(tab.counters, before)
        if tab.accepting():
            for w, bit in self._eos:
                buf[w] |= bit
        return buf

    def fill_next_token_bitmask(self, out, row: int = 0) -> MatrixCounters:
        """Write the mask into ``out``: a numpy int32 array of ceil(n/32) words, or
        (batch, words) with ``row``; or a torch int32 tensor of the same shapes (any
        device). Returns the step's counters."""
        if out is self._out and row == self._out_row:  # the row checked last time
            self._fill(self._out_words)
            return self.last_counters
        if isinstance(out, np.ndarray):
            target = out if out.ndim == 1 else out[row]
            if target.shape[0] < self.vocab.n_words:
                raise ValueError(f"bitmask has {target.shape[0]} words, need {self.vocab.n_words}")
            if target.dtype in (np.int32, np.uint32) and target.flags.c_contiguous:
                # straight into the caller's row (a numpy array cannot change shape or
                # dtype in place while this view holds it)
                self._out, self._out_row, self._out_words = out, row, target.view(np.uint32)
                self._fill(self._out_words)
                return self.last_counters
        write_row(self.compute_mask(), out, row)
        return self.last_counters

    def allowed_tokens(self) -> np.ndarray:
        """Ids of the allowed tokens (unpacked mask), for tests and debugging."""
        return allowed_ids(self.compute_mask(), len(self.vocab))
