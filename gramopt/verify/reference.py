"""The reference recognizer: a small, plain Earley recognizer in pure Python.

    r = Recognizer(grammar)            bytes for GBNF/EBNF; atom ids for Lark (r.atoms)
    r.accepts(data)  r.is_viable_prefix(data)  r.next_bytes(data)
    s = r.initial(); s = r.advance(s, x)  (None = dead); r.state_accepts(s); r.state_next_bytes(s)

It runs over ``symbols.compile_grammar``'s pruned integer BNF, where every nonterminal is
productive and reachable; hence an Earley set is non-empty exactly when its input is a
viable prefix, and the terminals after the dots of a set are exactly the viable next
symbols (each item lies on a path to a sentence).

The algorithm is Earley's, with Aycock–Horspool's fix for ε: when predicting a nullable
nonterminal B from ``A → α • B β``, also add ``A → α B • β``. That makes one pass over a
worklist per set sufficient with nullable rules; left recursion, ambiguity and cycles
(``A → A``) need nothing special because a set is a set.

States are Earley sets, immutable and hash-consed, so that prefixes with the same future
share one state (``advance`` is then memoized per (state, symbol class), and a lockstep
search over two recognizers may skip a pair of states it has met before). Three choices
make a set's identity depend only on its future, none of which changes what is accepted:

  * an item is ``(suffix, origin)``: the dotted production is kept only as its left-hand
    side and the symbols after the dot (``A → a • B`` and ``A → b • B`` behave alike), and
    the origin is the *set* the item started in (``None``: this set), not a position;
  * completed items are not kept: completion happens while the set is built, and after
    that only the sets' ``accepting`` flag (``S' → S •`` was completed) is read;
  * Leo's right-recursion collapse (``leo=True``): an item ``A → • B`` (one symbol left)
    whose origin set o has exactly one item waiting on A, ``X → • A`` from origin o',
    becomes ``X → • B`` from o' (applied transitively) — completing B then completes X at
    o' either way, and the intermediate completed items are the ones not kept anyway.
    Right-recursive grammars then reach finitely many states.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..grammar import Grammar
from ..grammar.memo import IdentityMemo
from .result import WorkBudget
from .symbols import Compiled, compile_grammar, symbol_classes

Item = tuple  # (suffix id, origin: State | None)
_SPEND_EVERY = 1 << 14  # agenda steps between two reports to the work budget
KEPT_SETS = 20_000  # Earley sets a recognizer keeps between two inputs of a long check (``Recognizer.trim``)
_UNKNOWN = object()  # not in a set's memo yet


class Suffixes:
    """Dotted productions up to what matters for the future: ``(lhs, symbols after the
    dot, tag)`` ↦ id, with ``lhs[k]``, ``head[k]`` (the symbol after the dot, None when
    complete), ``rest[k]`` (the id once the dot has moved past ``head[k]``) and ``tag[k]``
    (-1; the production's index when a recognizer keeps productions apart:
    ``Recognizer(by_production=True)``)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, tuple[int, ...], int], int] = {}  # (lhs, tail, tag) asked for -> id
        self.cons: dict[tuple[int, int, int, int], int] = {}  # (lhs, head, rest, tag) -> id
        self.ends: dict[tuple[int, int], int] = {}  # (lhs, tag) -> the id of the complete item
        self.lhs: list[int] = []
        self.head: list[int | None] = []
        self.rest: list[int] = []
        self.tag: list[int] = []

    def id(self, lhs: int, tail: tuple[int, ...], tag: int = -1) -> int:
        ids = self.ids
        k = ids.get((lhs, tail, tag))
        if k is not None:
            return k
        # Iterative, not recursive: a production may have thousands of symbols. Suffixes
        # are numbered shortest first, each by (its first symbol, the id of the rest), so a
        # production of n symbols costs n steps, not n slices of up to n symbols; the ones
        # numbered before keep their ids (a suffix is numbered only after all shorter ones).
        k = self.ends.get((lhs, tag))
        if k is None:
            k = self.ends[(lhs, tag)] = self._new(lhs, None, -1, tag)
        cons = self.cons
        for i in range(len(tail) - 1, -1, -1):
            key = (lhs, tail[i], k, tag)
            nxt = cons.get(key)
            k = cons[key] = self._new(lhs, tail[i], k, tag) if nxt is None else nxt
        ids[(lhs, tail, tag)] = k
        return k

    def copy(self) -> "Suffixes":
        """The same numbering, for one recognizer to extend on its own."""
        c = Suffixes()
        c.ids, c.cons, c.ends = dict(self.ids), dict(self.cons), dict(self.ends)
        c.lhs, c.head, c.rest, c.tag = list(self.lhs), list(self.head), list(self.rest), list(self.tag)
        return c

    def _new(self, lhs: int, head: int | None, rest: int, tag: int) -> int:
        k = len(self.lhs)
        self.lhs.append(lhs)
        self.head.append(head)
        self.rest.append(rest)
        self.tag.append(tag)
        return k


