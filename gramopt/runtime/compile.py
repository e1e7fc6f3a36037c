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

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..grammar import Grammar, GrammarError
from ..grammar.size import MAX_EXPANDED, expanded_size
from ..grammar.expr import (Alt, CharClass, Epsilon, Expr, Literal, Ref, Regex, Repeat, Seq, Terminal,
                            transform)
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


class _NFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.bytes: list[list[tuple[int, int, int]]] = []
        self.refs: list[list[tuple[str, int]]] = []

    def new(self) -> int:
        self.eps.append([])
        self.bytes.append([])
        self.refs.append([])
        return len(self.eps) - 1

    def build(self, e: Expr, s: int, t: int) -> None:
        """Add a fragment for ``e`` from s to t (edges leave s and enter t only from outside
        fresh internal states, so fragments compose)."""
        if isinstance(e, Epsilon):
            self.eps[s].append(t)
        elif isinstance(e, Literal):
            self._chain([((b, b),) for b in e.text.encode("utf-8")], s, t)
        elif isinstance(e, CharClass):
            seqs = class_sequences(e.code_points())
            if not seqs:
                return  # empty class: no edge (the branch derives nothing)
            for sq in seqs:
                self._chain([(r,) for r in sq], s, t)
        elif isinstance(e, Ref):
            self.refs[s].append((e.name, t))
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
                self.eps[cur].append(loop)
                self.build(e.item, loop, back)
                self.eps[back].append(loop)
                self.eps[loop].append(t)
            else:
                self.eps[cur].append(t)
                for _ in range(e.max - e.min):
                    nxt = self.new()
                    self.build(e.item, cur, nxt)
                    self.eps[nxt].append(t)
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
                self.bytes[cur].append((lo, hi, nxt))
            cur = nxt

    def closure(self, states) -> frozenset[int]:
        out = set(states)
        stack = list(states)
        while stack:
            x = stack.pop()
            for y in self.eps[x]:
                if y not in out:
                    out.add(y)
                    stack.append(y)
        return frozenset(out)


@dataclass
class _DFA:
    """One rule's automaton: state 0 is the start."""

    final: "list[bool] | tuple"
    bytes: "list[list[tuple[int, int, int]]] | tuple"  # (lo, hi, target), disjoint ranges
    refs: "list[list[tuple[str, int]]] | tuple"  # (rule, target), one edge per rule


def _determinize(nfa: _NFA, start: int, end: int) -> _DFA:
    """Subset construction over byte intervals and rule labels. DFA states are numbered in
    discovery order: per state, the byte targets by ascending interval, then the rule
    targets by first appearance (NFA members in ascending order)."""
    first = nfa.closure([start])
    index = {first: 0}
    order = [first]
    closures: dict[frozenset, frozenset] = {}  # target set -> its ε-closure (this rule)

    def state_of(tg) -> int:
        key = frozenset(tg)
        tgt = closures.get(key)
        if tgt is None:
            tgt = closures[key] = nfa.closure(key)
        j = index.get(tgt)
        if j is None:
            j = index[tgt] = len(order)
            order.append(tgt)
        return j

    final, byt, refs = [], [], []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        final.append(end in cur)
        members = sorted(cur)
        # Byte edges: split into elementary intervals, each edge dropped into the
        # intervals it covers (a sweep, not every interval against every edge).
        edges = [e for x in members for e in nfa.bytes[x]]
        out_b: list[tuple[int, int, int]] = []
        if len(edges) == 1:
            lo, hi, t = edges[0]
            out_b.append((lo, hi, state_of((t,))))
        elif edges:
            cuts = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
            at = {c: k for k, c in enumerate(cuts)}
            buckets: list[list[int]] = [[] for _ in range(len(cuts) - 1)]
            for lo, hi, t in edges:
                for k in range(at[lo], at[hi + 1]):
                    buckets[k].append(t)
            for k, tg in enumerate(buckets):
                if not tg:
                    continue
                a, b = cuts[k], cuts[k + 1]
                j = state_of(tg)
                if out_b and out_b[-1][2] == j and out_b[-1][1] == a - 1:
                    out_b[-1] = (out_b[-1][0], b - 1, j)
                else:
                    out_b.append((a, b - 1, j))
        byt.append(out_b)
        by_rule: dict[str, list[int]] = {}
        for x in members:
            for name, t in nfa.refs[x]:
                by_rule.setdefault(name, []).append(t)
        refs.append([(name, state_of(tg)) for name, tg in by_rule.items()])
    return _DFA(final, byt, refs)


