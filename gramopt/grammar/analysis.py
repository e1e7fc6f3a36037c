"""Structural analyses of a grammar, computed on the EBNF IR as least fixpoints.

* nullable(A)     A ⇒* ε
* productive(A)   A ⇒* w for some finite string w
* reachable(A)    start ⇒* α A β
* left-recursive  A ⇒+ A β (direct when A's own body has A at a left edge)
* unguarded cycle A ⇒+ A: A derives exactly itself with nothing consumed (the grammar is
                  then infinitely ambiguous; engines loop or refuse)
* FIRST(A)        the code points (and Lark atoms) that can begin a string of A

All are over user rules: an EBNF construct such as ``x*`` is analysed as written, so the
helper rules of the canonical BNF never show up in a finding.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .expr import (Alt, CharClass, Epsilon, Expr, Literal, Ref, Regex, Repeat, Seq, Terminal,
                   normalize_ranges, walk)
from .grammar import Grammar
from .dialects import token_atoms
from .memo import IdentityMemo, rules_key


# ---------------------------------------------------------------- nullable / productive


def nullable_expr(e: Expr, nullable: set[str]) -> bool:
    if isinstance(e, Epsilon):
        return True
    if isinstance(e, Ref):
        return e.name in nullable
    if isinstance(e, Seq):
        return all(nullable_expr(i, nullable) for i in e.items)
    if isinstance(e, Alt):
        return any(nullable_expr(i, nullable) for i in e.items)
    if isinstance(e, Repeat):
        return e.min == 0 or nullable_expr(e.item, nullable)
    if isinstance(e, Regex):
        return False  # Lark refuses zero-width terminals in rules
    return False  # Literal, CharClass, Terminal consume at least one symbol


def productive_expr(e: Expr, productive: set[str]) -> bool:
    if isinstance(e, (Epsilon, Literal, Terminal, Regex)):
        return True
    if isinstance(e, CharClass):
        return bool(e.code_points())
    if isinstance(e, Ref):
        return e.name in productive
    if isinstance(e, Seq):
        return all(productive_expr(i, productive) for i in e.items)
    if isinstance(e, Alt):
        return any(productive_expr(i, productive) for i in e.items)
    if isinstance(e, Repeat):
        return e.min == 0 or productive_expr(e.item, productive)
    raise TypeError(e)


def _fixpoint(grammar: Grammar, holds) -> set[str]:
    """Least set S of rule names closed under: body(A) satisfies ``holds(body, S)`` ⇒ A ∈ S.

    ``holds`` is ``nullable_expr`` or ``productive_expr``: monotone in S, AND over a
    sequence, OR over an alternation, a repetition of minimum 0 true, another its item's,
    a reference its rule's, a leaf ``holds(leaf, ∅)``. Solved as Horn satisfiability over
    the nodes of every body (Dowling–Gallier): each node counts the children it still
    needs, a node that becomes true tells its parent once, a rule that becomes true tells
    every reference to it once — linear in the grammar, where re-scanning every rule until
    nothing changes cost its size times the length of the longest chain of rules."""
    need: list[int] = []  # per node: true children still needed (0: true)
    parent: list[int] = []  # per node: its parent node, or -(rule index) - 1 for a body
    refs: dict[str, list[int]] = {}
    true: list[int] = []
    names = [r.name for r in grammar.rules]

    def add(e: Expr, up: int) -> None:
        k = len(need)
        parent.append(up)
        if isinstance(e, Ref):
            need.append(1)
            refs.setdefault(e.name, []).append(k)
        elif isinstance(e, (Seq, Alt)):
            need.append(len(e.items) if isinstance(e, Seq) else 1)
            for i in e.items:
                add(i, k)
        elif isinstance(e, Repeat) and e.min > 0:
            need.append(1)
            add(e.item, k)
        else:  # a leaf, or a repetition that may be empty: its value does not depend on S
            need.append(0 if holds(e, set()) else 1)
            if need[k] == 0:
                true.append(k)

    for i, r in enumerate(grammar.rules):
        add(r.body, -i - 1)
    out: set[str] = set()
    while true:
        k = true.pop()
        up = parent[k]
        if up >= 0:
            need[up] -= 1
            if need[up] == 0:
                true.append(up)
        elif names[-up - 1] not in out:
            name = names[-up - 1]
            out.add(name)
            for ref in refs.get(name, ()):
                need[ref] = 0
                true.append(ref)
    return out


_NULLABLE = IdentityMemo(4, rules_key)
_PRODUCTIVE = IdentityMemo(4, rules_key)
# the passes, the cost models and the guard ask again about the same rules (29 times in one
# optimize of a 2,000-rule grammar): each answer is a function of the rules alone


def nullable_rules(grammar: Grammar) -> set[str]:
    """Names of the rules that derive ε (a new set: the caller may change it)."""
    return set(_NULLABLE.get(grammar, lambda g: frozenset(_fixpoint(g, nullable_expr))))


def productive_rules(grammar: Grammar) -> set[str]:
    """Names of the rules that derive some finite string (a new set)."""
    return set(_PRODUCTIVE.get(grammar, lambda g: frozenset(_fixpoint(g, productive_expr))))


def reachable_rules(grammar: Grammar) -> list[str]:
    """Rules reachable from the start rule, in breadth-first order of discovery."""
    bodies = grammar.bodies()
    if grammar.start not in bodies:
        return []
    seen = {grammar.start: None}
    queue = [grammar.start]
    head = 0
    while head < len(queue):  # (not queue.pop(0): that is a memmove per rule)
        name = queue[head]
        head += 1
        for ref in _refs_in(bodies[name]):
            if ref in bodies and ref not in seen:
                seen[ref] = None
                queue.append(ref)
    return list(seen)


def _refs_in(e: Expr) -> list[str]:
    from .expr import refs
    return refs(e)


# ---------------------------------------------------------------- edges for recursion


def left_refs(e: Expr, nullable: set[str]) -> list[str]:
    """Rules that can appear at the left edge of a string derived from ``e``."""
    out: dict[str, None] = {}

    def go(x: Expr) -> None:
        if isinstance(x, Ref):
            out.setdefault(x.name, None)
        elif isinstance(x, Seq):
            for item in x.items:
                go(item)
                if not nullable_expr(item, nullable):
                    break
        elif isinstance(x, Alt):
            for item in x.items:
                go(item)
        elif isinstance(x, Repeat):
            if x.max != 0:
                go(x.item)

    go(e)
    return list(out)


def unit_refs(e: Expr, nullable: set[str]) -> list[str]:
    """Rules B with e ⇒* B (everything else around B derives ε)."""
    out: dict[str, None] = {}

    def go(x: Expr) -> None:
        if isinstance(x, Ref):
            out.setdefault(x.name, None)
        elif isinstance(x, Seq):
            for i, item in enumerate(x.items):
                if all(nullable_expr(o, nullable) for j, o in enumerate(x.items) if j != i):
                    go(item)
        elif isinstance(x, Alt):
            for item in x.items:
                go(item)
        elif isinstance(x, Repeat):
            if x.max != 0:
                go(x.item)

    go(e)
    return list(out)


def _cyclic(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components that contain a cycle (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    order = {v: i for i, v in enumerate(graph)}
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = graph.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in graph:
                    continue
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, []):
                    comps.append(sorted(comp, key=order.__getitem__))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comps


def lexical_rules(grammar: Grammar) -> frozenset[str]:
    """The rules other than the start whose body names only such rules (a least fixpoint;
    atoms and ε name none): the regular sub-languages written as rules of atoms. llguidance's
    GBNF reader makes each of them one Lark terminal, a lexeme of its greedy lexer
    (``engines/llguidance``), so which rules are lexical is part of what it computes masks
    from."""
    return frozenset(lexical_order(grammar))


def lexical_order(grammar: Grammar) -> list[str]:
    """``lexical_rules`` in the order the fixpoint finds them: each after every rule its body
    names. Each rule waits for the distinct names it uses; linear in the grammar."""
    waiting: dict[str, int] = {}
    users: dict[str, list[str]] = {}
    for r in grammar.rules:
        names = set(_refs_in(r.body))
        waiting[r.name] = len(names) + (r.name == grammar.start)  # the start never becomes one
        for n in names:
            users.setdefault(n, []).append(r.name)
    ready = [n for n, k in waiting.items() if k == 0]
    out: list[str] = []
    while ready:
        n = ready.pop()
        out.append(n)
        for u in users.get(n, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return out


def recursive_rules(grammar: Grammar) -> set[str]:
    """The rules that reach themselves (members of a cyclic strongly connected component)."""
    return set(cyclic_components(grammar))


def cyclic_components(grammar: Grammar) -> dict[str, frozenset[str]]:
    """Each rule of a cyclic strongly connected component (one Tarjan pass), mapped to its
    component; a rule on no cycle is absent."""
    graph = {r.name: _refs_in(r.body) for r in grammar.rules}
    return {n: comp for c in _cyclic(graph) for comp in (frozenset(c),) for n in c}


def recursive_references(grammar: Grammar) -> int:
    """How many references (occurrences, in rule bodies) point into their own rule's
    strongly connected component: the recursions an engine must run as rule calls rather
    than as repetitions (0 for a grammar whose every rule is regular by construction)."""
    graph = {r.name: _refs_in(r.body) for r in grammar.rules}
    comp_of = {n: i for i, comp in enumerate(_cyclic(graph)) for n in comp}
    count = 0
    for r in grammar.rules:
        c = comp_of.get(r.name)
        if c is not None:
            count += sum(1 for n in _ref_occurrences(r.body) if comp_of.get(n) == c)
    return count


def _ref_occurrences(e: Expr) -> list[str]:
    return [x.name for x in walk(e) if isinstance(x, Ref)]


def reference_counts(grammar: Grammar) -> Counter:
    """How many references (occurrences, in rule bodies) name each rule."""
    return Counter(n for r in grammar.rules for n in _ref_occurrences(r.body))


def inlined_depth(grammar: Grammar) -> int:
    """The deepest nesting of the grammar once every reference to a rule (or Lark terminal)
    of another strongly connected component is given that definition's body one level below
    it, as far as it goes (a reference within a component is a leaf; a leaf is 1). An
    engine that inlines non-recursive rules (llguidance makes them lexemes) or walks rule
    references recursively goes about this deep. The references between components form a
    DAG, so the inlining ends. Computed without recursion, each body walked once."""
    return _INLINED_DEPTH.get(grammar, _inlined_depth)


_INLINED_DEPTH = IdentityMemo(4)  # the judge asks it of a grammar in each llguidance check


def _inlined_depth(grammar: Grammar) -> int:
    shapes = {**{("t", r.name): _shape(r.body) for r in grammar.terminals},
              **{("r", r.name): _shape(r.body) for r in grammar.rules}}
    graph = {k: [x for x in dict.fromkeys(x for x, _ in refs) if x in shapes] for k, (_, refs) in shapes.items()}
    comp = {k: i for i, c in enumerate(_cyclic(graph)) for k in c}
    done: dict[tuple[str, str], int] = {}
    for root in graph:
        work = [root]
        while work:
            k = work[-1]
            below = [x for x in graph[k] if x not in comp or comp[x] != comp.get(k)]
            todo = [x for x in below if x not in done]
            if todo:
                work.extend(todo)
                continue
            work.pop()
            if k not in done:
                own, refs = shapes[k]
                done[k] = max([own] + [at + done[x] for x, at in refs if x in done and x in below])
    return max(done.values(), default=0)


def _shape(e: Expr) -> tuple[int, list[tuple[tuple[str, str], int]]]:
    """``e``'s nesting depth (a leaf is 1) and, for each reference to a rule ("r", name) or
    a Lark terminal ("t", name), the depth it sits at."""
    best, refs, stack = 0, [], [(e, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        x, d = pop()
        if d > best:
            best = d
        t = type(x)
        if t is Ref:
            refs.append((("r", x.name), d))
        elif t is Terminal:
            refs.append((("t", x.name), d))
        else:
            for c in x.children():
                push((c, d + 1))
    return best, refs


# ---------------------------------------------------------------- FIRST sets


@dataclass(frozen=True)
class FirstSet:
    """Code points (as ranges) and Lark atoms that can begin a string; ``nullable`` when
    the empty string is derivable too."""

    ranges: tuple[tuple[int, int], ...] = ()
    atoms: frozenset = field(default_factory=frozenset)
    nullable: bool = False


def first_of_expr(e: Expr, lark_tokens: bool, nullable: set[str], rule_ranges, rule_atoms,
                  ranges: set, atoms: set) -> None:
    """Add to ``ranges`` / ``atoms`` what can begin a string of ``e``, reading the
    FIRST sets of referenced rules from ``rule_ranges`` / ``rule_atoms`` (name → set).
    A literal's first code point, or under Lark semantics the literal itself (a token)."""

    def go(x: Expr) -> None:
        if isinstance(x, Literal):
            if lark_tokens:
                atoms.add(x)
            else:
                ranges.add((ord(x.text[0]), ord(x.text[0])))
        elif isinstance(x, CharClass):
            ranges.update(x.code_points())
        elif isinstance(x, (Terminal, Regex)):
            atoms.add(x)
        elif isinstance(x, Ref):
            ranges.update(rule_ranges.get(x.name, ()))
            atoms.update(rule_atoms.get(x.name, ()))
        elif isinstance(x, Seq):
            for item in x.items:
                go(item)
                if not nullable_expr(item, nullable):
                    break
        elif isinstance(x, Alt):
            for item in x.items:
                go(item)
        elif isinstance(x, Repeat):
            if x.max != 0:
                go(x.item)

    go(e)


