"""Grammar (editable IR) → CompiledGrammar (flat integer arrays over bytes).

Each rule body becomes one deterministic automaton over the alphabet {bytes 0..255} ∪
{references to rules} (a recursive transition network, the shape xgrammar uses: its rules
are per-rule FSMs). An Earley item is then ``(state, origin)``: the dotted positions of a
rule's BNF productions are the states of its automaton, so repetition stays a loop inside
the rule instead of a helper nonterminal, and a code-point class is a small byte automaton
(``utf8.class_sequences``) inside the rule that uses it.

    construct                  automaton fragment (s = entry, e = exit)
    -------------------------  -----------------------------------------------------
    "abc"                      s -a-> . -b-> . -c-> e          (UTF-8 bytes)
    [^"\\]                     s -[00-21]-> e, s -[C2-DF]-> . -[80-BF]-> e, …
    A (reference)              s -A-> e                        (an edge labelled by rule A)
    x y, x | y                 concatenation / branches
    x*                         s ~> L, L -x-> L2 ~> L, L ~> e  (~> = ε)
    x{m,n}                     m copies, then n-m optional copies (small bounds; large
                               ones are counted repetitions, below)
    (= lookahead)              nothing: a hint, not part of the language

Counted repetitions: ``x{m,n}`` whose unrolled form would copy x more than COUNT_FROM
times becomes a reference to a rule ``R`` with no automaton of its own: x is a rule X
(a new one unless x is a reference) and R's states are *virtual*, numbered after every
real state, one per count c = 0..cap (cap = n, or m when unbounded: from m on counts are
alike, so the count saturates). State c of R has one rule edge, X → c + 1 (X → c at the
saturated cap), while c < cap or the repetition is unbounded, and is final when c ≥ m.
When x derives ε, x{m,n} = x{0,n}: every count is final and a count moves only on a
non-empty x (an ε completion is never needed, see earley.py: Aycock–Horspool). So an
Earley item of R stores its count in its state, the compiled grammar is O(|x|) whatever
the bounds, and a step costs what one copy of x costs. ``reps`` holds one row of REP_W
ints per counted rule: (base: its state for count 0, m, cap, flags: REP_UNBOUNDED |
REP_NULLABLE, X's rule id or -1 when X derives nothing (then cap = 0), R's rule id);
earley.py reads a virtual state's flags and edge from its row.

The NFA is made deterministic per rule (subset construction over byte intervals and rule
labels). Then rules that derive no string are removed with every edge into them, states
that cannot reach a final state are trimmed, and rules unreachable from the start go.
A virtual rule ``$accept`` with ``s0 -start-> sF`` wraps the start rule: the grammar
accepts exactly when the item ``(sF, 0)`` is in the current Earley set.

Invariants of the arrays (all int32, states numbered rule by rule):
  * ``byte_next[q*256 + b]`` = the state after byte b from q, or -1;
  * ``ref_start[q]:ref_start[q+1]`` index the rule edges of q: ``ref_rule`` / ``ref_target``;
  * ``flags[q]``: FINAL (q completes its rule), HAS_OUT (q has any outgoing edge),
    TAIL (FINAL and no outgoing edge: a completed item that only reduces, Leo's case);
  * ``state_rule[q]``, ``rule_start[r]``, ``rule_nullable[r]`` (1 when r derives ε);
  * every state lies on a path start → final through productive rules, so every
    Earley item is viable (a non-empty Earley set means a viable prefix);
  * states ``>= len(flags)`` are the virtual states of counted repetitions (``reps``):
    they have no byte edges and no rows in the per-state arrays.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..grammar import Grammar, GrammarError
from ..grammar.size import MAX_EXPANDED, expanded_size
from ..grammar.expr import (Alt, CharClass, Epsilon, Expr, Literal, Ref, Regex, Repeat, Seq, Terminal,
                            transform, walk)
from ..grammar.utf8 import class_sequences

FINAL = 1
HAS_OUT = 2
TAIL = 4
HAS_BYTES = 8

ACCEPT_RULE = "$accept"

COUNT_FROM = 64  # x{m,n} unrolling more copies than this is counted (module docstring)
REP_W = 6  # ints per row of ``reps``: base, m, cap, flags, X's rule (-1: none), R's rule
REP_UNBOUNDED, REP_NULLABLE = 1, 2
MAX_VIRTUAL = 1 << 30  # virtual states in all (ids stay int32)


class RuntimeGrammarError(ValueError):
    """The grammar uses something the byte-level runtime cannot compile."""


@dataclass
class CompiledGrammar:
    """Flat arrays of the rule automata (see the module docstring for their invariants)."""

    byte_next: np.ndarray
    ref_start: np.ndarray
    ref_rule: np.ndarray
    ref_target: np.ndarray
    flags: np.ndarray
    state_rule: np.ndarray
    rule_start: np.ndarray
    rule_nullable: np.ndarray
    rule_names: list[str]
    reps: np.ndarray  # counted repetitions, REP_W ints a row, then a row of zeros (module docstring)
    start_state: int  # s0 of $accept: the initial item is (s0, 0)
    accept_state: int  # sF of $accept: accepting iff (sF, 0) is in the current set
    empty_language: bool = False
    stats: dict = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        """Real states (rows of the per-state arrays); virtual ones are numbered after."""
        return len(self.flags)

    @property
    def n_reps(self) -> int:
        return len(self.reps) // REP_W - 1  # the last row is zeros (a sentinel)

    @property
    def n_rules(self) -> int:
        return len(self.rule_start)

    def arrays(self) -> tuple:
        """The tuple the numba kernels take, in their order."""
        return (self.byte_next, self.ref_start, self.ref_rule, self.ref_target, self.flags,
                self.state_rule, self.rule_start, self.rule_nullable, self.reps)


# ---------------------------------------------------------------- NFA per rule


def _adjacency(n: int, src: list[int]) -> tuple[list[int], list[int]]:
    """(order, start): the indices i of ``src`` with src[i] == x are order[start[x]:start[x+1]],
    in ascending i (the order the edges were added). A counting sort over int lists."""
    start = [0] * (n + 1)
    for x in src:
        start[x + 1] += 1
    for x in range(n):
        start[x + 1] += start[x]
    fill = start[:-1]
    order = [0] * len(src)
    for i, x in enumerate(src):
        order[fill[x]] = i
        fill[x] += 1
    return order, start


class _NFA:
    """A rule body's NFA as flat int lists (one list each, whatever the size: ints are not
    objects the garbage collector tracks): ε edges ``eps`` = pairs (source, target), byte
    edges ``byt`` = quads (source, lo, hi, target), rule edges ``ref_src`` / ``ref_name`` /
    ``ref_dst``. ``index()`` then groups each kind by source (in the order added)."""

    def __init__(self) -> None:
        self.n = 0
        self.eps: list[int] = []
        self.byt: list[int] = []
        self.ref_src: list[int] = []
        self.ref_name: list[str] = []
        self.ref_dst: list[int] = []
        self.eps_at: list[int] = []  # the groups by source, made by ``index()``
        self.eps_to: list[int] = []
        self.byt_order: list[int] = []
        self.byt_at: list[int] = []
        self.ref_order: list[int] = []
        self.ref_at: list[int] = []

    def new(self) -> int:
        self.n += 1
        return self.n - 1

    def build(self, e: Expr, s: int, t: int) -> None:
        """Add a fragment for ``e`` from s to t (edges leave s and enter t only from outside
        fresh internal states, so fragments compose)."""
        if isinstance(e, Epsilon):
            self.eps += (s, t)
        elif isinstance(e, Literal):
            self._chain([((b, b),) for b in e.text.encode("utf-8")], s, t)
        elif isinstance(e, CharClass):
            seqs = class_sequences(e.code_points())
            if not seqs:
                return  # empty class: no edge (the branch derives nothing)
            for sq in seqs:
                self._chain([(r,) for r in sq], s, t)
        elif isinstance(e, Ref):
            self.ref_src.append(s)
            self.ref_name.append(e.name)
            self.ref_dst.append(t)
        elif isinstance(e, Seq):
            cur = s
            for i, item in enumerate(e.items):
                nxt = t if i == len(e.items) - 1 else self.new()
                self.build(item, cur, nxt)
                cur = nxt
        elif isinstance(e, Alt):
            for item in e.items:
                self.build(item, s, t)
        elif isinstance(e, Repeat):
            cur = s
            for _ in range(e.min):
                nxt = self.new()
                self.build(e.item, cur, nxt)
                cur = nxt
            if e.max is None:
                loop, back = self.new(), self.new()
                self.eps += (cur, loop)
                self.build(e.item, loop, back)
                self.eps += (back, loop, loop, t)
            else:
                self.eps += (cur, t)
                for _ in range(e.max - e.min):
                    nxt = self.new()
                    self.build(e.item, cur, nxt)
                    self.eps += (nxt, t)
                    cur = nxt
        elif isinstance(e, (Terminal, Regex)):
            raise RuntimeGrammarError(
                f"the byte-level runtime does not compile Lark lexer atoms ({type(e).__name__} "
                f"{getattr(e, 'name', None) or getattr(e, 'pattern', '')!r}); use a GBNF/EBNF grammar")
        else:
            raise RuntimeGrammarError(f"cannot compile {e!r}")

    def _chain(self, ranges: list[tuple[tuple[int, int], ...]], s: int, t: int) -> None:
        cur = s
        for i, rs in enumerate(ranges):
            nxt = t if i == len(ranges) - 1 else self.new()
            for lo, hi in rs:
                self.byt += (cur, lo, hi, nxt)
            cur = nxt

    def index(self) -> None:
        """Group the edges by source: ``eps_to[eps_at[x]:eps_at[x+1]]`` are x's ε targets,
        ``byt_at`` / ``ref_at`` the same over the edge numbers of ``byt`` / ``ref_*``."""
        order, self.eps_at = _adjacency(self.n, self.eps[0::2])
        to = self.eps[1::2]
        self.eps_to = [to[k] for k in order]
        self.byt_order, self.byt_at = _adjacency(self.n, self.byt[0::4])
        self.ref_order, self.ref_at = _adjacency(self.n, self.ref_src)

    def closure(self, states) -> bytes:
        """The ε-closure of ``states``, as its sorted members packed in int32 bytes (a key
        the garbage collector does not track; ``_members`` unpacks it)."""
        at, to = self.eps_at, self.eps_to
        if len(states) == 1 and at[states[0]] == at[states[0] + 1]:
            return array("i", states).tobytes()  # one state without ε edges (most of them)
        out = set(states)
        stack = list(out)
        while stack:
            x = stack.pop()
            for k in range(at[x], at[x + 1]):
                y = to[k]
                if y not in out:
                    out.add(y)
                    stack.append(y)
        return array("i", sorted(out)).tobytes()


def _members(key: bytes) -> list[int]:
    a = array("i")
    a.frombytes(key)
    return a.tolist()


class _DFA:
    """One rule's automaton as flat int32 arrays (state 0 is the start): ``final[q]`` (0/1),
    byte edges ``b`` = rows (q, lo, hi, target), disjoint ranges per q, by q then ascending
    lo; rule edges ``r`` = rows (q, k, target), one per rule per q, by q, the rule being
    ``names[k]``. Arrays, not lists of tuples: numpy arrays are not objects the garbage
    collector tracks, so a compile leaves no per-state garbage behind and the cache of
    automata adds nothing to a full collection's walk."""

    __slots__ = ("final", "b", "r", "names")

    def __init__(self, final: np.ndarray, b: np.ndarray, r: np.ndarray, names: tuple[str, ...]):
        self.final, self.b, self.r, self.names = final, b, r, names

    @property
    def n_states(self) -> int:
        return len(self.final)

    def byte_edges(self, q: int) -> list[tuple[int, int, int]]:
        """(lo, hi, target) of q's byte edges (for tests and debugging)."""
        return [(lo, hi, t) for s, lo, hi, t in self.b.tolist() if s == q]

    def rule_edges(self, q: int) -> list[tuple[str, int]]:
        """(rule, target) of q's rule edges (for tests and debugging)."""
        return [(self.names[k], t) for s, k, t in self.r.tolist() if s == q]