_DFA_CACHE: "OrderedDict[Expr, _DFA]" = OrderedDict()
_DFA_CACHE_SIZE = 8192


def _rule_dfa(body: Expr) -> _DFA:
    """The rule body's automaton (a fresh shallow copy: compile_grammar reassigns its edge
    lists while trimming). Cached across grammars by the body (an immutable expression: a
    rule body means the same automaton in every grammar; references are by name). Cached as
    tuples of tuples of ints and names: the garbage collector stops tracking such tuples
    after one pass, so a full cache adds nothing to every later full collection's walk."""
    d = _DFA_CACHE.get(body)
    if d is None:
        nfa = _NFA()
        s, t = nfa.new(), nfa.new()
        nfa.build(body, s, t)
        d = _determinize(nfa, s, t)
        d = _DFA(tuple(d.final), tuple(map(tuple, d.bytes)), tuple(map(tuple, d.refs)))
        _DFA_CACHE[body] = d
        while len(_DFA_CACHE) > _DFA_CACHE_SIZE:
            _DFA_CACHE.popitem(last=False)
    else:
        _DFA_CACHE.move_to_end(body)
    return _DFA(d.final, d.bytes, d.refs)


# ---------------------------------------------------------------- counted repetitions


def _copies(e: Repeat) -> int:
    """How many copies of its item the unrolled automaton of ``e`` would hold."""
    return e.max if e.max is not None else e.min + 1


def _count_repetitions(grammar: Grammar) -> tuple[dict[str, Expr], dict[str, tuple[str, int, int | None]]]:
    """The rule bodies with every repetition of more than COUNT_FROM copies replaced by a
    reference to a counted rule ``<rule>$<k>`` (inner ones first), and those rules as
    ``{name: (X, m, n)}``, X the repeated item's rule (``<rule>$<k>.x`` with the item as
    its body, unless the item is a reference). Language-preserving: a rule stands for its
    definition, and the counted rule's language is X{m,n} (module docstring)."""
    bodies: dict[str, Expr] = {}
    counted: dict[str, tuple[str, int, int | None]] = {}
    for r in grammar.rules:
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
                bodies[elem] = e.item
            counted[name] = (elem, e.min, e.max)
            bodies[name] = Ref(elem)  # what the rule-level passes see of it: it reaches X
            return Ref(name)

        bodies[r.name] = transform(r.body, count)
    return bodies, counted


def _counted_dfa(elem: str, m: int, n: int | None) -> _DFA:
    """The automaton that stands for X{m,n} in the rule-level analyses (productive,
    nullable, trimming, reachability): 0 -X-> 1 -X-> 1, 0 final iff m = 0, 1 final; it
    derives something iff m = 0 or X does, ε iff m = 0 or X does, and reaches X."""
    return _DFA([m == 0, True], [[], []], [[(elem, 1)], [(elem, 1)] if n is None or n > 1 else []])


def _check_size(bodies: dict[str, Expr], limit: int = MAX_EXPANDED) -> None:
    """GrammarError when the automata would copy more than ``limit`` symbols (counted
    repetitions are references here, so only the small ones multiply)."""
    total = 0
    for name, body in bodies.items():
        total += expanded_size(body)
        if total > limit:
            raise GrammarError(f"grammar too large once repetitions are expanded (more than {limit:,} "
                               f"symbols, at rule '{name}'): reduce the repetition bounds")


# ---------------------------------------------------------------- whole grammar