class _Productions:
    """What every recognizer of one compiled grammar starts from: the suffixes of its
    productions numbered in production order (``suffixes``, copied by each recognizer, which
    numbers more as Leo's collapse asks), ``first[p]`` (production p's whole right-hand side),
    ``predict[a]`` (a's productions' ``first``) and ``predicted[a]`` (the items predicting a
    adds, as the agenda takes them: last first). Built once per compiled grammar
    (``_PRODUCTIONS``): the judge's engine checks and the language check each make
    recognizers of one input, 0.3 s each at 130,000 productions; a copy is the same
    numbering, so every recognizer's items and answers are those it would have built."""

    def __init__(self, g: Compiled, by_production: bool):
        self.suffixes = Suffixes()
        self.first = tuple(self.suffixes.id(g.lhs[p], r, p if by_production else -1) for p, r in enumerate(g.rhs))
        self.predict = tuple(tuple(self.first[p] for p in ps) for ps in g.by_lhs)
        self.predicted = tuple(tuple((q, None) for q in reversed(ps)) for ps in self.predict)


_PRODUCTIONS = {False: IdentityMemo(4, key=id), True: IdentityMemo(2, key=id)}
"""``_Productions`` of the last few compiled grammars (``Compiled`` is frozen; an entry holds
its grammar, so the identity is not reused while it lives; emptied between a batch's items)."""


class State:
    """One Earley set without its completed items. ``items`` (frozenset of
    ``(suffix, origin)``), ``waiting[B]`` the items with nonterminal B after the dot,
    ``scans`` the items with a terminal after the dot as ``(terminal, suffix, origin)``,
    ``leo[A]`` the collapse target ``(X, origin)`` for items ``A → • B`` from this set.
    Never mutated after construction, except for the memo ``_next``."""

    __slots__ = ("items", "waiting", "scans", "accepting", "next_symbols", "leo", "_next")

    def __init__(self, items: frozenset, waiting: dict, scans: tuple, accepting: bool,
                 next_symbols: frozenset[int], leo: dict):
        self.items = items
        self.waiting = waiting
        self.scans = scans
        self.accepting = accepting
        self.next_symbols = next_symbols
        self.leo = leo
        self._next: dict[int, State | None] = {}

    @property
    def viable(self) -> bool:
        return bool(self.items) or self.accepting

    def __repr__(self) -> str:
        return f"<State {len(self.items)} items{' accepting' if self.accepting else ''}>"


