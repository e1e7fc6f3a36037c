"""Production coverage: for every production, one short sentence that uses it.

    coverage_check(a, b, bounds) -> (Counterexample | None, stats)
    coverage_sentences(g) -> iterator of sentences, one per production
    productions_exercised(grammar, inputs) -> (exercised, with terminals, all): which
        productions some input went through (the decoding check's coverage figure)

For production ``A → X1 … Xn`` the sentence is (twice: with each class spelled by its
lowest, then by its highest symbol) ``u · w1 … wn · v`` where ``S' ⇒* u A v``
is a shortest context of A and ``wi`` a shortest yield of ``Xi`` (both least fixpoints,
improved only when strictly shorter, so they are well founded). This reaches what
bounded enumeration is too shallow for and random derivations too unlikely to hit —
an alternative dropped deep inside a large grammar, behind a long required prefix —
at the cost of one sentence per production. Consecutive sentences share long prefixes,
and the recognizers' states are memoized, so checking them costs little more than
their new parts.

Soundness. Each sentence is derived in its grammar (by construction); one the other
grammar rejects is a real difference. One-sided evidence, like random derivations:
``stats`` counts the productions covered.
"""

from __future__ import annotations

import time
from itertools import chain
from typing import Iterator

from .reference import Recognizer
from .result import Bounds, Counterexample
from .symbols import Compiled

METHOD = "production coverage"


def _users(g: Compiled) -> list[list[int]]:
    """For each nonterminal, the productions whose right-hand side names it."""
    users: list[list[int]] = [[] for _ in g.names]
    for p, r in enumerate(g.rhs):
        for s in dict.fromkeys(r):
            if s >= 0:
                users[s].append(p)
    return users


def shortest_yields(g: Compiled) -> list[tuple[int, ...] | None]:
    """A shortest string of each nonterminal, as terminal ids (None where there is none).

    A worklist fixpoint (a production is looked at again only when a nonterminal it
    names got a shorter string), so a chain of n rules costs O(n), not n passes."""
    best: list[tuple[int, ...] | None] = [None] * len(g.names)
    users = _users(g)
    todo = list(range(len(g.rhs)))
    queued = [True] * len(g.rhs)
    head = 0
    while head < len(todo):
        p = todo[head]
        head += 1
        queued[p] = False
        parts = [best[s] if s >= 0 else (~s,) for s in g.rhs[p]]
        if any(x is None for x in parts):
            continue
        w = tuple(x for part in parts for x in part)
        a = g.lhs[p]
        if best[a] is None or len(w) < len(best[a]):
            best[a] = w
            for q in users[a]:
                if not queued[q]:
                    queued[q] = True
                    todo.append(q)
    return best


def shortest_contexts(g: Compiled, best) -> list[tuple[tuple[int, ...], tuple[int, ...]] | None]:
    """For each nonterminal A, a pair (u, v) of terminal-id strings with S' ⇒* u A v and
    |u| + |v| least (a worklist over the productions of nonterminals whose context got
    shorter)."""

    def yield_of(syms) -> tuple[int, ...]:
        return tuple(x for s in syms for x in (best[s] if s >= 0 else (~s,)))

    ctx: list = [None] * len(g.names)
    ctx[0] = ((), ())
    todo = [0]
    queued = [False] * len(g.names)
    queued[0] = True
    head = 0
    while head < len(todo):
        a = todo[head]
        head += 1
        queued[a] = False
        outer = ctx[a]
        for p in g.by_lhs[a]:
            r = g.rhs[p]
            for i, s in enumerate(r):
                if s < 0:
                    continue
                u, v = outer[0] + yield_of(r[:i]), yield_of(r[i + 1:]) + outer[1]
                if ctx[s] is None or len(u) + len(v) < len(ctx[s][0]) + len(ctx[s][1]):
                    ctx[s] = (u, v)
                    if not queued[s]:
                        queued[s] = True
                        todo.append(s)
    return ctx


def coverage_sentences(g: Compiled, pick=min) -> Iterator[tuple[int, ...]]:
    """One sentence per production of ``g`` (pruned: every production is useful), each
    terminal spelled by ``pick`` of its symbols (min: the low ends of classes; max: the
    high ends)."""
    if g.empty:
        return
    best = shortest_yields(g)
    ctx = shortest_contexts(g, best)
    # an empty terminal (an empty char class) is never on a pruned production: no spelling
    spell = [pick(t) if t else -1 for t in g.terms]

    def spelled(w: tuple[int, ...]) -> tuple[int, ...]:
        return tuple([spell[t] for t in w])

    yields = [spelled(w) if w is not None else None for w in best]  # spelled once, not per production
    around: dict[int, tuple] = {}  # each left-hand side's context, spelled
    for p, r in enumerate(g.rhs):
        a = g.lhs[p]
        if a not in around:
            u, v = ctx[a]
            around[a] = (spelled(u), spelled(v))
        u, v = around[a]
        yield u + tuple(chain.from_iterable(yields[s] if s >= 0 else (spell[~s],) for s in r)) + v


