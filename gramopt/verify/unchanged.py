"""Verification proportional to what changed: rules whose whole reachable sub-grammar is
the same in both grammars are not re-proved.

    unchanged_rules(original, candidate) -> set[str]
    abstract_unchanged(original, candidate) -> Unchanged | None

A rule A is *unchanged* when A and every rule A reaches (through references, in either
grammar) are defined in both grammars with equal bodies. Claim: an unchanged A has the same
language in both grammars. Argument: the least fixpoint of a system of rule equations,
restricted to the rules A reaches, is the least fixpoint of those rules' own equations
(Bekić's lemma: they mention no other rule), and those equations are syntactically the
same in both grammars — so are their least solutions.

Abstraction. Each reference to an unchanged rule A from a changed rule is replaced, in
both grammars, by one fresh letter ``⟨same:A⟩`` (a ``Terminal`` outside the byte alphabet,
as in ``letters``), and the unchanged rules are dropped. Splitting each grammar's equations
into the block of unchanged rules and the block of the others, Bekić's lemma gives
L(S) = σ(L(S♯)) with σ(⟨same:A⟩) = L(A) — one σ for both grammars, by the claim. So when the
abstracted grammars have one language, so do the grammars: a check of the abstraction has
the strength of the same check of the grammars (and is exact when it says so), over only
the changed rules. When the start rule itself is unchanged the grammars have one language
outright. The converse does not hold (a letter stands for any language, empty or holding
ε included), so a difference between the abstractions is not reported as such: the caller
then checks the grammars as they are, and its counterexample is the full check's.
Lark grammars are left to the full check (their atoms are already terminals).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..grammar import Grammar
from ..grammar.dialects import token_atoms
from ..grammar.expr import Alt, Expr, Ref, Repeat, Seq, Terminal, alt, refs, seq
from ..grammar.grammar import Rule


@dataclass(frozen=True)
class Unchanged:
    """Both grammars with the unchanged rules as letters (``identical``: the start rule
    is unchanged, nothing to check), the letters in order, and how many rules went."""

    original: Grammar | None
    candidate: Grammar | None
    letters: tuple[Terminal, ...]
    rules: int
    identical: bool = False


def unchanged_rules(original: Grammar, candidate: Grammar) -> set[str]:
    """The rules defined in both grammars whose reachable sub-grammars are equal (module
    docstring): every rule but those that reach, in either grammar, a rule defined in one
    grammar only or with another body. Linear in the grammars' size."""
    ours, theirs = original.bodies(), candidate.bodies()
    differ = [n for n in ours.keys() | theirs.keys() if ours.get(n) != theirs.get(n)]
    users: dict[str, list[str]] = {}  # name -> the rules naming it, in either grammar
    for bodies in (ours, theirs):
        for name, body in bodies.items():
            for m in refs(body):
                users.setdefault(m, []).append(name)
    changed = set(differ)
    stack = list(differ)
    while stack:
        for u in users.get(stack.pop(), ()):
            if u not in changed:
                changed.add(u)
                stack.append(u)
    return {n for n in ours if n in theirs and n not in changed}


def abstract_unchanged(original: Grammar, candidate: Grammar) -> Unchanged | None:
    """Both grammars with their unchanged rules as letters (module docstring); None when
    no changed rule names an unchanged one (nothing to leave out), or for Lark."""
    if token_atoms(original.dialect) or token_atoms(candidate.dialect):
        return None
    same = unchanged_rules(original, candidate)
    if original.start == candidate.start and original.start in same:
        return Unchanged(None, None, (), len(same), identical=True)
    letter: dict[str, Terminal] = {}
    for g in (original, candidate):
        for r in g.rules:
            if r.name not in same:
                for m in refs(r.body):
                    if m in same and m not in letter:
                        letter[m] = Terminal(f"⟨same:{m}⟩")
    if not letter:
        return None

    def abstracted(g: Grammar) -> Grammar:
        rules = tuple(Rule(r.name, _lettered(r.body, letter)) for r in g.rules if r.name not in same)
        return Grammar(rules, g.start, dialect=g.dialect)

    return Unchanged(abstracted(original), abstracted(candidate), tuple(letter.values()), len(same))


def _lettered(e: Expr, letter: dict[str, Terminal]) -> Expr:
    """``e`` with each reference to a rule of ``letter`` replaced by its letter."""
    if isinstance(e, Ref):
        return letter.get(e.name, e)
    if isinstance(e, Repeat):
        item = _lettered(e.item, letter)
        return e if item is e.item else Repeat(item, e.min, e.max)
    if isinstance(e, (Seq, Alt)):
        items = [_lettered(i, letter) for i in e.items]
        if all(a is b for a, b in zip(items, e.items)):
            return e
        return seq(*items) if isinstance(e, Seq) else alt(*items)
    return e
