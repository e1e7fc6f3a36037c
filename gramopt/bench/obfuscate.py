"""A seeded grammar obfuscator: language-preserving changes that make a grammar worse
(the obfuscated suite of ``gramopt bench``; ``tests/obfuscate.py`` re-exports it).

    delegate chains      a reference X becomes X__d1 with X__d1 ::= X__d2, X__d2 ::= X
    duplicated rules     a reference X becomes X__dup, a copy of X under a new name
    x* as helper         x* becomes H with H ::= H x | ""      (left recursive)
    x+ as R R | x        x+ becomes R with R ::= R R | x       (ambiguous)
    split literals       "abc" becomes "a" "bc"                (not Lark: a Lark literal is a token)

Each is language-preserving by construction (a new rule's language is the replaced
expression's), so an optimizer must give back a grammar no worse than the clean one.
"""

from __future__ import annotations

import random

from gramopt.grammar import Epsilon, Grammar, Literal, Ref, Repeat, Rule, Seq, alt, seq, transform
from gramopt.grammar.dialects import token_atoms


def obfuscate(grammar: Grammar, seed: int = 0, p: float = 0.5) -> Grammar:
    rng = random.Random(seed)
    # a stream of its own, so the other changes are the ones earlier versions made
    split = random.Random(f"{seed}-split") if not token_atoms(grammar.dialect) else None
    bodies = {r.name: r.body for r in grammar.rules}
    extra: list[Rule] = []
    taken = set(bodies)

    def fresh(base: str) -> str:
        k = 1
        while f"{base}__{k}" in taken:
            k += 1
        taken.add(f"{base}__{k}")
        return f"{base}__{k}"

    def go(e):
        if split is not None and isinstance(e, Literal) and len(e.text) >= 2 and split.random() < p:
            k = split.randint(1, len(e.text) - 1)
            return Seq((Literal(e.text[:k]), Literal(e.text[k:])))
        if isinstance(e, Repeat) and e.max is None and e.min in (0, 1) and rng.random() < p:
            h = fresh("rep")
            if e.min == 0:
                extra.append(Rule(h, alt(seq(Ref(h), e.item), Epsilon())))
            else:
                extra.append(Rule(h, alt(seq(Ref(h), Ref(h)), e.item)))
            return Ref(h)
        if isinstance(e, Ref) and e.name in bodies and rng.random() < p:
            if rng.random() < 0.5:
                d1, d2 = fresh(e.name + "_d"), fresh(e.name + "_d")
                extra.append(Rule(d1, Ref(d2)))
                extra.append(Rule(d2, Ref(e.name)))
                return Ref(d1)
            dup = fresh(e.name + "_dup")
            extra.append(Rule(dup, bodies[e.name]))
            return Ref(dup)
        return e

    rules = []
    for r in grammar.rules:
        body = transform(r.body, go)
        rules.append(Rule(r.name, body, r.lookahead, r.flags, r.priority, (), r.comment,
                          native=r.native if body == r.body else None))
    return grammar.replace_rules(rules + extra)