def _rows(flat: list[int], width: int) -> np.ndarray:
    return np.array(flat, np.int32).reshape(-1, width)


def _determinize(nfa: _NFA, start: int, end: int) -> _DFA:
    """Subset construction over byte intervals and rule labels. DFA states are numbered in
    discovery order: per state, the byte targets by ascending interval, then the rule
    targets by first appearance (NFA members in ascending order). Sets of NFA states are
    bytes keys (``_NFA.closure``), so the tables of one rule hold no tracked objects."""
    nfa.index()
    first = nfa.closure([start])
    index = {first: 0}
    order = [first]
    closures: dict[int | bytes, bytes] = {}  # target set -> its ε-closure (this rule)
    byt, byt_order, byt_at = nfa.byt, nfa.byt_order, nfa.byt_at
    ref_name, ref_dst, ref_order, ref_at = nfa.ref_name, nfa.ref_dst, nfa.ref_order, nfa.ref_at

    def state_of(tg: list[int]) -> int:
        key = tg[0] if len(tg) == 1 else array("i", sorted(set(tg))).tobytes()  # (ints: untracked too)
        tgt = closures.get(key)
        if tgt is None:
            tgt = closures[key] = nfa.closure(tg)
        j = index.get(tgt)
        if j is None:
            j = index[tgt] = len(order)
            order.append(tgt)
        return j

    final: list[int] = []
    b: list[int] = []  # rows of 4 ints, flattened
    r: list[int] = []  # rows of 3 ints, flattened
    names: dict[str, int] = {}
    i = 0
    while i < len(order):
        members = _members(order[i])
        q = i
        i += 1
        final.append(1 if end in members else 0)
        # Byte edges: split into elementary intervals, each edge dropped into the
        # intervals it covers (a sweep, not every interval against every edge).
        edges = [4 * k for x in members for k in byt_order[byt_at[x]:byt_at[x + 1]]]
        if len(edges) == 1:
            e = edges[0]
            b += (q, byt[e + 1], byt[e + 2], state_of([byt[e + 3]]))
        elif edges:
            cuts = sorted({byt[e + 1] for e in edges} | {byt[e + 2] + 1 for e in edges})
            at = {c: k for k, c in enumerate(cuts)}
            buckets: list[list[int]] = [[] for _ in range(len(cuts) - 1)]
            for e in edges:
                t = byt[e + 3]
                for k in range(at[byt[e + 1]], at[byt[e + 2] + 1]):
                    buckets[k].append(t)
            mine = len(b)  # where this state's rows begin
            for k, tg in enumerate(buckets):
                if not tg:
                    continue
                lo, hi = cuts[k], cuts[k + 1] - 1
                j = state_of(tg)
                if len(b) > mine and b[-1] == j and b[-2] == lo - 1:
                    b[-2] = hi  # extends the previous interval to the same target
                else:
                    b += (q, lo, hi, j)
        by_rule: dict[str, list[int]] = {}
        for x in members:
            for k in ref_order[ref_at[x]:ref_at[x + 1]]:
                by_rule.setdefault(ref_name[k], []).append(ref_dst[k])
        for name, tg in by_rule.items():
            r += (q, names.setdefault(name, len(names)), state_of(tg))
    return _DFA(np.array(final, np.int32), _rows(b, 4), _rows(r, 3), tuple(names))


