"""Large repetitions checked as letters, not expanded (Bekić's lemma).

    abstract(original, candidate) -> Abstraction | None
    concrete_text(abstraction, data) -> bytes | None

``x{4,32767}`` lowers to 32,767 copies of x and 32,763 helper rules; every check then reads
sets along all of them (a one-property ``maxLength`` schema took gigabytes and minutes).
When both grammars hold a repetition ``R = x{m,n}`` (n or m above ``LARGE``) — the same
node, or the same key (R with the non-recursive rules x names unfolded: an inlining leaves
it) — each occurrence of R is replaced, in both, by a fresh letter ``r`` (a ``Terminal`` outside
the byte alphabet: ``symbols.compile_grammar(letters=…)``), and the two abstracted grammars
G♯, G'♯ are compared instead — over a combined start rule

    ⟨check⟩ ::= S | t1 ⟨item1⟩ | t2 ⟨item2⟩ | …       ⟨itemi⟩ ::= xi♯

with fresh tag letters ti, one per repetition whose item names rules (whose meaning the
two grammars could give differently). L(⟨check⟩) is the disjoint union of L(S♯) and the
tagged ti·L(xi♯), so the two are equal exactly when L(S♯) and every L(xi♯) are.

Argument. Split each grammar's equations into the block of R's (Ri = xi{mi,ni}) and the
block of everything else, where Ri occurs as the letter ri. Bekić's lemma: the least
solution of the whole system is obtained by solving the second block with the ri as
parameters, which (substitution commutes with least solutions of context-free systems)
gives σ(L(A♯)) for every nonterminal A, σ(ri) = L(Ri); then Ri is the least solution of
Ri = σ(L(xi♯)){mi,ni}. If L(S♯) and every L(xi♯) are equal in both grammars (a pair with
one key that names no rule has one language in both), both systems have the same
equations for the Ri, hence the same least solutions, hence equal σ and L(S) = σ(L(S♯)) =
L(S'). So a check of the abstraction has the strength of the same check of the grammars
(and is exact when it says so). The converse does not hold: a difference between the
abstractions may be none in the grammars (a candidate that folded ``x`` into ``x{4,32767}``
has another repetition node), so a counterexample is spelled back (``concrete_text``: each
letter by a shortest string of its repetition) and re-judged on the grammars themselves;
when that does not confirm it, the caller checks the grammars as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..grammar import Grammar
from ..grammar.dialects import token_atoms
from ..grammar.expr import Alt, Expr, Ref, Repeat, Seq, Terminal, alt, seq, walk
from ..grammar.grammar import Rule
from .coverage import shortest, spell_yield
from .symbols import BYTES, compile_grammar

LARGE = 16  # a repetition of more copies than this is checked as a letter when both grammars hold it
CHECK = "⟨check⟩"


@dataclass(frozen=True)
class Abstraction:
    """The two abstracted grammars (start ``⟨check⟩``), the letters (``letters[i]`` stands
    for ``repeats[i]``, then the tags), and which repetition each tag's item is."""

    original: Grammar
    candidate: Grammar
    repeats: tuple[Repeat, ...]
    letters: tuple[Terminal, ...]
    tagged: tuple[int, ...]  # tag j (letter len(repeats) + j) introduces the item of repeats[tagged[j]]


def copies(r: Repeat) -> int:
    """How many copies of its item the BNF lowering writes for ``r`` (about)."""
    return max(r.min, r.min + 1 if r.max is None else r.max)


def large_repeats(grammar: Grammar) -> dict[Repeat, Repeat]:
    """The repetitions of more than ``LARGE`` copies in the rule bodies, in order of
    appearance, each with its key: the repetition with the non-recursive rules its item
    names unfolded (``_unfolded``), so ``chars{4,32767}`` and the ``[^"]{4,32767}`` an
    inlining made of it meet."""
    bodies = {r.name: r.body for r in grammar.rules}
    out: dict[Repeat, Repeat] = {}
    for r in grammar.rules:
        for node in walk(r.body):
            if isinstance(node, Repeat) and copies(node) > LARGE and node not in out:
                out[node] = Repeat(_unfolded(node.item, bodies, [UNFOLD_NODES], ()), node.min, node.max)
    return out


UNFOLD_NODES = 2000  # nodes one key may unfold (a reference left folded past it)


def _unfolded(e: Expr, bodies: dict[str, Expr], left: list[int], path: tuple[str, ...]) -> Expr:
    """``e`` with references replaced by their rules' bodies, except a rule already being
    unfolded on this path (recursion) or once ``left[0]`` nodes are spent. Language-
    preserving in its grammar: a reference means its rule's body."""
    left[0] -= 1
    if isinstance(e, Ref):
        body = bodies.get(e.name)
        if body is None or e.name in path or left[0] <= 0:
            return e
        return _unfolded(body, bodies, left, path + (e.name,))
    if isinstance(e, Repeat):
        return Repeat(_unfolded(e.item, bodies, left, path), e.min, e.max)
    if isinstance(e, Seq):
        return seq(*(_unfolded(i, bodies, left, path) for i in e.items))
    if isinstance(e, Alt):
        return alt(*(_unfolded(i, bodies, left, path) for i in e.items))
    return e


