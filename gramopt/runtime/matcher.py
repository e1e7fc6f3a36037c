"""Token-level matcher: Earley chart + vocabulary trie → packed int32 token masks.

    m = Matcher(grammar, Vocab.qwen())
    m.fill_next_token_bitmask(bitmask)   # int32[ceil(n/32)] or int32[batch, words] + row
    m.accept_token(tid)                  # False (state unchanged) when not allowed
    m.is_terminated(); m.rollback(k); m.reset()

Semantics (xgrammar's): a token is allowed when the text so far followed by its bytes is
a viable prefix of the grammar's language (a byte string, so a token may end inside a
multi-byte character); a stop token is allowed exactly when the text so far is in the
language, and accepting it terminates the matcher. Bit i of word i // 32 is token i.

Every step reports ``Counters`` (items, predictions, completions, scans, trie nodes, Leo
chain hits, sets) — the inputs of the SAC proxy — as the value of ``accept_token``'s
sibling ``last_counters`` and the return value of ``fill_next_token_bitmask``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..grammar import Grammar
from . import earley as K
from .chart import Chart
from .compile import CompiledGrammar, compile_grammar
from .tokens import TokenTable
from .vocab import Vocab


@dataclass(frozen=True)
class Counters:
    """Work done by one step (deltas): Earley items added (``items`` = predictions +
    completions + scans + initial items), trie nodes pushed by the mask walk, Leo chain
    entries used, Earley sets built."""

    items: int = 0
    predictions: int = 0
    completions: int = 0
    scans: int = 0
    trie_nodes: int = 0
    leo: int = 0
    sets: int = 0

    @staticmethod
    def delta(after: np.ndarray, before: np.ndarray) -> "Counters":
        d = after - before
        return Counters(int(d[K.C_ITEMS]), int(d[K.C_PREDICT]), int(d[K.C_COMPLETE]),
                        int(d[K.C_SCAN]), int(d[K.C_TRIE]), int(d[K.C_LEO]), int(d[K.C_SETS]))

    def as_dict(self) -> dict:
        return dict(items=self.items, predictions=self.predictions, completions=self.completions,
                    scans=self.scans, trie_nodes=self.trie_nodes, leo=self.leo, sets=self.sets)


_TABLES: "OrderedDict[tuple, TokenTable]" = OrderedDict()


def token_table(grammar: Grammar | CompiledGrammar, vocab: Vocab) -> TokenTable:
    """The compiled grammar and its token classes for ``vocab`` (cached per pair)."""
    key = (grammar if isinstance(grammar, Grammar) else id(grammar), id(vocab))
    t = _TABLES.get(key)
    if t is not None and t.vocab is vocab:
        _TABLES.move_to_end(key)
        return t
    cg = grammar if isinstance(grammar, CompiledGrammar) else compile_grammar(grammar)
    t = TokenTable(cg, vocab)
    _TABLES[key] = t
    while len(_TABLES) > 16:
        _TABLES.popitem(last=False)
    return t


class Matcher:
    """Grammar-constrained decoding state over one vocabulary.

    ``mode="cached"`` (default) builds masks from per-state token classes (tokens.py) and
    walks only the undecided tokens, through the set automaton (earley.memo_*: Earley sets
    hash-consed by kernel, transitions cached for the mask); ``mode="walk"`` walks the whole
    trie with one Earley set per node every time (the plain algorithm, kept as a
    cross-check).
    """

    ROOT_LIMIT = 64

    def __init__(self, grammar: Grammar | CompiledGrammar | TokenTable, vocab: Vocab | None = None,
                 *, mode: str = "cached", precompute: bool = False):
        if isinstance(grammar, TokenTable):
            self.table = grammar
        else:
            self.table = token_table(grammar, vocab if vocab is not None else Vocab.qwen())
        if mode not in ("cached", "walk"):
            raise ValueError("mode is 'cached' or 'walk'")
        self.mode = mode
        self.cg = self.table.cg
        self.vocab = self.table.vocab
        self.G = self.table.G
        self.T = self.table.T
        self._eos = np.array(self.vocab.eos_ids, np.int64)
        self._buf = np.zeros(self.vocab.n_words, np.uint32)
        self._stack = np.zeros(4097, np.int32)  # the walk's set at each trie depth
        self.chart = Chart(self.cg.n_rules)
        self.last_counters = Counters()
        if precompute:
            self.table.precompute()
        self.reset()

    # ------------------------------------------------------------ state
    def reset(self) -> None:
        self._history: list[tuple[int, bool]] = []
        self._terminated = False
        if not self.cg.empty_language:
            self.chart.run(K.init_chart, self.G, self.cg.start_state, 0, self.cg.accept_state)

    def is_terminated(self) -> bool:
        return self._terminated

    def can_terminate(self) -> bool:
        """True when the text so far is in the language (a stop token is allowed)."""
        return (not self.cg.empty_language) and not self._terminated and self.chart.accepting()

    def rollback(self, k: int = 1) -> None:
        if k > len(self._history):
            raise ValueError(f"cannot roll back {k} tokens: only {len(self._history)} accepted")
        for _ in range(k):
            n_sets, eos = self._history.pop()
            if eos:
                self._terminated = False
            else:
                self.chart.n_sets = n_sets

    @property
    def num_tokens(self) -> int:
        return len(self._history)

    # ------------------------------------------------------------ steps
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when the token is not allowed."""
        before = self.chart.counters.copy()
        ok = self._accept(int(token_id))
        self.last_counters = Counters.delta(self.chart.counters, before)
        return ok

    def _accept(self, tid: int) -> bool:
        if self._terminated or self.cg.empty_language or not 0 <= tid < len(self.vocab):
            return False
        if tid in self.vocab.eos_ids:
            if self.chart.accepting():
                self._history.append((self.chart.n_sets, True))
                self._terminated = True
                return True
            return False
        data = self.vocab.token_bytes[tid]
        if not data:
            return False
        return self._push(data)

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (one history step); for tests and text prefixes."""
        if self._terminated or self.cg.empty_language:
            return False
        return self._push(bytes(data))

    def _push(self, data: bytes) -> bool:
        n = self.chart.n_sets
        r = self.chart.run(K.push_bytes, self.G, np.frombuffer(data, np.uint8).astype(np.int32),
                           self.cg.accept_state)
        if r <= 0:
            self.chart.n_sets = n
            return False
        self._history.append((n, False))
        return True

    # ------------------------------------------------------------ masks
    def compute_mask(self) -> np.ndarray:
        """The packed mask as uint32 words (a view of an internal buffer)."""
        buf = self._buf
        buf[:] = 0
        before = self.chart.counters.copy()
        if not self._terminated and not self.cg.empty_language:
            acc = self.cg.accept_state
            roots = K.roots(self.G, self.chart.S, self.cg.start_state)
            if self.mode == "walk":
                self.chart.run(K.walk_range, self.G, self.T, 1, self.table.trie.n_nodes, buf, acc)
            else:
                K.memo_begin(self.chart.S)
                if len(roots) > self.ROOT_LIMIT:
                    self.chart.run(K.memo_walk_range, self.G, self.T, 1, self.table.trie.n_nodes,
                                   self.chart.S[K.I_META][K.W_ROOT], buf, acc, self._stack)
                else:
                    classes = [self.table.get(int(q)) for q in roots]
                    for c in classes:
                        np.bitwise_or(buf, c.aw, out=buf)
                    for c in classes:
                        if len(c.ent_node):
                            self.chart.run(K.memo_walk_entries, self.G, self.T, c.ent_node, c.ent_kind,
                                           c.ent_skip, buf, acc, self._stack)
            if self.chart.accepting():
                for e in self.vocab.eos_ids:
                    buf[e >> 5] |= np.uint32(1 << (e & 31))
        self.last_counters = Counters.delta(self.chart.counters, before)
        return buf

    def fill_next_token_bitmask(self, out, row: int = 0) -> Counters:
        """Write the mask into ``out``: a numpy int32 array of ceil(n/32) words, or
        (batch, words) with ``row``; or a torch int32 tensor of the same shapes (any
        device). Returns the step's counters."""
        buf = self.compute_mask().view(np.int32)
        if isinstance(out, np.ndarray):
            target = out if out.ndim == 1 else out[row]
            if target.shape[0] < len(buf):
                raise ValueError(f"bitmask has {target.shape[0]} words, need {len(buf)}")
            target[:len(buf)] = buf
            target[len(buf):] = 0
        else:  # torch
            import torch
            target = out if out.dim() == 1 else out[row]
            src = torch.from_numpy(buf.copy())
            target[:len(buf)].copy_(src.to(target.device), non_blocking=False)
            if target.shape[0] > len(buf):
                target[len(buf):] = 0
        return self.last_counters

    def allowed_tokens(self) -> np.ndarray:
        """Ids of the allowed tokens (unpacked mask), for tests and debugging."""
        buf = self.compute_mask()
        bits = np.unpackbits(buf.view(np.uint8), bitorder="little")
        return np.nonzero(bits[:len(self.vocab)])[0]


def allocate_token_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """A numpy int32 (batch, ceil(vocab_size/32)) buffer, all bits set."""
    return np.full((batch, (vocab_size + 31) // 32), -1, dtype=np.int32)