class _Body:
    """What compiling needs of one rule body, worked out once per distinct body: the rules
    it references (in order of first appearance), its expanded size (``grammar.size``),
    the most copies any of its repetitions would unroll to (more than COUNT_FROM: counted,
    ``_count_repetitions``), and its automaton (built when first needed: a rule
    unreachable from the start never is)."""

    __slots__ = ("refs", "size", "copies", "dfa")

    def __init__(self, body: Expr):
        from ..grammar.expr import refs
        self.refs = tuple(refs(body))
        self.size = expanded_size(body)
        self.copies = max((_copies(e) for e in walk(body) if isinstance(e, Repeat)), default=0)
        self.dfa: _DFA | None = None


_BODY_CACHE: "OrderedDict[Expr, _Body]" = OrderedDict()
_BODY_CACHE_SIZE = 8192


def _body(body: Expr) -> _Body:
    """The facts of a rule body, cached across grammars by the body (an immutable
    expression: a rule body means the same automaton in every grammar; references are by
    name), least recently used first out. A grammar that repeats a body (JSON-schema
    grammars do, thousands of times) pays for it once."""
    e = _BODY_CACHE.get(body)
    if e is None:
        e = _BODY_CACHE[body] = _Body(body)
        while len(_BODY_CACHE) > _BODY_CACHE_SIZE:
            _BODY_CACHE.popitem(last=False)
    else:
        _BODY_CACHE.move_to_end(body)
    return e


