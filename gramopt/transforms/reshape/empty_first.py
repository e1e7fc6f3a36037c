"""Repetitions written empty-first, as llama.cpp's stacks pay least for (the llama.cpp
target's fix-up, ``gramopt.targets.llamacpp``, where the measurement lives).

    x*  →  R  with  R ::= "" | x R      (a rule ``A ::= x*`` becomes ``A ::= "" | x A``)
    x+  →  x R
    x?  →  ("" | x)

Argument: R derives exactly the strings of x*: ε, and x followed by a string of x*, by
induction on the length of a derivation; ``x x*`` = x+; ε ∪ x = x?. Skipped where x is
nullable (R would be left-recursive, which llama.cpp refuses). Idempotent: no ``*``, ``+``
or ``?`` is left on a non-nullable item.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, Epsilon, Expr, Grammar, Ref, Repeat, Rule, Seq, transform
from ...grammar.analysis import nullable_expr, nullable_rules


def write_repetitions_empty_first(g: Grammar) -> tuple[Grammar, int]:
    """``x*`` → ``R`` with ``R ::= "" | x R``; ``x+`` → ``x R``; ``x?`` → ``("" | x)``
    (x not nullable). Returns the grammar and how many repetitions were rewritten."""
    nullable = nullable_rules(g)
    taken = set(g.names)
    made: dict[Expr, str] = {}
    new_rules: list[Rule] = []
    count = 0

    def star_rule(item: Expr, owner: str) -> str:
        if item not in made:
            name, k = f"{owner}-star", 1
            while name in taken:
                k += 1
                name = f"{owner}-star-{k}"
            taken.add(name)
            made[item] = name
            new_rules.append(Rule(name, Alt((Epsilon(), Seq((item, Ref(name)))))))
        return made[item]

    def lift(owner: str):
        def fn(e: Expr) -> Expr:
            nonlocal count
            if not isinstance(e, Repeat) or nullable_expr(e.item, nullable):
                return e
            if e.max is None and e.min in (0, 1):
                count += 1
                r = Ref(star_rule(e.item, owner))
                return r if e.min == 0 else Seq((e.item, r))
            if e.min == 0 and e.max == 1:
                count += 1
                return Alt((Epsilon(), e.item))
            return e
        return fn

    rules = []
    for r in g.rules:
        b = r.body
        if isinstance(b, Repeat) and b.max is None and b.min == 0 and not nullable_expr(b.item, nullable):
            # a rule that is one star is its own star rule: R ::= "" | x R
            count += 1
            rules.append(replace(r, body=Alt((Epsilon(), Seq((transform(b.item, lift(r.name)), Ref(r.name)))))))
        else:
            rules.append(replace(r, body=transform(b, lift(r.name))))
    if not count:
        return g, 0
    return replace(g, rules=tuple(rules) + tuple(new_rules)), count


__all__ = ["write_repetitions_empty_first"]
