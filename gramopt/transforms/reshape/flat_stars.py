"""Repetitions written flat: ``(c | "\\" e)*`` with ``e ::= a | b`` as ``(c | "\\" a | "\\" b)*``;
and a rule of one wide character written flat where it is used outside a repetition
(``flatten_character_rules``: a JSON string's ``char{5,150}`` as a converter writes it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import product
from typing import Callable

from ...costmodels.engine_shapes import flat_atom, flat_body, one_character, one_character_rules, wide_class
from ...grammar import Alt, CharClass, Epsilon, Expr, Grammar, Ref, Repeat, Rule, Seq, alt, refs, seq, transform, walk
from ...grammar.analysis import lexical_rules, reference_counts
from ..fixpoint import fixpoint

MAX_ALTERNATIVES = 16  # alternatives of a flattened repetition body (JSON's string: 3)
MAX_LEAF = 32          # expression nodes of a leaf rule read through (JSON's escape: 9)
# references to one character rule written flat at most: each flat copy of a wide character
# is a position whose token masks xgrammar 0.2.8 precomputes over the vocabulary, ~45 ms of
# compile a copy with Qwen's (a 64 / 256 / 1,024-character maxLength chain: 2.7 / 12.0 /
# 55.8 s, against 0.01-0.02 s with the reference; o6213's 33,025 references took the judge's
# compile of its candidate past 25 CPU minutes and 18 GB): a character rule with more stays a rule
MAX_FLAT_REFERENCES = 128


def flatten_repetition_bodies(g: Grammar) -> tuple[Grammar, list[str]]:
    """An unbounded repetition (``x*``, ``x+``) whose body holds a reference to a leaf rule
    or a group inside a sequence, and one iteration of which may be a single character of a
    wide class (``costmodels.engine_shapes.lowered_stars``), is written with a flat body: an
    alternation of sequences of literals, classes and repetitions of one literal or class,
    the alternatives that are one wide class written last. Not in the start rule. Returns the
    grammar and the rules rewritten. A leaf rule with no reference left is dropped.

    Argument: a leaf rule (no reference in its body but to leaf rules, ``_readable``) is not
    recursive, so its body may stand for a reference to it; concatenation distributes over union (x·(a ∪ b)·y = x·a·y ∪ x·b·y),
    and a union of the same sequences in any grouping and any order is the same set. So the
    body's language, and the repetition's, is unchanged. Only bodies that flatten within
    ``MAX_ALTERNATIVES`` with no empty alternative are rewritten (an empty alternative under
    a star is an ambiguity the grammar did not have); a rule with an assertion, an engine
    macro (``Rule.pinned``), the start, and rules an assertion or directive names are never
    read through, and nothing is rewritten inside a pinned rule or the start.

    Why (``benchmarks/results/flat-stars-2026-11-28``, ``benchmarks/star_forms.py``): xgrammar
    0.2.8 keeps a repetition with a flat body in its automaton, but lowers one whose body holds
    a rule reference or a nested group into helper rules whose end is inside nearly every
    token. A JSON string ``"\\"" ([^"\\\\] | "\\\\" e)* "\\""`` then costs ~62 ms a Qwen mask inside
    the string, flat 0.18 ms (xgrammar's own right recursion 0.05 ms); llguidance decides every
    star alike (0.01 ms). llama.cpp tries the alternatives in order: llama.cpp's json.gbnf
    string flat with its class first took 41 ms a mask, with it last 31 ms, as written (a
    nested group) 36 ms. The default target wrote the star of a reference for 65 of 220
    JSONSchemaBench schemas, and llama.cpp's converter writes ``char*`` for every string. Not
    where an iteration is longer: ``s ::= item+`` with ``item ::= "- " [a-z]+ "\\n"`` costs
    xgrammar 0.01 ms a mask, flat 0.28 ms (and inlining it into the start made llguidance 250×
    slower, ``targets.PORTABLE``); nor over a narrow class (``digit*``), which costs xgrammar
    little: outputs stay as they were there."""
    pinned, ones, leaves = _readable(g)

    def flat(e: Expr) -> Expr:
        if not isinstance(e, Repeat) or e.max is not None or flat_body(e.item) \
                or not one_character(e.item, ones):
            return e
        alts = _alternatives(e.item, leaves)
        if alts is None or any(not a for a in alts) or (len(alts) == 1 and len(alts[0]) == 1
                                                       and isinstance(alts[0][0], Repeat)):
            return e  # not flat within the bound, an empty alternative, or a repetition of a repetition
        return type(e)(_written_flat(alts), e.min, e.max)

    return _rewritten(g, lambda r: r.body if r.pinned or r.name == g.start else transform(r.body, flat),
                      pinned, leaves)


def flatten_character_rules(g: Grammar, lexical_users_only: bool = False) -> tuple[Grammar, list[str]]:
    """Every reference to a *character rule* outside an unbounded repetition is replaced by
    the rule's body written flat: an alternation of sequences of literals and classes, the
    alternatives that are one wide class last. A character rule is a leaf rule (no reference
    in its body; not the start, not pinned, named by no assertion or directive, at most
    ``MAX_LEAF`` nodes) that may derive one character of a wide class (``engine_shapes.
    one_character``), is no literal or class itself (``cjk ::= [一-鿿]``, xgrammar's
    ``chars ::= [^"\\\\]`` in ``chars{4,30}``: no helper rule, nothing to gain) and flattens within
    ``MAX_ALTERNATIVES`` with no empty alternative:
    ``char ::= [^"\\] | "\\" (["/bfnrt] | "u" hex hex hex hex)``; one with more than
    ``MAX_FLAT_REFERENCES`` references stays a rule (xgrammar's compile grows by a wide
    position per copy). A character rule no longer
    referenced is dropped. ``lexical_users_only``: only in rules llguidance reads as one
    lexeme (``grammar.analysis.lexical_rules``), so that its lexemes stay what they were.
    Returns the grammar and the rules rewritten. Rounds to a fixpoint (a rule whose only
    reference was to a character rule may become one: ``s ::= char``). Repetitions are
    ``flatten_repetition_bodies``' (run before this): nothing inside an unbounded one is
    touched here, so its outputs stay.

    Argument: as ``flatten_repetition_bodies``': a leaf rule is not recursive, so its body may
    stand for a reference to it (substitution), and its flat form is the same union of the
    same sequences (distributivity of concatenation over union, commutativity of union).

    Why (``benchmarks/results/flat-chars-2026-11-28``): llama.cpp's converter writes a string
    with ``maxLength`` as ``"\\"" char char … (char (char …)?)? "\\""``; xgrammar 0.2.8 lowers
    each ``char`` (a reference, or its body as a nested group) into a helper rule whose end is
    inside nearly every token: 68 ms a Qwen mask inside the string (JSONSchemaBench
    Github_easy---o21459), against 0.12 ms with ``char`` written flat in place; llama.cpp
    29 ms against 36 ms with the wide class last; llguidance the same (one lexeme either way)."""
    done: list[str] = []

    def round_(h: Grammar) -> Grammar:
        h, names = _flat_characters_once(h, lexical_users_only)
        done.extend(n for n in names if n not in done)
        return h
    out = fixpoint(round_, g, len(g.rules) + 1)  # each changing round removes a reference
    return (out, done) if done else (g, [])


def _flat_characters_once(g: Grammar, lexical_users_only: bool) -> tuple[Grammar, list[str]]:
    """One round of ``flatten_character_rules``."""
    pinned, ones, leaves = _readable(g)
    uses = reference_counts(g)
    flat: dict[str, Expr] = {}
    for name, body in leaves.items():
        alts = _alternatives(body, leaves) if name in ones and not flat_atom(body) else None
        if alts is None or any(not a for a in alts) or not any(_wide_class(a) for a in alts):
            continue
        if uses[name] > MAX_FLAT_REFERENCES:
            continue
        flat[name] = _written_flat(alts)
    if not flat:
        return g, []
    users = lexical_rules(g) if lexical_users_only else None

    def written(e: Expr) -> Expr:
        if isinstance(e, Ref):
            return flat.get(e.name, e)
        if isinstance(e, Repeat) and e.max is None:
            return e  # a repetition's body is flatten_repetition_bodies' to write
        if isinstance(e, (Seq, Alt)):
            new = [written(x) for x in e.items]
            same = all(a is b for a, b in zip(new, e.items))
            return e if same else (seq if isinstance(e, Seq) else alt)(*new)
        if isinstance(e, Repeat):
            item = written(e.item)
            return e if item is e.item else type(e)(item, e.min, e.max)
        return e

    # the start may use one (the inliner moved a one-property schema's string into it: o13272)
    skip = lambda r: r.pinned or r.name in flat or (users is not None and r.name not in users)
    return _rewritten(g, lambda r: r.body if skip(r) else written(r.body), pinned, flat)


def _rewritten(g: Grammar, body: Callable[[Rule], Expr], pinned: set, read: dict) -> tuple[Grammar, list[str]]:
    """(``g`` with each rule's body as ``body`` gives it, without the rules of ``read`` that
    were referenced and no longer are; the rules rewritten), or (g, []) when none is."""
    done, bodies = [], {}
    for r in g.rules:
        bodies[r.name] = b = body(r)
        if b != r.body:
            done.append(r.name)
    if not done:
        return g, []
    referenced = {n for r in g.rules for n in refs(r.body)}
    gone: set[str] = set()
    while True:  # a leaf read through may be the only user of another (character -> escape)
        used = {n for k, b in bodies.items() if k not in gone for n in refs(b)} | pinned | {g.start}
        more = {n for n in read if n not in used and n in referenced} - gone
        if not more:
            break
        gone |= more
    return g.replace_rules(replace(r, body=bodies[r.name]) for r in g.rules if r.name not in gone), done


def _readable(g: Grammar) -> tuple[set, frozenset, dict[str, Expr]]:
    """(the rules an assertion or directive names, the rules that may derive one wide
    character, the leaf rules that may be read through: not the start, not pinned or named,
    each reference in the body to a leaf rule, at most ``MAX_LEAF`` nodes with the leaves it
    references read through). A leaf is so not recursive: a rule is taken once every rule it
    references is (Kahn's order over the reference graph, linear in the grammar), e.g.
    ``character ::= [^"\\] | "\\" escape`` with ``escape`` a leaf, as a hand-written JSON
    grammar names them."""
    pinned = {n for r in g.rules if r.lookahead is not None for n in refs(r.lookahead)}
    pinned.update(a for d in g.directives for a in d.args)
    todo: dict[str, tuple[Expr, Counter]] = {}
    for r in g.rules:
        if r.name != g.start and r.name not in pinned and not r.pinned:
            todo[r.name] = (r.body, Counter(x.name for x in walk(r.body) if isinstance(x, Ref)))
    waiting = {n: len(uses) for n, (_, uses) in todo.items()}
    users: dict[str, list[str]] = {}
    for n, (_, uses) in todo.items():
        for x in uses:
            users.setdefault(x, []).append(n)
    ready = [n for n, k in waiting.items() if k == 0]
    size: dict[str, int] = {}
    while ready:
        n = ready.pop()
        body, uses = todo[n]
        total = sum(1 for _ in walk(body)) + sum(k * (size[x] - 1) for x, k in uses.items())
        if total > MAX_LEAF:
            continue  # not a leaf: neither is a rule that references it
        size[n] = total
        for u in users.get(n, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    leaves = {r.name: r.body for r in g.rules if r.name in size}
    return pinned, one_character_rules(g.bodies()), leaves


def _written_flat(alts: list[tuple[Expr, ...]]) -> Expr:
    """The alternation of ``alts``, those that are one wide class last (a stable sort: llama.cpp
    tries the alternatives in order, the narrow ones first is faster there)."""
    return alt(*(seq(*a) for a in sorted(alts, key=_wide_class)))


def _wide_class(alternative: tuple[Expr, ...]) -> bool:
    """Whether an alternative is one wide class (``engine_shapes.wide_class``)."""
    return len(alternative) == 1 and isinstance(alternative[0], CharClass) and wide_class(alternative[0])


def _alternatives(e: Expr, leaves: dict[str, Expr]) -> list[tuple[Expr, ...]] | None:
    """``e``'s language as a union of sequences of atoms (leaf references read through), or
    None when it has another node or more than ``MAX_ALTERNATIVES`` of them."""
    if isinstance(e, Ref):
        return _alternatives(leaves[e.name], leaves) if e.name in leaves else None
    if flat_atom(e):
        return [(e,)]
    if isinstance(e, Epsilon):
        return [()]
    if isinstance(e, Alt):
        out: list[tuple[Expr, ...]] = []
        for x in e.items:
            sub = _alternatives(x, leaves)
            if sub is None or len(out) + len(sub) > MAX_ALTERNATIVES:
                return None
            out.extend(sub)
        return out
    if isinstance(e, Seq):
        out = [()]
        for x in e.items:
            sub = _alternatives(x, leaves)
            if sub is None or len(out) * len(sub) > MAX_ALTERNATIVES:
                return None
            out = [a + b for a, b in product(out, sub)]
        return out
    return None


__all__ = ["flatten_character_rules", "flatten_repetition_bodies"]