class Recognizer:
    """Earley recognizer of ``grammar`` (see the module docstring). For a Lark grammar the
    input is a sequence of atom ids, ``atoms[i]`` being atom i; pass ``atoms`` to extend a
    shared table (two grammars compared symbol by symbol); ``letters`` are a byte grammar's
    abstracted sub-languages (``symbols.compile_grammar``). ``by_production=True`` keeps the
    items of different productions apart (``Suffixes.tag``; use with ``leo=False``), for
    telling which productions an input went through (``coverage.productions_exercised``)."""

    def __init__(self, grammar: Grammar | Compiled, atoms: tuple | None = None, leo: bool = True,
                 budget: WorkBudget | None = None, by_production: bool = False, letters: tuple = ()):
        self.budget = budget if budget is not None else WorkBudget(None)
        self.g = grammar if isinstance(grammar, Compiled) else compile_grammar(grammar, atoms, letters)
        self.atoms = self.g.atoms
        self.alphabet = self.g.alphabet
        self.leo = leo
        self.class_of, _ = symbol_classes(self.alphabet, self.g.terms)
        made = _PRODUCTIONS[by_production].get(self.g, lambda g: _Productions(g, by_production))
        self.suffixes = made.suffixes.copy()
        self.first, self.predict, self._predicted = made.first, made.predict, made.predicted
        self._interned: dict[tuple, State] = {}
        self._symbols: dict[frozenset, frozenset] = {}  # terminal ids -> their symbols (``_symbols_of``)
        self._initial = self._close(((self.first[0], None),) if self.g.by_lhs[0] else ())

    # ------------------------------------------------------------ incremental
    def initial(self) -> State:
        """The set before any input; ``initial().viable`` is False for the empty language."""
        return self._initial

    def advance(self, state: State, x: int) -> State | None:
        """The set after reading symbol ``x``, or None when the prefix dies."""
        if not 0 <= x < self.alphabet:
            return None
        c = self.class_of[x]
        memo = state._next
        if c not in memo:
            terms, rest = self.g.terms, self.suffixes.rest
            kernel = tuple(self._item(rest[k], state if o is None else o)
                           for t, k, o in state.scans if x in terms[t])
            memo[c] = self._close(kernel) if kernel else None
        return memo[c]
    def state_accepts(self, state: State | None) -> bool:
        return state is not None and state.accepting

    def state_next_bytes(self, state: State | None) -> frozenset[int]:
        """Symbols x such that advancing by x keeps a viable prefix."""
        return frozenset() if state is None else state.next_symbols

    state_next_symbols = state_next_bytes

    def run(self, data: Iterable[int], start: State | None = None) -> State | None:
        """The set after ``data`` (read from ``start``, default the initial set), or None
        once dead. ``advance`` step by step, its memo read here first (the sets met
        before are most steps of a long input)."""
        s: State | None = self._initial if start is None else start
        if not s.viable:
            return None
        class_of, alphabet, unknown = self.class_of, self.alphabet, _UNKNOWN
        for x in data:
            if not 0 <= x < alphabet:
                return None
            nxt = s._next.get(class_of[x], unknown)
            s = self.advance(s, x) if nxt is unknown else nxt
            if s is None:
                return None
        return s

    # ------------------------------------------------------------ whole inputs
    def accepts(self, data: bytes | Sequence[int]) -> bool:
        return self.state_accepts(self.run(data))

    def is_viable_prefix(self, data: bytes | Sequence[int]) -> bool:
        return self.run(data) is not None

    def next_bytes(self, data: bytes | Sequence[int]) -> frozenset[int]:
        return self.state_next_bytes(self.run(data))

    next_symbols = next_bytes

    @property
    def states_built(self) -> int:
        return len(self._interned)

    def release(self) -> None:
        """Forget the sets built so far (the recognizer stays usable and builds them again):
        a set's memo names later sets, whose items name it as their origin, so the sets form
        cycles that only the cyclic collector would free; cut here, they are freed as soon
        as nothing else holds them."""
        for state in self._interned.values():
            state._next = {}
        self._interned = {self._interned_key(self._initial): self._initial}
        self._symbols = {}

    def trim(self) -> None:
        """``release`` once more than ``KEPT_SETS`` sets are kept: called between the inputs
        of a long check, it bounds the memory by a count of sets (work units, the same on
        any machine) and changes no answer (a released recognizer builds its sets again;
        states already handed out stay valid)."""
        if len(self._interned) > KEPT_SETS:
            self.release()

    @staticmethod
    def _interned_key(state: State) -> tuple:
        return (state.items, state.accepting)

    # ------------------------------------------------------------ one Earley set
    def _close(self, kernel: Iterable[Item]) -> State:
        """The Earley set generated by ``kernel`` (scanned items; origins are earlier sets):
        predict, complete, and Aycock–Horspool nullable skip, to a fixpoint."""
        sf, nullable, predicted = self.suffixes, self.g.nullable, self._predicted
        lhs, head, rest = sf.lhs, sf.head, sf.rest
        items: dict[Item, None] = {}
        done: set[Item] = set()
        waiting: dict[int, list[Item]] = {}
        scans: list[tuple] = []
        accepting = False
        agenda = list(kernel)
        agenda.reverse()
        budget, work = self.budget, 0
        push, leo, sid = agenda.append, self.leo, sf.id
        while agenda:
            item = agenda.pop()
            work += 1
            if work == _SPEND_EVERY:  # a single set can take millions of steps (ambiguity)
                budget.spend(work)
                work = 0
            if item in items or item in done:
                continue
            k, o = item
            s = head[k]
            if s is None:  # complete lhs[k] over [origin, here]
                done.add(item)
                a = lhs[k]
                if a == 0:
                    accepting = True
                # an ε-completion here (o None): A-H already advanced later waiters. Each
                # waiter moves past a, as ``_item(rest[q], origin)`` (Leo's collapse inlined)
                for q, o2 in (waiting.get(a, ()) if o is None else o.waiting.get(a, ())):
                    q = rest[q]
                    if o2 is None:
                        o2 = o
                    if leo and o2 is not None:
                        r = rest[q]
                        if r >= 0 and head[r] is None:
                            target = o2.leo.get(lhs[q])
                            if target is not None:
                                push((sid(target[0], (head[q],)), target[1]))
                                continue
                    push((q, o2))
                continue
            items[item] = None
            if s < 0:
                scans.append((~s, k, o))
                continue
            if s not in waiting:
                waiting[s] = []
                agenda.extend(predicted[s])
            waiting[s].append(item)
            if nullable[s]:
                agenda.append(self._item(rest[k], o))
        budget.spend(work)
        key = (frozenset(items), accepting)
        state = self._interned.get(key)
        if state is None:
            nxt = self._symbols_of(frozenset(sc[0] for sc in scans))
            waiting_t = {a: tuple(w) for a, w in waiting.items()}
            state = State(key[0], waiting_t, tuple(scans), accepting, nxt, {})
            state.leo.update(self._leo_targets(state))
            self._interned[key] = state
        return state

    def _symbols_of(self, terminals: frozenset) -> frozenset[int]:
        """The symbols of ``terminals`` (terminal ids): a set's ``next_symbols``, one object per
        distinct set of terminals. Sets share them (a JSON value's first bytes, a string's
        next ones): made per set they were 40% of a large check's memory (WashingtonPost
        wp_26: 111 of 262 MB, a frozenset of up to 256 symbols each)."""
        found = self._symbols.get(terminals)
        if found is None:
            terms = self.g.terms
            found = self._symbols[terminals] = frozenset().union(*(terms[t] for t in terminals))
        return found

    def _item(self, k: int, o: State | None) -> Item:
        """Item ``(k, o)`` after Leo's collapse (module docstring), when enabled."""
        if self.leo and o is not None:
            sf = self.suffixes
            r = sf.rest[k]
            if r >= 0 and sf.head[r] is None and sf.lhs[k] in o.leo:
                x, o2 = o.leo[sf.lhs[k]]
                return sf.id(x, (sf.head[k],)), o2
        return k, o

    def _leo_targets(self, state: State) -> dict[int, tuple[int, State]]:
        """A ↦ (X, o'): the single item waiting on A in ``state`` is ``X → • A`` from an
        earlier set o' (followed through o' transitively; origins strictly decrease, so
        a chain is finite)."""
        sf = self.suffixes
        out = {}
        for a, w in state.waiting.items():
            if len(w) == 1:
                q, o2 = w[0]
                if o2 is not None and sf.head[sf.rest[q]] is None:
                    x = sf.lhs[q]
                    out[a] = o2.leo.get(x, (x, o2))
        return out
