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
at the cost of one sentence per production.

Memory. Neither yields nor contexts are stored as strings: a yield is its nonterminal's
chosen production (``Shortest.via``), a context the edge ``(parent, production,
position)`` it was reached by (``Shortest.edge``), and sentences are spelled from them as
streams. A chain of n helpers (``x{4,32767}`` lowers to 32,763) has n contexts of up to n
symbols, n²/2 in all; stored, that was gigabytes. Checking reads, in the other grammar's
recognizer, the set after each context ``u`` once (memoized per nonterminal, built from
its parent's), then only ``w1 … wn · v``: the same sets are built, and the same work is
charged, as reading each whole sentence from the start.

Soundness. Each sentence is derived in its grammar (by construction); one the other
grammar rejects is a real difference. One-sided evidence, like random derivations:
``stats`` counts the productions covered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

from .reference import Recognizer, State
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


@dataclass(frozen=True)
class Shortest:
    """Shortest yields and contexts of a pruned grammar, as back-pointers.

    ``via[A]``: the production a shortest string of A derives through (None: A derives
    nothing); ``length[A]`` that string's length. ``edge[A]``: ``(B, p, i)`` when a
    shortest context ``u A v`` of A is the one of B around production p of B, whose i-th
    symbol is A (``(-1, -1, -1)`` for ``S'``; None: unreachable); ``left[A]``, ``right[A]``
    are |u| and |v|. Expanding ``via`` never loops: the production chosen last for A names
    only nonterminals whose own choice was final before it (else A would have been
    improved again), so the choices form a DAG; ``edge`` likewise leads back to ``S'``."""

    via: list[int | None]
    length: list[int]
    edge: list[tuple[int, int, int] | None]
    left: list[int]
    right: list[int]


def shortest(g: Compiled) -> Shortest:
    """``Shortest`` of ``g``: two worklist fixpoints (a production, or a nonterminal's
    productions, are looked at again only when something they read got shorter), over
    lengths only, so a chain of n rules costs O(n), not n passes or n² symbols."""
    n = len(g.names)
    via: list[int | None] = [None] * n
    length = [0] * n
    users = _users(g)
    todo = list(range(len(g.rhs)))
    queued = [True] * len(g.rhs)
    head = 0
    while head < len(todo):
        p = todo[head]
        head += 1
        queued[p] = False
        total = 0
        for s in g.rhs[p]:
            if s < 0:
                total += 1
            elif via[s] is None:
                break
            else:
                total += length[s]
        else:
            a = g.lhs[p]
            if via[a] is None or total < length[a]:
                via[a], length[a] = p, total
                for q in users[a]:
                    if not queued[q]:
                        queued[q] = True
                        todo.append(q)
    edge: list[tuple[int, int, int] | None] = [None] * n
    left, right = [0] * n, [0] * n
    edge[0] = (-1, -1, -1)
    todo = [0]
    queued_nt = [False] * n
    queued_nt[0] = True
    head = 0
    while head < len(todo):
        a = todo[head]
        head += 1
        queued_nt[a] = False
        for p in g.by_lhs[a]:
            r = g.rhs[p]
            before, total = left[a], left[a] + right[a] + sum(1 if s < 0 else length[s] for s in r)
            for i, s in enumerate(r):
                here = 1 if s < 0 else length[s]
                if s >= 0 and (edge[s] is None or total - here < left[s] + right[s]):
                    edge[s], left[s], right[s] = (a, p, i), before, total - here - before
                    if not queued_nt[s]:
                        queued_nt[s] = True
                        todo.append(s)
                before += here
    return Shortest(via, length, edge, left, right)


def spell_yield(g: Compiled, sh: Shortest, symbols) -> Iterator[int]:
    """The terminal ids of a shortest string of the symbol sequence ``symbols``, left to
    right, expanded through ``sh.via`` with an explicit stack (no recursion limit)."""
    stack = [iter(symbols)]
    rhs, via = g.rhs, sh.via
    while stack:
        for s in stack[-1]:
            if s < 0:
                yield ~s
            else:
                stack.append(iter(rhs[via[s]]))
                break
        else:
            stack.pop()


def context_path(sh: Shortest, a: int) -> list[tuple[int, int, int]]:
    """The edges from ``S'`` down to ``a``, top first."""
    path = []
    while a > 0:
        e = sh.edge[a]
        path.append(e)
        a = e[0]
    path.reverse()
    return path


def left_of(g: Compiled, sh: Shortest, a: int) -> Iterator[int]:
    """u of a's shortest context ``S' ⇒* u a v``, as terminal ids."""
    for b, p, i in context_path(sh, a):
        yield from spell_yield(g, sh, g.rhs[p][:i])


def right_of(g: Compiled, sh: Shortest, a: int, skip: dict | None = None) -> Iterator[int]:
    """v of a's shortest context, as terminal ids (the innermost edge's part first).
    ``skip`` (a memo, kept by the caller) jumps over the edges that add nothing to v, so a
    chain of n helpers costs |v|, not n."""
    skip = {} if skip is None else skip
    a = _adding_right(sh, a, skip)
    while a > 0:
        b, p, i = sh.edge[a]
        yield from spell_yield(g, sh, g.rhs[p][i + 1:])
        a = _adding_right(sh, b, skip)


def _adding_right(sh: Shortest, a: int, skip: dict) -> int:
    """The first nonterminal on the edges from ``a`` up whose edge adds to v (0: none)."""
    path = []
    while a > 0 and a not in skip and sh.right[a] == sh.right[sh.edge[a][0]]:
        path.append(a)
        a = sh.edge[a][0]
    found = skip.get(a, a)
    for b in path:
        skip[b] = found
    return found


def production_sentence(g: Compiled, sh: Shortest, p: int) -> Iterator[int]:
    """The coverage sentence of production ``p``, as terminal ids."""
    a = g.lhs[p]
    yield from left_of(g, sh, a)
    yield from spell_yield(g, sh, g.rhs[p])
    yield from right_of(g, sh, a)


def coverage_sentences(g: Compiled, pick=min) -> Iterator[tuple[int, ...]]:
    """One sentence per production of ``g`` (pruned: every production is useful), each
    terminal spelled by ``pick`` of its symbols (min: the low ends of classes; max: the
    high ends). Each is built when asked for (a sentence can be as long as the grammar)."""
    if g.empty:
        return
    sh = shortest(g)
    spell = [pick(t) if t else -1 for t in g.terms]
    for p in range(len(g.rhs)):
        yield tuple([spell[t] for t in production_sentence(g, sh, p)])


def one_spelling(g: Compiled, sh: Shortest) -> list[bool]:
    """For each production, whether its sentence has no terminal of several symbols (so
    its low and high spellings are one sentence, checked once)."""
    single = [len(t) == 1 for t in g.terms]
    n = len(g.names)
    plain_yield: list[bool | None] = [None] * n

    def yield_single(a: int) -> bool:  # through ``via``, a DAG: an explicit stack
        stack = [a]
        while stack:
            b = stack[-1]
            if plain_yield[b] is not None:
                stack.pop()
                continue
            pending = [s for s in g.rhs[sh.via[b]] if s >= 0 and plain_yield[s] is None]
            if pending:
                stack.extend(pending)
                continue
            plain_yield[b] = all(single[~s] if s < 0 else plain_yield[s] for s in g.rhs[sh.via[b]])
            stack.pop()
        return plain_yield[a]

    def seq_single(symbols) -> bool:
        return all(single[~s] if s < 0 else yield_single(s) for s in symbols)

    plain_ctx: list[bool | None] = [None] * n
    plain_ctx[0] = True

    def ctx_single(a: int) -> bool:  # down the context edges from the nearest known one
        path = []
        while plain_ctx[a] is None:
            path.append(a)
            a = sh.edge[a][0]
        for b in reversed(path):
            parent, p, i = sh.edge[b]
            r = g.rhs[p]
            plain_ctx[b] = plain_ctx[parent] and seq_single(r[:i]) and seq_single(r[i + 1:])
        return plain_ctx[path[0]] if path else plain_ctx[a]

    return [ctx_single(g.lhs[p]) and seq_single(r) for p, r in enumerate(g.rhs)]


class Checker:
    """Coverage sentences of one grammar read in a recognizer ``dst`` of the other, one
    spelling: the set after each context's u is memoized per nonterminal (from its
    parent's, so every u is read once), each sentence read on from there."""

    def __init__(self, g: Compiled, sh: Shortest, dst: Recognizer, pick):
        self.g, self.sh, self.dst = g, sh, dst
        self.spell = [pick(t) if t else -1 for t in g.terms]
        self.entry: dict[int, State | None] = {0: dst.initial() if dst.initial().viable else None}
        self.skip: dict[int, int] = {}

    def _spelled(self, ids) -> Iterator[int]:
        spell = self.spell
        return (spell[t] for t in ids)

    def _entry(self, a: int) -> State | None:
        """The set after u of a's context (None: u is not a viable prefix in ``dst``)."""
        entry, edge = self.entry, self.sh.edge
        path = []
        while a not in entry:
            path.append(a)
            a = edge[a][0]
        s = entry[a]
        for b in reversed(path):
            if s is not None:
                _, p, i = edge[b]
                s = self.dst.run(self._spelled(spell_yield(self.g, self.sh, self.g.rhs[p][:i])), start=s)
            entry[b] = s
        return s

    def accepts(self, p: int) -> bool:
        """Whether ``dst`` accepts the sentence of production ``p``."""
        a = self.g.lhs[p]
        s = self._entry(a)
        if s is None:
            return False
        s = self.dst.run(self._spelled(spell_yield(self.g, self.sh, self.g.rhs[p])), start=s)
        if s is None:
            return False
        s = self.dst.run(self._spelled(right_of(self.g, self.sh, a, self.skip)), start=s)
        return s is not None and s.accepting

    def sentence(self, p: int) -> tuple[int, ...]:
        return tuple(self._spelled(production_sentence(self.g, self.sh, p)))


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

    sides = []
    for side, src, dst in ((0, a, b), (1, b, a)):
        if src.g.empty:
            continue
        sh = shortest(src.g)
        sides.append((side, src.g, sh, dst, one_spelling(src.g, sh)))
    # the streams alternate as (a low, b low, a high, b high), a production at a time
    streams = [(side, Checker(g, sh, dst, pick), once if pick is max else None, len(g.rhs))
               for pick in (min, max) for side, g, sh, dst, once in sides]
    for p in range(max((n for *_, n in streams), default=0)):
        for side, checker, once, n in streams:
            if p >= n:
                continue
            if time.perf_counter() > deadline:
                stats["safety_limit"] = True
                return done()
            stats["covered"][side] += 1
            if once is not None and once[p]:
                continue  # its low spelling, checked already
            if not checker.accepts(p):
                w = checker.sentence(p)
                data = tuple(w) if a.atoms is not None else bytes(w)
                return done(Counterexample(data, "string", side == 0, side == 1, METHOD, a.atoms))
            checker.dst.trim()  # sets beyond KEPT_SETS are memory, not speed: one per production
    return done()


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