def abstract(original: Grammar, candidate: Grammar) -> Abstraction | None:
    """The abstraction of both grammars over the large repetitions they share, or None when
    they share none (or are Lark grammars: atoms already). Within one grammar, repetitions
    with one key have one language (unfolding preserves it), so a key is one letter. A key
    of the original pairs with the candidate's same key, else with a key of the candidate
    that holds one of its repetition nodes as written (``Ref(items){0,9999}`` in both, the
    rules it names rewritten). A pair whose keys are equal and name no rule is one language
    in both; any other pair gets a tag, so its items are compared."""
    if token_atoms(original.dialect) or token_atoms(candidate.dialect):
        return None
    ours, theirs = large_repeats(original), large_repeats(candidate)
    their_keys = set(theirs.values())
    pairs: dict[Repeat, Repeat] = {}  # key of the original -> key of the candidate
    taken: set[Repeat] = set()
    for node, k in ours.items():
        if k in pairs:
            continue
        match = k if k in their_keys else theirs.get(node)
        if match is not None and match not in taken:
            pairs[k] = match
            taken.add(match)
    if not pairs:
        return None
    keys = list(pairs)
    letter_of = {k: Terminal(f"⟨r{i + 1}⟩") for i, k in enumerate(keys)}
    their_letter = {pairs[k]: letter_of[k] for k in keys}
    first: list[dict[Repeat, Repeat]] = [{}, {}]  # key -> the first repetition with it, per grammar
    for side, found in enumerate((ours, theirs)):
        for node, k in found.items():
            first[side].setdefault(k, node)
    tagged = tuple(i for i, k in enumerate(keys)
                   if pairs[k] != k or any(isinstance(n, Ref) for n in walk(k.item)))
    tags = tuple(Terminal(f"⟨t{j + 1}⟩") for j in range(len(tagged)))

    def abstracted(g: Grammar, found: dict[Repeat, Repeat], letters: dict, side: int) -> Grammar:
        letter = {node: letters[k] for node, k in found.items() if k in letters}
        rules = [Rule(r.name, _replaced(r.body, letter)) for r in g.rules]
        items = [Rule(f"⟨item{j + 1}⟩", _replaced(first[side][keys[i] if side == 0 else pairs[keys[i]]].item, letter))
                 for j, i in enumerate(tagged)]
        top = alt(Ref(g.start), *(seq(t, Ref(item.name)) for t, item in zip(tags, items)))
        return Grammar((Rule(CHECK, top), *rules, *items), CHECK, dialect=g.dialect)

    return Abstraction(abstracted(original, ours, letter_of, 0), abstracted(candidate, theirs, their_letter, 1),
                       tuple(first[0][k] for k in keys), tuple(letter_of.values()) + tags, tagged)


def _replaced(e: Expr, letter: dict[Repeat, Terminal]) -> Expr:
    """``e`` with each outermost occurrence of a repetition of ``letter`` replaced by its letter."""
    if isinstance(e, Repeat):
        hit = letter.get(e)
        if hit is not None:
            return hit
        return Repeat(_replaced(e.item, letter), e.min, e.max)
    if isinstance(e, Seq):
        return seq(*(_replaced(i, letter) for i in e.items))
    if isinstance(e, Alt):
        return alt(*(_replaced(i, letter) for i in e.items))
    return e


def concrete_text(ab: Abstraction, data: tuple[int, ...]) -> bytes | None:
    """``data`` (bytes and letters of the abstraction) with each repetition's letter spelled
    as a shortest string of that repetition in the original grammar; None when it holds a
    tag (a difference between items, which need not be one between the grammars)."""
    n = len(ab.repeats)
    memo: dict[int, tuple[int, ...]] = {}
    busy: set[int] = set()

    def spelled(i: int) -> tuple[int, ...]:
        """Shortest string of repeats[i], its letters spelled in turn (raises _Circular when
        the item's shortest abstract string needs the repetition itself)."""
        if i not in memo:
            r = ab.repeats[i]
            if r.min == 0:
                memo[i] = ()
                return memo[i]
            if i in busy:
                raise _Circular
            busy.add(i)
            item = Rule("⟨shortest⟩", _replaced(r.item, dict(zip(ab.repeats, ab.letters))))
            g = Grammar((item, *ab.original.rules), item.name, dialect=ab.original.dialect)
            cg = compile_grammar(g, letters=ab.letters)
            sh = shortest(cg)
            once = tuple(min(cg.terms[t]) for t in spell_yield(cg, sh, cg.rhs[0]))
            memo[i] = expand(once) * r.min
        return memo[i]

    def expand(symbols) -> tuple[int, ...]:
        out: list[int] = []
        for x in symbols:
            out.extend((x,) if x < BYTES else spelled(x - BYTES))
        return tuple(out)

    if any(x >= BYTES + n for x in data):
        return None
    try:
        return bytes(expand(data))
    except _Circular:
        return None


class _Circular(Exception):
    pass
