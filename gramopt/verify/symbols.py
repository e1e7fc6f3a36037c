"""A grammar compiled to integer symbols: the one form every check in ``verify`` reads.

    compile_grammar(grammar, atoms=None) -> Compiled

The alphabet is either the 256 bytes (GBNF / xgrammar EBNF: languages of UTF-8 byte
strings) or, for a Lark grammar, an integer per distinct lexer atom (``Terminal``,
``Regex``, ``Literal`` token, ``CharClass`` range) — a Lark language is over its terminals, so a check never
looks inside one. Pass ``atoms`` to share one atom table between two grammars. A byte
grammar may also hold ``letters``: ``Terminal`` atoms standing for whole sub-languages
(``letters.abstract``: a large repetition checked as one symbol), numbered 256, 257, …;
its alphabet is then the bytes and the letters, and ``atoms`` lists both (inputs are
tuples).

Construction, from the canonical BNF (``gramopt.grammar.lower``):

  * nonterminal 0 is an augmented start ``S'`` with the single production 0: ``S' → S``;
  * a ``CharClass`` whose UTF-8 encodings are all one byte becomes one terminal (a byte
    set); otherwise it becomes a helper nonterminal with one production per byte-range
    sequence of ``utf8.class_sequences`` (surrogates excluded), each range a terminal;
  * then unproductive and unreachable productions are pruned (language-preserving).

Invariant after pruning: every nonterminal left is reachable from ``S'`` and derives some
finite string, so an Earley item over this grammar always lies on a path to a sentence —
"Earley set non-empty" ⇔ "viable prefix", and the symbols after the dots of the current
set are exactly the symbols that extend the prefix viably.

Symbols on a right-hand side: ``s >= 0`` is nonterminal ``s``; ``s < 0`` is terminal
``~s`` (``terms[~s]`` its set of alphabet symbols).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..grammar import CharClass, Grammar, Literal, lower
from ..grammar.memo import IdentityMemo
from ..grammar.expr import Ref, Regex, Terminal
from ..grammar.utf8 import class_sequences
from ..grammar.dialects import token_atoms

BYTES = 256
# a Lark grammar's lexer atoms: a range ``"0".."9"`` in a rule is an anonymous token too
LARK_ATOMS = (Terminal, Regex, Literal, CharClass)


@dataclass(frozen=True)
class Compiled:
    """Integer BNF. ``atoms`` is None for byte grammars, else the atom table (index = symbol)."""

    alphabet: int
    atoms: tuple | None
    names: tuple[str, ...]
    lhs: tuple[int, ...]
    rhs: tuple[tuple[int, ...], ...]
    terms: tuple[frozenset[int], ...]
    by_lhs: tuple[tuple[int, ...], ...]
    nullable: tuple[bool, ...]

    @property
    def empty(self) -> bool:
        """The language is empty (the start rule derives no finite string)."""
        return not self.by_lhs[0]


def is_lark(grammar: Grammar) -> bool:
    return token_atoms(grammar.dialect)


def grammar_atoms(grammar: Grammar) -> tuple:
    """The distinct lexer atoms of a Lark grammar's canonical BNF, in order of appearance."""
    seen: dict = {}
    for p in lower(grammar).productions:
        for s in p.rhs:
            if isinstance(s, LARK_ATOMS):
                seen.setdefault(s, None)
    return tuple(seen)


_COMPILED = IdentityMemo(4)  # compile_grammar(g) without atoms or letters, per grammar


def compile_grammar(grammar: Grammar, atoms: tuple | None = None, letters: tuple = ()) -> Compiled:
    """The pruned integer BNF of ``grammar`` (see the module docstring). Without ``atoms``
    or ``letters``, remembered for the last few grammars (the same objects: ``grammar.memo``;
    ``Compiled`` is frozen): the judge's engines, their trajectories and the language check
    compile one input several times, seconds each on 10,000 rules."""
    if atoms is None and not letters:
        return _COMPILED.get(grammar, _compile)
    return _compile(grammar, atoms, letters)


def _compile(grammar: Grammar, atoms: tuple | None = None, letters: tuple = ()) -> Compiled:
    bnf = lower(grammar)
    lark = is_lark(grammar)
    letter_id = {t: BYTES + i for i, t in enumerate(letters)}
    if lark:
        table = list(atoms or ())
        for a in grammar_atoms(grammar):
            if a not in table:
                table.append(a)
        atom_id = {a: i for i, a in enumerate(table)}
    names: list[str] = ["S'"]
    nt_id: dict[str, int] = {}
    term_id: dict[frozenset[int], int] = {}
    prods: list[tuple[int, tuple[int, ...]]] = []
    helpers: dict[tuple, int] = {}

    def nonterminal(name: str) -> int:
        if name not in nt_id:
            nt_id[name] = len(names)
            names.append(name)
        return nt_id[name]

    def terminal(symbols: frozenset[int]) -> int:
        if symbols not in term_id:
            term_id[symbols] = len(term_id)
        return ~term_id[symbols]

    def char_class(cc: CharClass) -> int:
        ranges = cc.code_points()
        if ranges in helpers:
            return helpers[ranges]
        seqs = class_sequences(ranges)
        if all(len(s) == 1 for s in seqs):
            sym = terminal(frozenset(b for (r,) in seqs for b in range(r[0], r[1] + 1)))
        else:
            sym = len(names)  # a helper: never looked up by name, so it cannot clash
            names.append(f"<{_ranges_text(ranges)}>")
            for s in seqs:
                prods.append((sym, tuple(terminal(frozenset(range(lo, hi + 1))) for lo, hi in s)))
        helpers[ranges] = sym
        return sym

    for n in bnf.nonterminals:
        nonterminal(n)
    prods.append((0, (nonterminal(bnf.start),)))
    for p in bnf.productions:
        out = []
        for s in p.rhs:
            if isinstance(s, Ref):
                out.append(nonterminal(s.name))
            elif isinstance(s, CharClass) and not lark:
                out.append(char_class(s))
            elif lark and isinstance(s, LARK_ATOMS):
                out.append(terminal(frozenset((atom_id[s],))))
            elif s in letter_id and not lark:
                out.append(terminal(frozenset((letter_id[s],))))
            else:
                raise TypeError(f"verify: symbol {s!r} in a {grammar.dialect} grammar")
        prods.append((nt_id[p.lhs], tuple(out)))

    terms = [frozenset()] * len(term_id)
    for symbols, i in term_id.items():
        terms[i] = symbols
    prods = _prune(prods, len(names), terms)
    by_lhs: list[list[int]] = [[] for _ in names]
    for i, (a, _) in enumerate(prods):
        by_lhs[a].append(i)
    return Compiled(
        alphabet=len(table) if lark else BYTES + len(letters),
        atoms=tuple(table) if lark else (tuple(range(BYTES)) + tuple(letters) if letters else None),
        names=tuple(names),
        lhs=tuple(a for a, _ in prods),
        rhs=tuple(r for _, r in prods),
        terms=tuple(terms),
        by_lhs=tuple(tuple(x) for x in by_lhs),
        nullable=_nullable(prods, len(names)),
    )