def coverage_check(a: Recognizer, b: Recognizer, bounds: Bounds = Bounds()):
    """Coverage sentences of ``a`` checked in ``b`` and of ``b`` in ``a``, alternating,
    spelled with the low ends of classes and with the high ends: a finite amount of work (two
    sentences per production). ``stats["covered"]`` counts sentences per side."""
    t0 = time.perf_counter()
    deadline = bounds.deadline(t0)
    stats = {"productions": [2 * len(a.g.rhs), 2 * len(b.g.rhs)], "covered": [0, 0], "exact": False,
             "safety_limit": False}

    def done(cex=None):
        stats["seconds"] = round(time.perf_counter() - t0, 4)
        stats["bound_met"] = stats["covered"] == stats["productions"]
        return cex, stats

    streams = [(0, coverage_sentences(a.g, min), Resumed(b)), (1, coverage_sentences(b.g, min), Resumed(a)),
               (0, coverage_sentences(a.g, max), Resumed(b)), (1, coverage_sentences(b.g, max), Resumed(a))]
    checked: tuple[set, set] = (set(), set())  # a sentence both spellings give (no class on it) is checked once
    while streams:
        for entry in list(streams):
            side, it, dst = entry
            w = next(it, None)
            if w is None:
                streams.remove(entry)
                continue
            if time.perf_counter() > deadline:
                stats["safety_limit"] = True
                return done()
            stats["covered"][side] += 1
            if w in checked[side]:
                continue
            checked[side].add(w)
            if not dst.accepts(w):
                data = tuple(w) if a.atoms is not None else bytes(w)
                return done(Counterexample(data, "string", side == 0, side == 1, METHOD, a.atoms))
    return done()


class Resumed:
    """``recognizer.accepts`` over a stream of sentences that share prefixes (the sentences
    of one nonterminal share its context): each sentence is read from the set after the
    longest prefix it shares with the previous one. The recognizer's sets are memoized
    per (set, symbol), so the steps skipped are memo hits only: the same sets are built in
    the same order, the same work is charged, and the verdict is ``accepts``'s."""

    def __init__(self, r: Recognizer):
        self.r = r
        self.last: tuple[int, ...] = ()
        self.path = [r.initial()]  # path[i]: the set after last[:i], up to where last died

    def accepts(self, w: tuple[int, ...]) -> bool:
        last, path = self.last, self.path
        if not path[0].viable:  # the empty language, as ``run`` says it
            return False
        n = min(len(w), len(path) - 1)
        i = 0
        while i + 64 <= n and w[i:i + 64] == last[i:i + 64]:  # the common prefix, 64 at a time first
            i += 64
        while i < n and w[i] == last[i]:
            i += 1
        self.last = w
        if i == len(path) - 1 < len(last) and i < len(w) and w[i] == last[i]:
            return False  # it has the prefix on which the last one died
        del path[i + 1:]
        s, r = path[i], self.r
        class_of, alphabet, unknown, advance = r.class_of, r.alphabet, _UNKNOWN, r.advance
        for k in range(i, len(w)):
            x = w[k]
            if not 0 <= x < alphabet:
                return False
            nxt = s._next.get(class_of[x], unknown)
            s = advance(s, x) if nxt is unknown else nxt
            if s is None:
                return False
            path.append(s)
        return s.accepting


_UNKNOWN = object()


def productions_exercised(grammar, inputs) -> tuple[int, int, int]:
    """(productions of ``grammar``'s pruned BNF through which some input scanned a terminal,
    productions that have a terminal, all productions). An input is bytes (or atom ids)
    fed from the start: a sentence or a prefix; each step counts the productions of the items
    that scan the next symbol, until the input dies. Productions are kept apart
    (``Recognizer(by_production=True, leo=False)``), so the figure is exact."""
    r = Recognizer(grammar, leo=False, by_production=True)
    terms, tag = r.g.terms, r.suffixes.tag
    seen: set[int] = set()
    for data in inputs:
        state = r.initial()
        if not state.viable:
            break
        for x in data:
            seen.update(tag[k] for t, k, _ in state.scans if x in terms[t])
            state = r.advance(state, x)
            if state is None:
                break
    with_terms = sum(1 for rhs in r.g.rhs if any(s < 0 for s in rhs))
    return len(seen), with_terms, len(r.g.rhs)