def _live_states(names: list[str], dfas: dict[str, _DFA], use_bytes: bool) -> tuple[set, dict]:
    """The least fixpoint of "state q of rule n reaches a final state of n" over byte edges
    (when ``use_bytes``) and rule edges whose rule is live, with "rule B is live" = "B's
    start state reaches a final state": (live rules, {rule: its live states}). With bytes
    the live rules are the productive ones (derive some string), without, the nullable ones.

    Horn propagation backwards from the final states, linear in the edges: a state is live
    when a byte edge leads to a live state, or a rule edge (B, t) has t live and B live. A
    rule edge whose target became live before its rule waits in ``pending[B]`` until B's
    start state does. (The least fixpoint of the rule-level iteration "B is live when its
    automaton reaches a final state through live rules", computed in one pass.) States are
    numbered rule after rule (``base``) so the tables are flat lists."""
    rid = {n: i for i, n in enumerate(names)}
    base = [0] * (len(names) + 1)
    for i, n in enumerate(names):
        base[i + 1] = base[i] + len(dfas[n].final)
    rev: list[list[int]] = [[] for _ in range(base[-1])]  # target -> sources (byte edges)
    rev_ref: list[list[tuple[int, int]]] = [[] for _ in range(base[-1])]  # -> (source, rule)
    live = bytearray(base[-1])
    work: list[int] = []
    for i, n in enumerate(names):
        d, b = dfas[n], base[i]
        for q, f in enumerate(d.final):
            if use_bytes:
                for _, _, t in d.bytes[q]:
                    rev[b + t].append(b + q)
            for m, t in d.refs[q]:
                rev_ref[b + t].append((b + q, rid[m]))
            if f:
                live[b + q] = 1
                work.append(b + q)
    starts = {base[i]: i for i in range(len(names))}  # a rule's start state -> the rule
    live_rule = bytearray(len(names))
    pending: dict[int, list[int]] = {}
    while work:
        x = work.pop()
        r = starts.get(x)
        if r is not None and not live_rule[r]:
            live_rule[r] = 1
            for y in pending.pop(r, ()):
                if not live[y]:
                    live[y] = 1
                    work.append(y)
        for y in rev[x]:
            if not live[y]:
                live[y] = 1
                work.append(y)
        for y, m in rev_ref[x]:
            if not live[y]:
                if live_rule[m]:
                    live[y] = 1
                    work.append(y)
                else:
                    pending.setdefault(m, []).append(y)
    rules = {n for i, n in enumerate(names) if live_rule[i]}
    states = {n: {q for q in range(base[i + 1] - base[i]) if live[base[i] + q]}
              for i, n in enumerate(names) if live_rule[i]}
    return rules, states


