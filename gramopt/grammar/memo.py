"""Remembering what a pure function of a grammar gave, keyed by the very objects it read.

The pipeline runs the same clean-ups and analyses on the same grammar again and again (a
pass's fixpoint, the clean-up rounds, the guard's baseline, the judge's fallbacks each
start from the input), and on a grammar of 10,000 rules each run costs seconds.

Key: the identities of the grammar's rules, terminals and directives, with its start,
dialect and header (``identity_key``). Two grammars with one key hold the *same* objects in
every field, compared or not (a rule's comment and position included), so they are
indistinguishable to any function of them: a remembered result is the result. The cache
holds the grammar it was computed from, so no object of the key is freed and its identity
reused while the entry lives. Equality is never used as the key: equal rules of another
grammar may carry other comments or positions (that once made batch outputs depend on
which worker saw a grammar first; ``cleanup/factoring.py``).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from .grammar import Grammar

T = TypeVar("T")


def identity_key(g: Grammar) -> tuple:
    """What makes two grammars the same objects field by field (module docstring)."""
    return (g.start, g.dialect, g.header, tuple(map(id, g.rules)), tuple(map(id, g.terminals)),
            tuple(map(id, g.directives)))


def rules_key(g: Grammar) -> tuple:
    """The identities of ``g``'s rules alone: the key of a function of the rules only."""
    return tuple(map(id, g.rules))


class IdentityMemo:
    """The last ``size`` results of ``fn``, keyed by ``key(grammar)``; each entry holds the
    grammar it was computed from (module docstring). Thread-safe: a hit or a store is one
    step under a lock; ``fn`` runs outside it, once per key at a time: a thread asking for a
    key another thread is computing waits for that result (the judge's engine checks, one
    thread each, ask for one input's sentences at once), unless it is that thread (``fn``
    asking again for its own key computes it again, as without a memo)."""

    def __init__(self, size: int, key: Callable[[Grammar], Hashable] = identity_key):
        self.size, self.key = size, key
        self.entries: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.running: dict = {}  # key -> (the computing thread's id, an Event set when it is done)
        _MEMOS.add(self)

    def get(self, g: Grammar, fn: Callable[[Grammar], T]) -> T:
        k = self.key(g)
        me = threading.get_ident()
        while True:
            with self.lock:
                hit = self.entries.get(k)
                if hit is not None:
                    self.entries.move_to_end(k)
                    return hit[1]
                other = self.running.get(k)
                if other is None or other[0] == me:
                    if other is None:
                        self.running[k] = (me, threading.Event())
                    break
            other[1].wait()  # then a hit, or (it raised) this thread computes
        try:
            value = fn(g)
            with self.lock:
                self.entries[k] = (g, value)
                while len(self.entries) > self.size:
                    self.entries.popitem(last=False)
        finally:
            with self.lock:
                owner = self.running.get(k)
                if owner is not None and owner[0] == me:
                    del self.running[k]
                    owner[1].set()
        return value

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


_MEMOS: "weakref.WeakSet[IdentityMemo]" = weakref.WeakSet()


_VALUE_CACHES: list = []  # the ``lru_cache``s ``forget_all`` empties too (``forgotten``)


def forgotten(cache):
    """Register ``cache`` (an ``functools.lru_cache`` keyed by expressions' values) to be
    emptied by ``forget_all`` too. A later item could hit it, but it keeps every earlier item's
    expressions alive up to its size: κ's rule bodies held 25 MB of a batch worker after 60
    JSONSchemaBench schemas. Returns ``cache``."""
    _VALUE_CACHES.append(cache)
    return cache


def forget_all() -> None:
    """Empty every ``IdentityMemo`` and the ``forgotten`` caches. Between the items of a batch:
    an entry is keyed by the identities of one grammar's objects, which no later item holds, so
    none could be hit again, and each holds its grammar and what was computed from it alive (a
    worker's resident memory at the start of WashingtonPost wp_26, after four other large
    schemas: 789 MB with them, ~700 MB without)."""
    for memo in list(_MEMOS):
        memo.clear()
    for cache in _VALUE_CACHES:
        cache.cache_clear()


def remembered_pass(size: int = 4) -> Callable[[Callable[[Grammar], Grammar]], Callable[[Grammar], Grammar]]:
    """Decorate a pure ``Grammar -> Grammar`` pass so a run on the same objects (module
    docstring) returns the remembered output. A pass that returned its input returns the
    grammar it is given (the same object: callers test ``out is g``)."""
    def wrap(fn: Callable[[Grammar], Grammar]) -> Callable[[Grammar], Grammar]:
        memo = IdentityMemo(size)
        unchanged = object()

        def compute(g: Grammar):
            out = fn(g)
            return unchanged if out is g else out

        @functools.wraps(fn)
        def run(g: Grammar) -> Grammar:
            out = memo.get(g, compute)
            return g if out is unchanged else out
        run.memo = memo
        return run
    return wrap
