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

import threading
import time
import weakref
from collections import OrderedDict

import numpy as np

from . import earley as K
from .chart import Chart
from .packed import Packed
from .compile import REP_UNBOUNDED, REP_W, CompiledGrammar, HAS_OUT
from .subtrees import SubtreeClasses, grown
from .vocab import Vocab


# Token classes shared across grammars (JIT cache): per vocabulary, signature of the
# sub-network reachable from a state -> (AW row, U entries). Bounded, least recently used.
CLASS_CACHE_SIZE = 1024
_CLASS_CACHE: "weakref.WeakKeyDictionary[Vocab, OrderedDict]" = weakref.WeakKeyDictionary()


class StateClasses:
    """The classes of one state: a view of row ``idx`` of its table's pools."""

    __slots__ = ("table", "idx")

    def __init__(self, table: "TokenTable", idx: int):
        self.table = table
        self.idx = idx

    @property
    def aw(self) -> np.ndarray:
        return self.table.aw_pool[self.idx]

    def _ents(self, a: np.ndarray) -> np.ndarray:
        t = self.table
        return a[t.ent_start[self.idx]:t.ent_start[self.idx + 1]]

    @property
    def ent_node(self) -> np.ndarray:
        return self._ents(self.table.ent_node)

    @property
    def ent_kind(self) -> np.ndarray:
        return self._ents(self.table.ent_kind)

    @property
    def ent_skip(self) -> np.ndarray:
        return self._ents(self.table.ent_skip)