def _rule_dfa(body: Expr, entry: _Body | None = None) -> _DFA:
    """The rule body's automaton (cached with its facts, ``_body``). Arrays, never changed:
    compile_grammar trims with masks."""
    e = entry or _body(body)
    if e.dfa is None:
        nfa = _NFA()
        s, t = nfa.new(), nfa.new()
        nfa.build(body, s, t)
        e.dfa = _determinize(nfa, s, t)
    return e.dfa


# ---------------------------------------------------------------- counted repetitions


def _copies(e: Repeat) -> int:
    """How many copies of its item the unrolled automaton of ``e`` would hold."""
    return e.max if e.max is not None else e.min + 1


def _count_repetitions(grammar: Grammar) -> tuple[dict[str, tuple[Expr, _Body]],
                                                    dict[str, tuple[str, int, int | None]]]:
    """The rule bodies (with their facts, ``_body``) with every repetition of more than
    COUNT_FROM copies replaced by a reference to a counted rule ``<rule>$<k>`` (inner ones
    first), and those rules as ``{name: (X, m, n)}``, X the repeated item's rule
    (``<rule>$<k>.x`` with the item as its body, unless the item is a reference).
    Language-preserving: a rule stands for its definition, and the counted rule's language
    is X{m,n} (module docstring)."""
    bodies: dict[str, tuple[Expr, _Body]] = {}
    counted: dict[str, tuple[str, int, int | None]] = {}
    for r in grammar.rules:
        entry = _body(r.body)
        if entry.copies <= COUNT_FROM:
            bodies[r.name] = (r.body, entry)  # (no copy of the others)
            continue
        k = [0]

        def count(e: Expr, owner: str = r.name) -> Expr:
            if not (isinstance(e, Repeat) and _copies(e) > COUNT_FROM):
                return e
            name = f"{owner}${k[0]}"
            k[0] += 1
            if isinstance(e.item, Ref):
                elem = e.item.name
            else:
                elem = name + ".x"
                bodies[elem] = (e.item, _body(e.item))
            counted[name] = (elem, e.min, e.max)
            ref = Ref(elem)  # what the rule-level passes see of it: it reaches X
            bodies[name] = (ref, _body(ref))
            return Ref(name)

        new = transform(r.body, count)
        bodies[r.name] = (new, _body(new))
    return bodies, counted


