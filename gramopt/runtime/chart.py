"""The Earley chart as a tuple of numpy arrays (the kernels' ``S``, a ``packed.Packed``), with growth on overflow.

A chart never shrinks; popping sets is ``meta[N_SETS] = k``. Every kernel that returns
OVERFLOW leaves the committed sets intact, so ``Chart.run`` grows the arrays and retries.
"""

from __future__ import annotations

import numpy as np

from . import earley as K
from .limits import RuntimeLimits
from .packed import Packed


class Chart:
    def __init__(self, n_rules: int, items: int = 1 << 14, sets: int = 1 << 10,
                 groups: int = 1 << 12, hash_bits: int = 12, mask_words: int = 0,
                 cache_slots: int = 64, cache_items: int = 1024, limits: RuntimeLimits | None = None):
        """``mask_words`` > 0 (a Matcher's chart) turns on the mask cache: ``cache_slots``
        masks (a power of two), keyed by set contents (earley._canonize: kernels and
        waiter groups of at most ``cache_items`` items are named). ``limits`` caps the growth (limits.py)."""
        slots = cache_slots if mask_words > 0 else 0
        self.n_rules = n_rules
        self.limits = limits or RuntimeLimits()
        self.S = Packed((
            np.zeros(items, np.int64),  # items
            np.zeros(sets + 1, np.int32),  # set_start
            np.zeros(sets + 1, np.int32),  # grp_start
            np.zeros(groups, np.int32),  # grp_rule
            np.zeros(groups, np.int32),  # grp_first
            np.zeros(groups, np.int32),  # grp_len
            np.zeros(groups, np.int32),  # grp_leo
            np.zeros(sets + 1, np.int32),  # ent_start
            np.zeros(groups * 2, np.int32),  # ent_target
            np.zeros(groups * 2, np.int32),  # ent_origin
            np.zeros(1 << hash_bits, np.int64),  # hkeys
            np.zeros(1 << hash_bits, np.int64),  # hgen
            np.zeros(n_rules, np.int64),  # rgen
            np.zeros(n_rules, np.int32),  # rcnt
            np.zeros(n_rules, np.int32),  # rpos
            np.zeros(n_rules, np.int32),  # touched
            np.zeros(sets + 1, np.int32),  # set_flag
            np.zeros(K.N_COUNTERS, np.int64),  # meta
            np.zeros(K.N_COUNTERS, np.int64),  # counters
            np.full((sets + 1) * 256, K.M_UNKNOWN, np.int32),  # trans (set automaton)
            np.zeros(sets + 1, np.int32),  # klen (kernel length of a walk set)
            np.zeros(4 * sets, np.int64),  # mkeys (kernel hash table)
            np.zeros(4 * sets, np.int64),  # mgen
            np.zeros(4 * sets, np.int32),  # mval
            np.full(sets + 1, -1, np.int64),  # canon (content id of each committed set)
            np.full(max(slots, 1), -1, np.int64),  # mc_key (mask cache: the id whose mask a slot holds)
            np.zeros((slots, mask_words), np.uint32),  # mc_mask
            np.zeros(cache_items, np.int64),  # mc_scratch
            np.zeros(1 << 12, np.int64),  # ikey (interned kernels: hash table)
            np.full(1 << 12, -1, np.int32),  # ival
            np.zeros(1 << 11, np.int32),  # istart
            np.zeros(1 << 14, np.int64),  # ipool
            np.full(groups, -1, np.int64),  # gcode (content code of each waiter group)
        ), K.LAYOUT_S)

    @property
    def n_sets(self) -> int:
        return int(self.S[K.I_META][K.N_SETS])

    @n_sets.setter
    def n_sets(self, v: int) -> None:
        self.S[K.I_META][K.N_SETS] = v

    @property
    def counters(self) -> np.ndarray:
        return self.S[K.I_COUNTERS]

    def accepting(self) -> bool:
        n = self.n_sets
        return n > 0 and bool(self.S[K.I_SET_FLAG][n - 1])

    def copy(self) -> "Chart":
        """An independent chart with the same committed sets (for ``Matcher.fork``)."""
        c = Chart.__new__(Chart)
        c.n_rules, c.limits = self.n_rules, self.limits
        c.S = Packed(tuple(a.copy() for a in self.S), K.LAYOUT_S)
        return c

    def grow(self) -> None:
        """Double every capacity, keeping the committed contents; raises RuntimeLimitError
        (limits.py) instead when a doubled capacity would pass the chart's limits."""
        S = list(self.S)
        self.limits.check(len(S[K.I_ITEMS]) * 2, (len(S[K.I_SET_START]) - 1) * 2,
                          len(S[K.I_GRP_RULE]) * 2)

        def bigger(a):
            b = np.zeros(len(a) * 2, a.dtype)
            b[:len(a)] = a
            return b

        for i in (K.I_ITEMS, K.I_GRP_RULE, K.I_GRP_FIRST, K.I_GRP_LEN, K.I_GRP_LEO,
                  K.I_ENT_TARGET, K.I_ENT_ORIGIN, K.I_GCODE):
            S[i] = bigger(S[i])
        for i in (K.I_SET_START, K.I_GRP_START, K.I_ENT_START, K.I_SET_FLAG, K.I_CANON):
            b = np.zeros((len(S[i]) - 1) * 2 + 1, S[i].dtype)
            b[:len(S[i])] = S[i]
            S[i] = b
        n = len(S[K.I_HKEYS]) * 2
        S[K.I_HKEYS] = np.zeros(n, np.int64)
        S[K.I_HGEN] = np.zeros(n, np.int64)
        # the set automaton: transitions and kernel lengths kept (walk sets keep their
        # contents); the kernel table restarts empty (new generation stamps are all 0),
        # which only costs duplicate walk sets, never a wrong one
        S[K.I_TRANS] = np.concatenate([S[K.I_TRANS], np.full(len(S[K.I_TRANS]), K.M_UNKNOWN, np.int32)])
        S[K.I_KLEN] = bigger(S[K.I_KLEN])
        n = len(S[K.I_MKEYS]) * 2
        S[K.I_MKEYS] = np.zeros(n, np.int64)
        S[K.I_MGEN] = np.zeros(n, np.int64)
        S[K.I_MVAL] = np.zeros(n, np.int32)
        S[K.I_ISTART] = bigger(S[K.I_ISTART])
        S[K.I_IPOOL] = bigger(S[K.I_IPOOL])
        n = len(S[K.I_IKEY]) * 2
        S[K.I_IKEY] = np.zeros(n, np.int64)
        S[K.I_IVAL] = np.full(n, -1, np.int32)
        S = Packed(S, K.LAYOUT_S)
        K.rehash_interned(S)  # a Packed, as every kernel takes the chart: one specialization
        self.S = S

    def run(self, fn, *args):
        """Call kernel ``fn(G, S, *args)`` (G first in args), growing until no overflow."""
        G, rest = args[0], args[1:]
        for _ in range(40):
            r = fn(G, self.S, *rest)
            if not (isinstance(r, (int, np.integer)) and r == K.OVERFLOW):
                return r
            self.grow()
        raise MemoryError("Earley chart keeps overflowing")