class TokenTable:
    """AW/U classes of the states of ``cg`` over ``vocab``; shared by matchers.

    Flat pools (what ``earley.fill_mask`` reads, tuple ``P``): ``cls_id[cls_index(q)]`` (-1
    until q is classified; q itself for a real state, one slot per class of counts for the
    virtual states of a counted repetition, see earley.cls_index), AW rows ``aw_pool[c]``, and U's walk entries ``ent_*[ent_start[c]:
    ent_start[c+1]]``. Pools only grow (reallocated on growth: a reader holding the old
    arrays, cls_id included, sees a consistent older table); a row and its entries are
    written before ``cls_id`` names them."""

    def __init__(self, cg: CompiledGrammar, vocab: Vocab):
        self.cg = cg
        self.vocab = vocab
        self.trie = vocab.trie
        self.T = Packed(self.trie.arrays(), K.LAYOUT_T)
        self.G = Packed(cg.arrays(), K.LAYOUT_G)
        self.classes: dict[int, StateClasses] = {}
        self._rows: dict[tuple, int] = {}  # row contents -> row (rows are shared)
        self.chart = Chart(cg.n_rules)
        n = self.trie.n_nodes
        self._out_node = np.zeros(n + 1, np.int32)
        self._out_kind = np.zeros(n + 1, np.int32)
        self._comp = np.zeros(4097, np.int32)
        self._path = np.zeros(4097, np.int32)
        self._marked = np.zeros(4097, np.int32)
        self._sets = np.zeros(4097, np.int32)
        # the longest token (bytes) bounds how far a token moves a repetition's count
        self._longest = np.array([int(self.trie.depth.max()) if n > 1 else 0], np.int32)
        self.cls_id = np.full(cg.n_states + cg.n_reps * (2 * int(self._longest[0]) + 3), -1, np.int32)
        self.aw_pool = np.zeros((4, vocab.n_words), np.uint32)
        self.ent_start = np.zeros(5, np.int32)
        self.ent_node = np.zeros(64, np.int32)
        self.ent_kind = np.zeros(64, np.int32)
        self.ent_skip = np.zeros(64, np.int32)
        self.subtrees = SubtreeClasses()  # classes below big trie nodes (subtrees.py)
        self.P = self._pools()
        self.seconds = 0.0
        self.trie_nodes = 0
        self._lock = threading.Lock()  # matchers of one table may fill masks in threads
        self._runs: dict[int, tuple] = {}  # byte-edge runs per state (signatures)
        self.shared_hits = 0  # classes taken from another table (same vocabulary)

    def _pools(self) -> Packed:
        return Packed((self.cls_id, self.aw_pool, self.ent_start, self.ent_node, self.ent_kind,
                       self.ent_skip, self._longest) + self.subtrees.arrays(), K.LAYOUT_P)

    def cls_index(self, q: int) -> int:
        """Where q's classes are named in ``cls_id`` (earley.cls_index)."""
        return q if q < self.cg.n_states else int(K.cls_index(self.G, int(self._longest[0]), q))

    def get(self, q: int) -> StateClasses:
        ci = self.cls_index(q)
        c = self.classes.get(ci)
        if c is None:
            with self._lock:  # one classification at a time: it uses the table's own chart
                c = self.classes.get(ci)
                if c is None:
                    c = self._classify(q, ci)
                    self.classes[ci] = c
        return c

    def add_subtrees(self, pairs) -> int:
        """Build the subtree classes of the (state, trie node) pairs a mask asked for
        (earley.memo_walk_frames records them; subtrees.py bounds how many a table keeps);
        later masks split those nodes. Returns how many were built."""
        built = 0
        with self._lock:  # the table's chart classifies
            for q, node in pairs:
                key = (self.cls_index(int(q)), int(node))
                if not self.subtrees.wants(key):
                    continue
                aw, ents, kind, skip = self._classes_of(int(q), int(node))
                self.subtrees.add(key, aw, ents, kind, skip, self.trie.size)
                built += 1
            if built:
                self.P = self._pools()
        return built

    def _signature(self, q: int, limit: int = 48) -> tuple | None:
        """What q's classes depend on, as a value equal across grammars: the recursive
        transition network reachable from q (q's rule from q, every rule it references,
        transitively), states numbered in discovery order: per state its flags, byte
        edges as runs (every run, the no-edge ones included: a run ends where the next
        starts), rule edges (start of the rule, target) and its rule (the start of
        the rule, -1 for q's own). Equal signatures mean isomorphic networks, hence equal
        Earley runs from (q, 0) and equal classes. None when more than ``limit`` states
        are reachable (hashing would cost more than classifying), or a counted repetition's
        virtual state is (its count is not in this picture)."""
        cg = self.cg
        if q >= cg.n_states:
            return None
        bn, flags, rs, rr, rt = cg.byte_next, cg.flags, cg.ref_start, cg.ref_rule, cg.ref_target
        state_rule, rule_start = cg.state_rule, cg.rule_start
        own = int(state_rule[q])
        local = {q: 0}
        order = [q]

        def loc(x: int) -> int:
            k = local.get(x)
            if k is None:
                k = local[x] = len(order)
                order.append(x)
            return k

        parts = []
        i = 0
        while i < len(order):
            if i >= limit:
                return None
            x = order[i]
            i += 1
            if x >= cg.n_states:
                return None
            runs = self._runs.get(x)
            if runs is None:
                row = bn[x * 256:(x + 1) * 256]
                starts = np.concatenate(([0], np.flatnonzero(row[1:] != row[:-1]) + 1)).tolist()
                runs = self._runs[x] = tuple((a, int(row[a])) for a in starts)  # -1 runs too
            r = int(state_rule[x])
            parts.append((int(flags[x]), tuple((a, loc(t) if t >= 0 else -1) for a, t in runs),
                          tuple((loc(int(rule_start[rr[k]])), loc(int(rt[k]))) for k in range(rs[x], rs[x + 1])),
                          -1 if r == own else loc(int(rule_start[r]))))
        return tuple(parts)

    def _classify(self, q: int, ci: int) -> StateClasses:
        sig = self._signature(q)
        shared = _CLASS_CACHE.setdefault(self.vocab, OrderedDict()) if sig is not None else None
        hit = shared.get(sig) if shared is not None else None
        if hit is not None:
            shared.move_to_end(sig)
            self.shared_hits += 1
            return self._store(ci, *hit)
        c = self._classify_now(q, ci)
        if shared is not None:
            shared[sig] = (c.aw.copy(), c.ent_node.copy(), c.ent_kind.copy(), c.ent_skip.copy())
            while len(shared) > CLASS_CACHE_SIZE:
                shared.popitem(last=False)
        return c

    def _classify_now(self, q: int, ci: int) -> StateClasses:
        return self._store(ci, *self._classes_of(q, 0))

    def _classes_of(self, q: int, node: int) -> tuple:
        """(AW row, U entries: node, kind, skip) of state q below trie node ``node``."""
        t0 = time.perf_counter()
        aw = np.zeros(self.vocab.n_words, np.uint32)
        before = int(self.chart.counters[K.C_TRIE])
        for _ in range(40):
            aw[:] = 0
            nu = K.classify_state(self.G, self.chart.S, self.T, q, node, aw, self._out_node,
                                  self._out_kind, self._comp, self._path, self._marked, self._sets)
            if nu >= 0:
                break
            self.chart.grow()
        else:
            raise MemoryError("Earley chart keeps overflowing")
        ents = self._out_node[:nu].copy()
        kind = self._out_kind[:nu].copy()
        skip = K.entry_skips(ents, kind, self.trie.size)
        self.seconds += time.perf_counter() - t0
        self.trie_nodes += int(self.chart.counters[K.C_TRIE]) - before
        return aw, ents, kind, skip

    def _store(self, ci: int, aw, node, kind, skip) -> StateClasses:
        """Name classes for ``ci``: a row with equal contents if there is one (states with
        equal classes share a row, so a mask walks their U entries once), else a new row."""
        content = (aw.tobytes(), np.asarray(node, np.int32).tobytes(), np.asarray(kind, np.int32).tobytes())
        c = self._rows.get(content)
        if c is not None:
            self.cls_id[ci] = c
            return StateClasses(self, c)
        c = self._rows[content] = len(self._rows)
        replaces = c == len(self.aw_pool) or len(self.ent_node) < int(self.ent_start[c]) + len(node)
        if replaces:  # readers holding the old pools keep an old cls_id that names none of the new
            self.cls_id = self.cls_id.copy()
        if c == len(self.aw_pool):
            self.aw_pool = np.concatenate([self.aw_pool, np.zeros_like(self.aw_pool)])
            self.ent_start = np.concatenate([self.ent_start, np.zeros(c, np.int32)])
        e0 = int(self.ent_start[c])
        e1 = e0 + len(node)
        for name in ("ent_node", "ent_kind", "ent_skip"):
            setattr(self, name, grown(getattr(self, name), e1))
        self.aw_pool[c] = aw
        self.ent_node[e0:e1] = node
        self.ent_kind[e0:e1] = kind
        self.ent_skip[e0:e1] = skip
        self.ent_start[c + 1] = e1
        self.cls_id[ci] = c
        self.P = self._pools()
        return StateClasses(self, c)

    def root_states(self) -> list[int]:
        """States that can be roots: the start state and every state with an outgoing edge
        that is the target of some edge (so an item there can have origin < p)."""
        cg = self.cg
        targets = {int(cg.byte_next[i]) for i in np.nonzero(cg.byte_next >= 0)[0]}
        targets |= {int(t) for t in cg.ref_target}
        out = {cg.start_state}
        out |= {q for q in targets if cg.flags[q] & HAS_OUT}
        return sorted(out) + self._count_roots()

    def _count_roots(self) -> list[int]:
        """One count per class (cls_index) of each counted repetition's counts that can be
        roots (c >= 1, with an edge): the classes change only near m and near the cap."""
        cg, top = self.cg, int(self._longest[0]) + 1
        out: dict[int, int] = {}
        for j in range(cg.n_reps):
            base, m, cap, fl, x = (int(v) for v in cg.reps[j * REP_W: j * REP_W + 5])
            if x < 0:
                continue
            last = cap if fl & REP_UNBOUNDED else cap - 1
            windows = ((1, top + 1), (m - top - 1, m + top + 1), (cap - top - 1, cap))
            for lo, hi in windows:
                for c in range(max(lo, 1), min(hi, last) + 1):
                    out.setdefault(self.cls_index(base + c), base + c)
        return sorted(out.values())

    def precompute(self) -> float:
        """Classify every possible root state now; returns the seconds it took."""
        t0 = time.perf_counter()
        for q in self.root_states():
            self.get(q)
        return time.perf_counter() - t0