def _counted_dfa(elem: str, m: int, n: int | None) -> _DFA:
    """The automaton that stands for X{m,n} in the rule-level analyses (productive,
    nullable, trimming, reachability): 0 -X-> 1 -X-> 1, 0 final iff m = 0, 1 final; it
    derives something iff m = 0 or X does, ε iff m = 0 or X does, and reaches X."""
    r = [0, 0, 1] + ([1, 0, 1] if n is None or n > 1 else [])
    return _DFA(np.array([m == 0, 1], np.int32), _rows([], 4), _rows(r, 3), (elem,))


def _check_size(bodies: dict[str, tuple[Expr, _Body]], limit: int = MAX_EXPANDED) -> None:
    """GrammarError when the automata would copy more than ``limit`` symbols (counted
    repetitions are references here, so only the small ones multiply)."""
    total = 0
    for name, (_, entry) in bodies.items():
        total += entry.size
        if total > limit:
            raise GrammarError(f"grammar too large once repetitions are expanded (more than {limit:,} "
                               f"symbols, at rule '{name}'): reduce the repetition bounds")


# ---------------------------------------------------------------- whole grammar


class _Network:
    """Every rule's automaton side by side, as flat arrays (int64): rule i's states are
    ``base[i] .. base[i+1]-1`` (state q of rule i is ``base[i] + q``); ``state_rule[s]``
    its rule; ``final[s]`` (bool); byte edges ``b_src, b_lo, b_hi, b_tgt`` and rule edges
    ``r_src, r_rule, r_tgt`` (rule indices into ``names``), by source state, each rule's
    edges in its automaton's order."""

    def __init__(self, names: list[str], dfas: list[_DFA]):
        rid = {n: i for i, n in enumerate(names)}
        sizes = np.array([d.n_states for d in dfas], np.int64)
        self.names = names
        self.base = np.zeros(len(names) + 1, np.int64)
        np.cumsum(sizes, out=self.base[1:])
        self.state_rule = np.repeat(np.arange(len(names)), sizes)
        self.final = np.concatenate([d.final for d in dfas]).astype(bool) if dfas else np.zeros(0, bool)
        b = np.concatenate([d.b for d in dfas]).astype(np.int64) if dfas else np.zeros((0, 4), np.int64)
        r = np.concatenate([d.r for d in dfas]).astype(np.int64) if dfas else np.zeros((0, 3), np.int64)
        b_off = np.repeat(self.base[:-1], [len(d.b) for d in dfas])
        r_off = np.repeat(self.base[:-1], [len(d.r) for d in dfas])
        self.b_src, self.b_lo, self.b_hi, self.b_tgt = b[:, 0] + b_off, b[:, 1], b[:, 2], b[:, 3] + b_off
        # a rule edge names its rule by its automaton's ``names``: one table of every
        # automaton's names, each automaton's part starting at ``name_at``
        all_names = [m for d in dfas for m in d.names]
        name_at = np.zeros(len(dfas) + 1, np.int64)
        np.cumsum([len(d.names) for d in dfas], out=name_at[1:])
        name_rule = np.array([rid[m] for m in all_names], np.int64)
        owner = np.repeat(np.arange(len(dfas)), [len(d.r) for d in dfas])
        self.r_src, self.r_tgt = r[:, 0] + r_off, r[:, 2] + r_off
        self.r_rule = name_rule[name_at[owner] + r[:, 1]] if len(r) else np.zeros(0, np.int64)

    @property
    def n_states(self) -> int:
        return int(self.base[-1])