def first_sets(grammar: Grammar, nullable: set[str] | None = None) -> dict[str, FirstSet]:
    """Least fixpoint of FIRST over the rules."""
    nullable = nullable_rules(grammar) if nullable is None else nullable
    lark = token_atoms(grammar.dialect)
    ranges: dict[str, set[tuple[int, int]]] = {r.name: set() for r in grammar.rules}
    atoms: dict[str, set] = {r.name: set() for r in grammar.rules}
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            rs, ats = set(), set()
            first_of_expr(r.body, lark, nullable, ranges, atoms, rs, ats)
            if rs - ranges[r.name] or ats - atoms[r.name]:
                ranges[r.name] |= rs
                atoms[r.name] |= ats
                changed = True
    return {n: FirstSet(normalize_ranges(ranges[n]) if ranges[n] else (), frozenset(atoms[n]),
                        n in nullable) for n in ranges}


# ---------------------------------------------------------------- the combined report


@dataclass(frozen=True)
class Structure:
    nullable: tuple[str, ...]
    productive: tuple[str, ...]
    unproductive: tuple[str, ...]
    reachable: tuple[str, ...]
    unreachable: tuple[str, ...]
    left_recursive: tuple[str, ...]
    directly_left_recursive: tuple[str, ...]
    unguarded_cycles: tuple[tuple[str, ...], ...]


def structure(grammar: Grammar) -> Structure:
    names = grammar.names
    nullable = nullable_rules(grammar)
    productive = productive_rules(grammar)
    reachable = set(reachable_rules(grammar))
    bodies = grammar.bodies()
    left = {n: left_refs(bodies[n], nullable) for n in names}
    unit = {n: unit_refs(bodies[n], nullable) for n in names}
    left_cycles = _cyclic(left)
    in_left = {n for comp in left_cycles for n in comp}
    keep = lambda s: tuple(n for n in names if n in s)  # noqa: E731 - source order
    return Structure(
        nullable=keep(nullable),
        productive=keep(productive),
        unproductive=keep(set(names) - productive),
        reachable=keep(reachable),
        unreachable=keep(set(names) - reachable),
        left_recursive=keep(in_left),
        directly_left_recursive=keep({n for n in names if n in left[n]}),
        unguarded_cycles=tuple(tuple(c) for c in _cyclic(unit)),
    )