def _horn(prods, n: int, needs) -> tuple[list[bool], list[int]]:
    """The least set of marked nonterminals closed under: A is marked when a production
    A → r has every nonterminal of ``needs(r)`` marked (``needs`` returns None for a
    production that never fires). A worklist: each production is counted down once per
    nonterminal it needs, each nonterminal expanded once — linear in the grammar. Returns
    (marked, per production the needs still missing: 0 when it fired, -1 when it never can)."""
    marked = [False] * n
    missing: list[int] = []
    waiting: list[list[int]] = [[] for _ in range(n)]  # nonterminal -> productions counting on it
    todo: list[int] = []
    for p, (a, r) in enumerate(prods):
        need = needs(r)
        if need is None:
            missing.append(-1)
            continue
        missing.append(len(need))
        for s in need:
            waiting[s].append(p)
        if not need and not marked[a]:
            marked[a] = True
            todo.append(a)
    while todo:
        s = todo.pop()
        for p in waiting[s]:
            missing[p] -= 1
            if missing[p] == 0:
                a = prods[p][0]
                if not marked[a]:
                    marked[a] = True
                    todo.append(a)
    return marked, missing


def _prune(prods, n: int, terms) -> list[tuple[int, tuple[int, ...]]]:
    """Keep productions whose symbols are all productive (``_horn``: an empty terminal never
    is), then those reachable from 0 (a worklist). Production 0 (S' → S) stays first when it
    survives. Linear in the grammar, not in its size times its depth."""
    _, missing = _horn(prods, n, lambda r: None if not all(s >= 0 or terms[~s] for s in r)
                       else [s for s in r if s >= 0])
    prods = [(a, r) for p, (a, r) in enumerate(prods) if missing[p] == 0]
    by_lhs: list[list[int]] = [[] for _ in range(n)]
    for p, (a, _) in enumerate(prods):
        by_lhs[a].append(p)
    reach = [False] * n
    reach[0] = True
    todo = [0]
    while todo:
        a = todo.pop()
        for p in by_lhs[a]:
            for s in prods[p][1]:
                if s >= 0 and not reach[s]:
                    reach[s] = True
                    todo.append(s)
    return [(a, r) for a, r in prods if reach[a]]


def _nullable(prods, n: int) -> tuple[bool, ...]:
    """Nullable nonterminals (``_horn`` over the productions made only of nonterminals)."""
    return tuple(_horn(prods, n, lambda r: None if any(s < 0 for s in r) else list(r))[0])


# ---------------------------------------------------------------- alphabet classes


def symbol_classes(alphabet: int, term_sets) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Partition ``range(alphabet)`` into classes of symbols that every set in ``term_sets``
    treats alike. Returns ``(class_of, members)``: ``class_of[x]`` is x's class, and
    ``members[c]`` the sorted symbols of class c; classes are numbered by their least
    symbol. Two symbols of one class drive any recognizer over those sets identically."""
    sigs: list[list[int]] = [[] for _ in range(alphabet)]
    for i, t in enumerate(dict.fromkeys(term_sets)):
        for x in t:
            if x < alphabet:
                sigs[x].append(i)
    ids: dict[tuple[int, ...], int] = {}
    class_of = []
    members: list[list[int]] = []
    for x in range(alphabet):
        key = tuple(sigs[x])
        if key not in ids:
            ids[key] = len(members)
            members.append([])
        class_of.append(ids[key])
        members[ids[key]].append(x)
    return tuple(class_of), tuple(tuple(m) for m in members)


# ---------------------------------------------------------------- printing


def _ranges_text(ranges) -> str:
    return "".join(f"{lo:X}" if lo == hi else f"{lo:X}-{hi:X}" for lo, hi in ranges[:4]) + \
        ("…" if len(ranges) > 4 else "")


def atom_text(atom) -> str:
    if isinstance(atom, Terminal):
        return atom.name
    if isinstance(atom, Regex):
        return f"/{atom.pattern}/{atom.flags}"
    if isinstance(atom, Literal):
        return repr(atom.text)
    return repr(atom)