def _csr(keys: np.ndarray, n: int) -> tuple[list[int], list[int]]:
    """(order, start) with ``order[start[k]:start[k+1]]`` the indices i with keys[i] == k,
    ascending; as int lists (a loop over them allocates no tracked objects)."""
    order = np.argsort(keys, kind="stable")
    start = np.searchsorted(keys[order], np.arange(n + 1))
    return order.tolist(), start.tolist()


def _live_states(net: _Network, use_bytes: bool) -> tuple[np.ndarray, np.ndarray]:
    """The least fixpoint of "state s reaches a final state of its rule" over byte edges
    (when ``use_bytes``) and rule edges whose rule is live, with "rule B is live" = "B's
    start state reaches a final state": (live rules, live states), bool arrays. With bytes
    the live rules are the productive ones (derive some string), without, the nullable ones.

    Horn propagation backwards from the final states, linear in the edges: a state is live
    when a byte edge leads to a live state, or a rule edge (B, t) has t live and B live. A
    rule edge whose target became live before its rule waits in ``pending[B]`` until B's
    start state does. (The least fixpoint of the rule-level iteration "B is live when its
    automaton reaches a final state through live rules", computed in one pass.)"""
    n = net.n_states
    if use_bytes:
        b_order, b_start = _csr(net.b_tgt, n)
        b_src = net.b_src.tolist()
    r_order, r_start = _csr(net.r_tgt, n)
    r_src, r_rule = net.r_src.tolist(), net.r_rule.tolist()
    rule_at = [-1] * n  # a rule's start state -> the rule
    for i, s in enumerate(net.base[:-1].tolist()):
        rule_at[s] = i
    live = bytearray(n)
    work = np.flatnonzero(net.final).tolist()
    for x in work:
        live[x] = 1
    live_rule = bytearray(len(net.names))
    pending: dict[int, list[int]] = {}
    while work:
        x = work.pop()
        r = rule_at[x]
        if r >= 0 and not live_rule[r]:
            live_rule[r] = 1
            for y in pending.pop(r, ()):
                if not live[y]:
                    live[y] = 1
                    work.append(y)
        if use_bytes:
            for e in b_order[b_start[x]:b_start[x + 1]]:
                y = b_src[e]
                if not live[y]:
                    live[y] = 1
                    work.append(y)
        for e in r_order[r_start[x]:r_start[x + 1]]:
            y = r_src[e]
            if not live[y]:
                m = r_rule[e]
                if live_rule[m]:
                    live[y] = 1
                    work.append(y)
                else:
                    pending.setdefault(m, []).append(y)
    return np.frombuffer(live_rule, np.uint8).astype(bool), np.frombuffer(live, np.uint8).astype(bool)