def compile_grammar(grammar: Grammar) -> CompiledGrammar:
    """Compile ``grammar`` to flat arrays. Raises RuntimeGrammarError for Lark atoms, and
    GrammarError when its repetitions expand past ``grammar.size.MAX_EXPANDED`` (the
    automata copy a repetition's item out)."""
    import time
    t0 = time.perf_counter()
    rules, counted = _count_repetitions(grammar)
    _check_size(rules)
    if grammar.start not in rules:
        raise RuntimeGrammarError(f"missing start rule '{grammar.start}'")
    # Rules reachable from the start (by name, before any trimming).
    reach, stack = {grammar.start}, [grammar.start]
    while stack:
        n = stack.pop()
        from ..grammar.expr import refs as expr_refs
        for m in expr_refs(rules[n]):
            if m not in rules:
                raise RuntimeGrammarError(f"undefined rule '{m}' referenced in '{n}'")
            if m not in reach:
                reach.add(m)
                stack.append(m)
    names = [n for n in rules if n in reach]
    dfas = {n: _counted_dfa(*counted[n]) if n in counted else _rule_dfa(rules[n]) for n in names}

    # Productive rules (derive some string), then nullable rules (derive ε).
    productive, co_states = _live_states(names, dfas, True)
    nullable, _ = _live_states(names, dfas, False)

    empty = grammar.start not in productive
    # Trim each productive rule: drop edges to unproductive rules, states that cannot reach
    # a final state (through productive rules: the live states above), and states
    # unreachable from the rule's start.
    kept: dict[str, list[int]] = {}
    all_productive = len(productive) == len(names)
    for n in names:
        if n not in productive:
            continue
        d = dfas[n]
        co = co_states[n]
        if all_productive and len(co) == len(d.final):
            # nothing to drop, and every state of a subset construction is reachable from 0
            kept[n] = list(range(len(d.final)))
            continue
        d.refs = [[(m, t) for m, t in rs if m in productive] for rs in d.refs]
        d.bytes = [[e for e in es if e[2] in co] for es in d.bytes]
        d.refs = [[e for e in es if e[1] in co] for es in d.refs]
        seen, stack = [0], [0]
        seen_set = {0}
        while stack:
            q = stack.pop()
            for t in [e[2] for e in d.bytes[q]] + [e[1] for e in d.refs[q]]:
                if t not in seen_set:
                    seen_set.add(t)
                    seen.append(t)
                    stack.append(t)
        kept[n] = sorted(seen_set)

    # Rules still reachable after trimming.
    live = [] if empty else [grammar.start]
    live_set = set(live)
    i = 0
    while i < len(live):
        n = live[i]
        i += 1
        d = dfas[n]
        for q in kept[n]:
            for m, _ in d.refs[q]:
                if m not in live_set:
                    live_set.add(m)
                    live.append(m)
    order = [n for n in names if n in live_set]
    rule_names = order + [ACCEPT_RULE]
    rule_id = {n: i for i, n in enumerate(rule_names)}

    gid: dict[str, dict[int, int]] = {}  # rule -> its kept states' global numbers
    n_rule_states = 0
    for n in order:
        if n not in counted:
            gid[n] = {q: n_rule_states + k for k, q in enumerate(kept[n])}
            n_rule_states += len(kept[n])
    s0 = n_rule_states
    sF = s0 + 1
    n_states = sF + 1
    reps: list[int] = []
    base = n_states
    for n in order:
        if n in counted:
            elem, m, hi = counted[n]
            live_x = bool(dfas[n].refs[0])  # X derives something (else its edge was dropped)
            cap = (m if hi is None else hi) if live_x else 0
            fl = (REP_UNBOUNDED if hi is None and live_x else 0) | (REP_NULLABLE if elem in nullable else 0)
            gid[n] = {0: base}
            reps += [base, m, cap, fl, rule_id[elem] if live_x else -1, rule_id[n]]
            base += cap + 1
    if base > MAX_VIRTUAL:
        raise RuntimeGrammarError(f"counted repetitions need {base:,} states, more than {MAX_VIRTUAL:,}")

    flags = [0] * n_states
    state_rule = [0] * n_states
    starts: list[int] = []  # byte edges as runs: byte_next[start:start + length] = target
    lengths: list[int] = []
    targets: list[int] = []
    ref_count = [0] * n_states
    ref_rule_l: list[int] = []
    ref_target_l: list[int] = []
    for n in order:
        if n in counted:
            continue
        d = dfas[n]
        r = rule_id[n]
        loc = gid[n]
        for q in kept[n]:
            g = loc[q]
            state_rule[g] = r
            f = FINAL if d.final[q] else 0
            if d.bytes[q]:
                f |= HAS_BYTES | HAS_OUT
                for lo, hi, t in d.bytes[q]:
                    starts.append(g * 256 + lo)
                    lengths.append(hi - lo + 1)
                    targets.append(loc[t])
            if d.refs[q]:
                f |= HAS_OUT
                ref_count[g] = len(d.refs[q])
                for m, t in d.refs[q]:
                    ref_rule_l.append(rule_id[m])
                    ref_target_l.append(loc[t])
            if (f & FINAL) and not (f & HAS_OUT):
                f |= TAIL
            flags[g] = f
    state_rule[s0] = state_rule[sF] = rule_id[ACCEPT_RULE]
    if not empty:  # s0's edge is the last: s0 is numbered after every rule state
        ref_count[s0] = 1
        ref_rule_l.append(rule_id[grammar.start])
        ref_target_l.append(sF)
        flags[s0] = HAS_OUT
    flags[sF] = FINAL | TAIL

    byte_next = np.full(n_states * 256, -1, dtype=np.int32)
    if starts:
        ln = np.array(lengths, np.int64)
        first = np.cumsum(ln) - ln  # where each run begins in the flattened index list
        idx = np.repeat(np.array(starts, np.int64) - first, ln) + np.arange(int(ln.sum()))
        byte_next[idx] = np.repeat(np.array(targets, np.int32), ln)
    flags = np.array(flags, dtype=np.int32)
    state_rule = np.array(state_rule, dtype=np.int32)
    ref_start = np.zeros(n_states + 1, dtype=np.int32)
    np.cumsum(ref_count, out=ref_start[1:])
    ref_rule = np.array(ref_rule_l, dtype=np.int32)
    ref_target = np.array(ref_target_l, dtype=np.int32)
    rule_start = np.array([gid[n][0] for n in order] + [s0], dtype=np.int32)
    rule_nullable = np.array([1 if n in nullable else 0 for n in order] + [0], dtype=np.int32)
    stats = {"rules": len(order), "states": n_states, "rule_edges": int(len(ref_rule)),
             "counted": len(reps) // REP_W, "compile_s": time.perf_counter() - t0}
    return CompiledGrammar(byte_next, ref_start, ref_rule, ref_target, flags, state_rule, rule_start,
                           rule_nullable, rule_names, np.array(reps + [0] * REP_W, np.int32), s0, sF,
                           empty, stats)
