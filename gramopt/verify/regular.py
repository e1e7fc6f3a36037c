"""Exact comparison of regular grammars: finite automata over symbol classes.

    exact_check(a, b, bounds) -> (Counterexample | None, stats)
    regularity(g) -> None | reason it is not (cheaply) regular
    build_nfa(g, cap) -> NFA

A grammar is taken as regular when it is *strongly regular* (Mohri & Nederhof, "Regular
approximation of context-free grammars through transformation", 2001): in every
strongly connected component of the "appears on a right-hand side of" graph, all
productions are right-linear in the component (at most one member, last) or all are
left-linear (at most one member, first). Such a grammar has no self-embedding, and each
component becomes a finite automaton directly:

    right-linear component C, entered for A between states i and o:
        one state q[B] per member B; i -ε-> q[A];
        B → α D (D ∈ C):  q[B] -α-> q[D];   B → α (no member):  q[B] -α-> o
    left-linear component (q[B]: "a string of B has been read since i"):
        B → D α:  q[D] -α-> q[B];   B → α:  i -α-> q[B];   q[A] -ε-> o
    anything else: A → α for each production, α's nonterminals instantiated in turn.

Nonterminals below a component are instantiated afresh at each use (the automaton can
grow with the number of paths in the grammar's rule DAG: ``cap`` bounds it). Other
grammars are skipped, reported as such — the two other checks still run.

The two ε-NFAs are compared by a breadth-first search over pairs of subsets (the
on-the-fly product of the two subset constructions) on one representative per symbol
class shared by both grammars. Soundness. Every automaton state lies on a path to the
final state (the compiled grammar is pruned), so a subset is non-empty exactly when its
input is a viable prefix; a pair whose subsets differ in emptiness or in containing the
final state is a real difference (and a shortest one, by BFS). When the search exhausts
every reachable pair without a difference, the languages (and their viable-prefix sets)
are equal: ``exact: True``. Hitting the state cap (or the safety time limit) proves nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .reference import Recognizer
from .result import Bounds, Counterexample
from .symbols import Compiled, symbol_classes

METHOD = "exact (regular)"


@dataclass
class NFA:
    """ε-NFA: ``edges[q]`` are ``(terminal, target)``, ``eps[q]`` ε-targets."""

    edges: list[list[tuple[int, int]]]
    eps: list[list[int]]
    start: int
    final: int


class TooBig(Exception):
    pass


# ---------------------------------------------------------------- regularity


def components(g: Compiled) -> list[list[int]]:
    """Strongly connected components of nonterminals (Tarjan, iterative), each sorted,
    in reverse topological order (a component comes after those it uses)."""
    n = len(g.names)
    succ = [sorted({s for p in g.by_lhs[a] for s in g.rhs[p] if s >= 0}) for a in range(n)]
    index = [-1] * n
    low = [0] * n
    on = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on[v] = True
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if index[w] < 0:
                    work.append((w, 0))
                elif on[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return out


def _kinds(g: Compiled) -> tuple[list[int], list[str], list[list[int]]]:
    """(component of each nonterminal, kind of each component, members): kind is
    "plain" (not recursive), "right", "left", or "other" (not strongly regular)."""
    comps = components(g)
    comp_of = [0] * len(g.names)
    for c, members in enumerate(comps):
        for a in members:
            comp_of[a] = c
    kinds = []
    for c, members in enumerate(comps):
        rhss = [g.rhs[p] for a in members for p in g.by_lhs[a]]
        inside = [[i for i, s in enumerate(r) if s >= 0 and comp_of[s] == c] for r in rhss]
        if not any(inside):
            kinds.append("plain")
        elif all(len(ix) == 0 or ix == [len(r) - 1] for ix, r in zip(inside, rhss)):
            kinds.append("right")
        elif all(len(ix) == 0 or ix == [0] for ix in inside):
            kinds.append("left")
        else:
            kinds.append("other")
    return comp_of, kinds, comps


def regularity(g: Compiled) -> str | None:
    """None when ``g`` is strongly regular, else the reason (naming a nonterminal)."""
    comp_of, kinds, comps = _kinds(g)
    for c, k in enumerate(kinds):
        if k == "other":
            return f"self-embedding or mixed recursion through '{g.names[comps[c][0]]}'"
    return None


# ---------------------------------------------------------------- automaton


def build_nfa(g: Compiled, cap: int) -> NFA:
    """The ε-NFA of a strongly regular ``g`` (module docstring); TooBig past ``cap`` states."""
    comp_of, kinds, comps = _kinds(g)
    edges: list[list[tuple[int, int]]] = []
    eps: list[list[int]] = []

    def new() -> int:
        if len(edges) >= cap:
            raise TooBig
        edges.append([])
        eps.append([])
        return len(edges) - 1

    # An explicit work stack instead of recursion: a chain of 1,000 plain rules nests
    # 1,000 deep. ``("seq", syms, i, o)`` wires ``syms`` from state i to o; ``("sym", s, i, o)``
    # one symbol. States are numbered in the order the tasks are taken: deterministic.
    todo: list[tuple] = []

    def seq(syms, i: int, o: int) -> None:
        todo.append(("seq", tuple(syms), i, o))

    def run_seq(syms, i: int, o: int) -> None:
        if not syms:
            eps[i].append(o)
            return
        tasks = []
        for k, s in enumerate(syms):
            nxt = o if k == len(syms) - 1 else new()
            tasks.append(("sym", s, i, nxt))
            i = nxt
        todo.extend(reversed(tasks))

    def sym(s: int, i: int, o: int) -> None:
        if s < 0:
            edges[i].append((~s, o))
            return
        c = comp_of[s]
        kind, members = kinds[c], comps[c]
        if kind == "plain":
            for p in reversed(g.by_lhs[s]):
                seq(g.rhs[p], i, o)
            return
        q = {b: new() for b in members}
        if kind == "right":
            eps[i].append(q[s])
            for b in members:
                for p in g.by_lhs[b]:
                    r = g.rhs[p]
                    if r and r[-1] >= 0 and comp_of[r[-1]] == c:
                        seq(r[:-1], q[b], q[r[-1]])
                    else:
                        seq(r, q[b], o)
        elif kind == "left":
            eps[q[s]].append(o)
            for b in members:
                for p in g.by_lhs[b]:
                    r = g.rhs[p]
                    if r and r[0] >= 0 and comp_of[r[0]] == c:
                        seq(r[1:], q[r[0]], q[b])
                    else:
                        seq(r, i, q[b])
        else:
            raise ValueError("not strongly regular")

    def drain() -> None:
        while todo:
            kind, x, i, o = todo.pop()
            if kind == "seq":
                run_seq(x, i, o)
            else:
                sym(x, i, o)

    start, final = new(), new()
    if not g.empty:
        sym(0, start, final)
        drain()
    return NFA(edges, eps, start, final)


class _Subsets:
    """Subset construction of one NFA, on demand: subsets are interned to ints
    (0 = the empty, dead subset), transitions memoized per (subset, class)."""

    def __init__(self, nfa: NFA, g: Compiled, class_of):
        self.nfa = nfa
        self.term_classes = [sorted({class_of[x] for x in t}) for t in g.terms]
        self._closure: dict[int, frozenset[int]] = {}
        self.sets: list[frozenset[int]] = [frozenset()]
        self.ids: dict[frozenset[int], int] = {frozenset(): 0}
        self.moves: dict[int, dict[int, int]] = {}
        self.start = self.intern(self.closure(nfa.start))

    def closure(self, q: int) -> frozenset[int]:
        if q not in self._closure:
            seen = {q}
            todo = [q]
            while todo:
                for r in self.nfa.eps[todo.pop()]:
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
            self._closure[q] = frozenset(seen)
        return self._closure[q]

    def intern(self, s: frozenset[int]) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.sets)
            self.sets.append(s)
        return self.ids[s]

    def accepting(self, i: int) -> bool:
        return self.nfa.final in self.sets[i]

    def step(self, i: int) -> dict[int, int]:
        """Class → successor subset, for the classes with a non-empty successor."""
        if i not in self.moves:
            targets: dict[int, set[int]] = {}
            for q in sorted(self.sets[i]):
                for t, r in self.nfa.edges[q]:
                    for c in self.term_classes[t]:
                        targets.setdefault(c, set()).add(r)
            self.moves[i] = {c: self.intern(frozenset().union(*(self.closure(r) for r in rs)))
                             for c, rs in sorted(targets.items())}
        return self.moves[i]


def exact_check(a: Recognizer, b: Recognizer, bounds: Bounds = Bounds()):
    """Decide equality of ``a`` and ``b`` when both are strongly regular and small enough;
    otherwise report why it was skipped."""
    t0 = time.perf_counter()
    stats: dict = {"exact": False}

    def done(cex=None, **kw):
        stats.update(kw)
        stats["seconds"] = round(time.perf_counter() - t0, 4)
        return cex, stats

    for side, r in (("original", a), ("candidate", b)):
        reason = regularity(r.g)
        if reason:
            return done(skipped=f"{side}: {reason}")
    try:
        na, nb = build_nfa(a.g, bounds.max_dfa_states), build_nfa(b.g, bounds.max_dfa_states)
    except TooBig:
        return done(skipped=f"automaton over {bounds.max_dfa_states} states")
    class_of, members = symbol_classes(a.alphabet, (*a.g.terms, *b.g.terms))
    da, db = _Subsets(na, a.g, class_of), _Subsets(nb, b.g, class_of)
    stats["nfa_states"] = (len(na.edges), len(nb.edges))
    start = (da.start, db.start)
    parent: dict[tuple[int, int], tuple | None] = {start: None}
    queue = [start]
    deadline = bounds.deadline(t0)
    for pair in queue:  # the queue grows while it is read: breadth-first
        if len(parent) > bounds.max_dfa_states:
            return done(skipped="state cap reached", pairs=len(parent))
        if time.perf_counter() > deadline:
            return done(skipped="safety time limit", safety_limit=True, pairs=len(parent))
        x, y = pair
        if (x == 0) != (y == 0):
            return done(_cex(a, parent, pair, members, "prefix", x != 0, y != 0), pairs=len(parent))
        if da.accepting(x) != db.accepting(y):
            return done(_cex(a, parent, pair, members, "string", da.accepting(x), db.accepting(y)),
                        pairs=len(parent))
        mx, my = da.step(x), db.step(y)
        for c in sorted(mx.keys() | my.keys()):
            nxt = (mx.get(c, 0), my.get(c, 0))
            if nxt not in parent:
                parent[nxt] = (pair, c)
                queue.append(nxt)
    return done(exact=True, pairs=len(parent))


def _cex(a: Recognizer, parent, pair, members, kind, in_a, in_b) -> Counterexample:
    path = []
    while parent[pair] is not None:
        pair, c = parent[pair]
        path.append(members[c][0])
    path.reverse()
    data = tuple(path) if a.atoms is not None else bytes(path)
    return Counterexample(data, kind, in_a, in_b, METHOD, a.atoms)
