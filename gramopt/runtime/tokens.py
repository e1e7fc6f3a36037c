"""Per-state token classes (the adaptive mask cache), per compiled grammar × vocabulary.

For a state q, ``classify_state`` (earley.py) splits the vocabulary into AW(q) (accepted
wherever an item at q is live), U(q) (decided at mask time: the token finishes q's rule
and continues in the context) and rejected. Invariant used by the mask: for the last set
p, every allowed token is in AW(q) or U(q) for some *root* q — an item of p that was not
predicted at p (origin < p), or the start state at p = 0 — because every item of p with
origin p descends by prediction from such an item, and a completion at p has already
advanced the parent, itself a root. So mask = ∪ AW(q) ∪ walk(U(q)), exact.

The classes are computed on first use of a state (JIT: ``Matcher()`` classifies nothing,
a mask classifies the roots it meets); ``precompute()`` is the ahead-of-time warm-up that
classifies every possible root (for a build step, or to take the cost out of the first
masks). Classification and the mask-time walks of U(q) go through the set automaton
(earley.memo_*), so a trie node inside a regular stretch costs a table lookup.
"""

from __future__ import annotations

import time

import numpy as np

from . import earley as K
from .chart import Chart
from .compile import CompiledGrammar, HAS_OUT
from .vocab import Vocab


class StateClasses:
    __slots__ = ("aw", "ent_node", "ent_kind", "ent_skip", "n_aw")

    def __init__(self, aw, ent_node, ent_kind, ent_skip):
        self.aw = aw
        self.ent_node = ent_node
        self.ent_kind = ent_kind
        self.ent_skip = ent_skip
        self.n_aw = None


class TokenTable:
    """AW/U classes of the states of ``cg`` over ``vocab``; shared by matchers."""

    def __init__(self, cg: CompiledGrammar, vocab: Vocab):
        self.cg = cg
        self.vocab = vocab
        self.trie = vocab.trie
        self.T = self.trie.arrays()
        self.G = cg.arrays()
        self.classes: dict[int, StateClasses] = {}
        self.chart = Chart(cg.n_rules)
        n = self.trie.n_nodes
        self._out_node = np.zeros(n + 1, np.int32)
        self._out_kind = np.zeros(n + 1, np.int32)
        self._comp = np.zeros(4097, np.int32)
        self._path = np.zeros(4097, np.int32)
        self._marked = np.zeros(4097, np.int32)
        self._sets = np.zeros(4097, np.int32)
        self.seconds = 0.0
        self.trie_nodes = 0

    def get(self, q: int) -> StateClasses:
        c = self.classes.get(q)
        if c is None:
            c = self._classify(q)
            self.classes[q] = c
        return c

    def _classify(self, q: int) -> StateClasses:
        t0 = time.perf_counter()
        aw = np.zeros(self.vocab.n_words, np.uint32)
        before = int(self.chart.counters[K.C_TRIE])
        for _ in range(40):
            aw[:] = 0
            nu = K.classify_state(self.G, self.chart.S, self.T, q, aw, self._out_node,
                                  self._out_kind, self._comp, self._path, self._marked, self._sets)
            if nu >= 0:
                break
            self.chart.grow()
        else:
            raise MemoryError("Earley chart keeps overflowing")
        node = self._out_node[:nu].copy()
        kind = self._out_kind[:nu].copy()
        skip = K.entry_skips(node, kind, self.trie.size)
        self.seconds += time.perf_counter() - t0
        self.trie_nodes += int(self.chart.counters[K.C_TRIE]) - before
        return StateClasses(aw, node, kind, skip)

    def root_states(self) -> list[int]:
        """States that can be roots: the start state and every state with an outgoing edge
        that is the target of some edge (so an item there can have origin < p)."""
        cg = self.cg
        targets = {int(cg.byte_next[i]) for i in np.nonzero(cg.byte_next >= 0)[0]}
        targets |= {int(t) for t in cg.ref_target}
        out = {cg.start_state}
        out |= {q for q in targets if cg.flags[q] & HAS_OUT}
        return sorted(out)

    def precompute(self) -> float:
        """Classify every possible root state now; returns the seconds it took."""
        t0 = time.perf_counter()
        for q in self.root_states():
            self.get(q)
        return time.perf_counter() - t0
