"""ε-handling: empty items, optional alternatives, optionals of nullable expressions.

    # a "" b              -->  a b          L·{ε} = L
    # ( "" | x )          -->  x?           {ε} ∪ L(x) is what x? denotes
    # ( "" | x | y* )     -->  ( x | y* )   ε ∈ L(y*) already, so {ε} ∪ … adds nothing
    # x?   (x nullable)   -->  x            {ε} ∪ L(x) = L(x) when ε ∈ L(x)
    # (x?)?               -->  x?           the line above, x? being nullable
    # ε{m,n}, ε?          -->  ε            {ε}^k = {ε}

Nullability of references comes from the least fixpoint over the rules, trusting only
rules that cannot reach the rule being rewritten (``common.safe_nullable``): in
``R ::= R | ""`` the ε is R's only witness of ε and must stay.

κ never increases: ``( "" | x ) --> x?`` is applied only to a nested alternation with a
single other member, where both forms lower to one helper with the productions ``x`` and
``ε`` (κ equal); at the top of a rule, ``A ::= "" | x`` is already two plain productions
and ``A ::= x?`` would add a helper, so it stays. Idempotent.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, Epsilon, Expr, Grammar, Repeat, Rule, alt, transform
from ..fixpoint import fixpoint
from .common import alternatives, keep_alternatives, map_rules, nullable_expr, safe_nullable


def _drop_redundant_epsilons(items: tuple[Expr, ...], nullable: set[str]) -> list[Expr | None]:
    """Alternatives with ε members removed where another member is nullable (None: dropped);
    of several ε members only the first survives otherwise."""
    others_nullable = any(nullable_expr(i, nullable) for i in items if not isinstance(i, Epsilon))
    out: list[Expr | None] = []
    seen_eps = False
    for i in items:
        if isinstance(i, Epsilon):
            out.append(None if others_nullable or seen_eps else i)
            seen_eps = True
        else:
            out.append(i)
    return out


def _node(e: Expr, nullable: set[str]) -> Expr:
    """One bottom-up step on a nested node (children already simplified)."""
    if isinstance(e, Repeat):
        if isinstance(e.item, Epsilon) or e.max == 0:
            return Epsilon()
        if e.min == 0 and e.max == 1 and nullable_expr(e.item, nullable):
            return e.item
        return e
    if isinstance(e, Alt):
        items = [i for i in _drop_redundant_epsilons(e.items, nullable) if i is not None]
        rest = [i for i in items if not isinstance(i, Epsilon)]
        if len(rest) == 1 and len(items) == 2:
            return _node(Repeat(rest[0], 0, 1), nullable)
        return alt(*items)
    return e


def _rule(rule: Rule, nullable: set[str]) -> Rule:
    step = lambda e: _node(e, nullable)  # noqa: E731
    items = [transform(a, step) for a in alternatives(rule.body)]
    if len(items) == 1:
        return replace(rule, body=items[0])
    return keep_alternatives(rule, _drop_redundant_epsilons(tuple(items), nullable))


def _once(grammar: Grammar) -> Grammar:
    nullable = safe_nullable(grammar)
    return map_rules(grammar, lambda r: _rule(r, nullable[r.name]))


def simplify_epsilon(grammar: Grammar) -> Grammar:
    """Apply the ε identities of the module docstring to every rule body, repeated until
    nothing changes (a rewrite can cut a reference and so shrink a component)."""
    return fixpoint(_once, grammar, 64)