def _reachable(n: int, starts: list[int], src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Bool array of the nodes 0..n-1 reachable from ``starts`` along the edges src -> tgt."""
    order, start = _csr(src, n)
    tg = tgt.tolist()
    seen = bytearray(n)
    stack = list(starts)
    for x in stack:
        seen[x] = 1
    while stack:
        x = stack.pop()
        for e in order[start[x]:start[x + 1]]:
            y = tg[e]
            if not seen[y]:
                seen[y] = 1
                stack.append(y)
    return np.frombuffer(seen, np.uint8).astype(bool)


def _rule_names_reachable(grammar: Grammar, rules: dict[str, tuple[Expr, _Body]]) -> list[str]:
    """The rules reachable from the start by name (before any trimming), in ``rules``'
    order; RuntimeGrammarError for a missing start or an undefined reference."""
    if grammar.start not in rules:
        raise RuntimeGrammarError(f"missing start rule '{grammar.start}'")
    reach, stack = {grammar.start}, [grammar.start]
    while stack:
        n = stack.pop()
        for m in rules[n][1].refs:
            if m not in rules:
                raise RuntimeGrammarError(f"undefined rule '{m}' referenced in '{n}'")
            if m not in reach:
                reach.add(m)
                stack.append(m)
    return [n for n in rules if n in reach]


def compile_grammar(grammar: Grammar) -> CompiledGrammar:
    """Compile ``grammar`` to flat arrays. Raises RuntimeGrammarError for Lark atoms, and
    GrammarError when its repetitions expand past ``grammar.size.MAX_EXPANDED`` (the
    automata copy a repetition's item out).

    The rule automata are cached arrays (``_body``, ``_rule_dfa``); the passes over the whole grammar
    (productive and nullable rules, trimming, numbering) work on their concatenation
    (``_Network``) with numpy and loops over int lists, so a compile allocates a few
    objects per rule for the garbage collector to track, not several per state."""
    import time
    t0 = time.perf_counter()
    rules, counted = _count_repetitions(grammar)
    _check_size(rules)
    names = _rule_names_reachable(grammar, rules)
    net = _Network(names, [_counted_dfa(*counted[n]) if n in counted else _rule_dfa(*rules[n]) for n in names])
    k = len(names)
    rid = {n: i for i, n in enumerate(names)}

    # Productive rules (derive some string), then nullable rules (derive ε).
    productive, co = _live_states(net, True)
    nullable, _ = _live_states(net, False)
    empty = not productive[rid[grammar.start]]

    # Trim: drop edges to unproductive rules and to states that cannot reach a final state
    # (through productive rules: the live states ``co``), then the states unreachable from
    # their rule's start (nothing is when nothing was dropped: every state of a subset
    # construction is reachable from its start).
    keep_b = co[net.b_tgt]
    keep_r = productive[net.r_rule] & co[net.r_tgt]
    n_all = net.n_states
    if keep_b.all() and keep_r.all() and co.all():
        kept = np.ones(n_all, bool)
    else:
        kept = _reachable(n_all, net.base[:-1][productive].tolist(),
                          np.concatenate([net.b_src[keep_b], net.r_src[keep_r]]),
                          np.concatenate([net.b_tgt[keep_b], net.r_tgt[keep_r]]))

    # Rules still reachable after trimming (along the kept states' rule edges).
    on = keep_r & kept[net.r_src]
    live_rule = np.zeros(k, bool) if empty else _reachable(
        k, [rid[grammar.start]], net.state_rule[net.r_src[on]], net.r_rule[on])
    order = [n for i, n in enumerate(names) if live_rule[i]]
    rule_names = order + [ACCEPT_RULE]
    ord_id = np.full(k, -1, np.int64)
    ord_id[np.flatnonzero(live_rule)] = np.arange(len(order))
    accept_id = len(order)

    # Number the kept states of the live (uncounted) rules, rule by rule, then $accept's.
    is_counted = np.array([n in counted for n in names], bool)
    mine = kept & live_rule[net.state_rule] & ~is_counted[net.state_rule]
    new = np.cumsum(mine) - 1
    n_rule_states = int(mine.sum())
    s0 = n_rule_states
    sF = s0 + 1
    n_states = sF + 1
    reps: list[int] = []
    base = n_states
    rule_start_l: list[int] = []
    for n in order:
        if n in counted:
            elem, m, hi = counted[n]
            live_x = bool(productive[rid[elem]])  # X derives something (else its edge was dropped)
            cap = (m if hi is None else hi) if live_x else 0
            fl = (REP_UNBOUNDED if hi is None and live_x else 0) | (REP_NULLABLE if nullable[rid[elem]] else 0)
            reps += [base, m, cap, fl, int(ord_id[rid[elem]]) if live_x else -1, int(ord_id[rid[n]])]
            rule_start_l.append(base)
            base += cap + 1
        else:
            rule_start_l.append(int(new[net.base[rid[n]]]))
    if base > MAX_VIRTUAL:
        raise RuntimeGrammarError(f"counted repetitions need {base:,} states, more than {MAX_VIRTUAL:,}")

    eb = keep_b & mine[net.b_src]
    er = keep_r & mine[net.r_src]
    b_src = new[net.b_src[eb]]
    r_src = new[net.r_src[er]]
    byte_next = np.full(n_states * 256, -1, dtype=np.int32)
    if len(b_src):  # byte edges as runs: byte_next[start:start + length] = target
        lo = net.b_lo[eb]
        ln = net.b_hi[eb] - lo + 1
        first = np.cumsum(ln) - ln  # where each run begins in the flattened index list
        idx = np.repeat(b_src * 256 + lo - first, ln) + np.arange(int(ln.sum()))
        byte_next[idx] = np.repeat(new[net.b_tgt[eb]].astype(np.int32), ln)
    ref_count = np.bincount(r_src, minlength=n_states)
    ref_rule = ord_id[net.r_rule[er]]
    ref_target = new[net.r_tgt[er]]
    has_bytes = np.bincount(b_src, minlength=n_states) > 0
    flags = np.where(has_bytes, HAS_BYTES | HAS_OUT, 0) | np.where(ref_count > 0, HAS_OUT, 0)
    state_rule = np.zeros(n_states, np.int64)
    flags[:n_rule_states] |= np.where(net.final[mine], FINAL, 0)
    state_rule[:n_rule_states] = ord_id[net.state_rule[mine]]
    state_rule[s0] = state_rule[sF] = accept_id
    if not empty:  # s0's edge is the last: s0 is numbered after every rule state
        ref_count[s0] = 1
        ref_rule = np.append(ref_rule, ord_id[rid[grammar.start]])
        ref_target = np.append(ref_target, sF)
        flags[s0] = HAS_OUT
    flags[sF] = FINAL
    flags |= np.where(((flags & FINAL) != 0) & ((flags & HAS_OUT) == 0), TAIL, 0)
    ref_start = np.zeros(n_states + 1, dtype=np.int32)
    np.cumsum(ref_count, out=ref_start[1:])
    rule_start = np.array(rule_start_l + [s0], dtype=np.int32)
    rule_nullable = np.array([1 if nullable[rid[n]] else 0 for n in order] + [0], dtype=np.int32)
    stats = {"rules": len(order), "states": n_states, "rule_edges": int(len(ref_rule)),
             "counted": len(reps) // REP_W, "compile_s": time.perf_counter() - t0}
    return CompiledGrammar(byte_next, ref_start, ref_rule.astype(np.int32), ref_target.astype(np.int32),
                           flags.astype(np.int32), state_rule.astype(np.int32), rule_start, rule_nullable,
                           rule_names, np.array(reps + [0] * REP_W, np.int32), s0, sF, empty, stats)
