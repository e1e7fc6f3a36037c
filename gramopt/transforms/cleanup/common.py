"""Shared plumbing of the clean-up passes: rule-by-rule rewriting and top-level alternatives.

A clean-up pass rewrites rule *bodies* only. Lark terminal definitions are lexer rules
(priorities, longest match) and are left exactly as written; lookahead assertions are
hints, not part of the language (see ``gramopt.grammar.bnf``), and are left alone except
where a referenced rule disappears. A pinned rule (``Rule.pinned``: a lookahead assertion, or
an engine macro such as xgrammar's ``Regex(...)``) keeps its body as written; only
``unproductive`` may prune it (a reference to a rule that derives nothing must go).

Lark keeps one ``-> alias`` per top-level alternative (``Rule.aliases``); an alias shapes
the parse tree, not the language. A pass that drops top-level alternatives drops their
aliases with them (:func:`keep_alternatives`); a pass that would reshape the top level in
any other way skips the top level of a rule with aliases (:func:`has_aliases`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ...grammar import Alt, Expr, Grammar, Rule, alt
from ...grammar.analysis import cyclic_components, nullable_expr, nullable_rules
from ...grammar.dialects import token_atoms

__all__ = ["is_lark", "map_rules", "map_bodies", "alternatives", "has_aliases", "keep_alternatives",
           "nullable_expr", "safe_nullable", "Trusted"]


def is_lark(grammar: Grammar) -> bool:
    """True for a Lark grammar: its literals are lexer tokens, so nothing may be fused,
    merged into a class or split at code-point granularity."""
    return token_atoms(grammar.dialect)


def map_rules(grammar: Grammar, fn: Callable[[Rule], Rule]) -> Grammar:
    """Apply ``fn`` to every rule but the pinned ones (``Rule.pinned``: an engine's own
    form, kept as it is); return ``grammar`` itself when no rule changed, so a pass that
    finds nothing to do returns its input (cheap idempotence checks). Leaving a body as it
    is keeps the language trivially."""
    new = tuple(r if r.pinned else fn(r) for r in grammar.rules)
    if new == grammar.rules:
        return grammar
    return grammar.replace_rules(new)


def map_bodies(grammar: Grammar, fn: Callable[[Expr], Expr]) -> Grammar:
    """Replace every rule body ``b`` by ``fn(b)`` (see :func:`map_rules`)."""
    return map_rules(grammar, lambda r: replace(r, body=fn(r.body)))


def alternatives(body: Expr) -> tuple[Expr, ...]:
    """The top-level alternatives of a rule body (one when the body is no ``Alt``)."""
    return body.items if isinstance(body, Alt) else (body,)


def has_aliases(rule: Rule) -> bool:
    """Whether the rule names (Lark ``-> alias``) any of its top-level alternatives."""
    return any(a is not None for a in rule.aliases)


def keep_alternatives(rule: Rule, new_items: Sequence[Expr | None]) -> Rule:
    """``rule`` with top-level alternative i replaced by ``new_items[i]`` (``None``: dropped),
    aliases kept in step. An item that is itself an alternation is spliced in, each of its
    members carrying the alias of the item (``(b | c) -> x`` is ``b -> x | c -> x``). At
    least one item must survive."""
    pieces: list[tuple[Expr, int]] = []
    for i, e in enumerate(new_items):
        if e is not None:
            pieces.extend((p, i) for p in alternatives(e))
    body = alt(*(e for e, _ in pieces))
    aliases = rule.aliases
    if aliases and len(aliases) == len(new_items):
        aliases = tuple(aliases[i] for _, i in pieces)
    return replace(rule, body=body, aliases=aliases)


class Trusted:
    """The nullable rules a rewrite inside one rule R may trust: ``b in trusted`` holds when b
    is nullable and outside R's strongly connected component (a set in all but name: the
    rewrites only ask ``in``)."""

    __slots__ = ("nullable", "component")

    def __init__(self, nullable: set[str], component: frozenset[str]):
        self.nullable, self.component = nullable, component

    def __contains__(self, name: str) -> bool:
        return name in self.nullable and name not in self.component


def safe_nullable(grammar: Grammar) -> dict[str, Trusted]:
    """Per rule R, the nullable rules whose nullability does not depend on R, as asked of
    the rules R's body references.

    A rewrite that removes an ε-witness on the strength of "x is nullable" (``x? --> x``,
    ``"" | x --> x``) is unsound when x is nullable only *through* that witness:
    ``R ::= R | ""`` derives ε, ``R ::= R`` derives nothing, though "R is nullable" held.
    A rule B that cannot reach R is nullable (or not) whatever R's body says, so inside R a
    reference to B may be trusted; references into R's strongly connected component may not
    (they count as not nullable). With that, every such rewrite replaces an expression by
    one with the same language for *every* language the rules of R's component might have,
    so the least fixpoint of the rule equations, hence L(G), is unchanged.

    Cost: R reaches every rule its body references, so such a rule B reaches R exactly when
    both lie in one strongly connected component; one Tarjan pass answers every question
    (a reach per nullable rule was quadratic on long chains of optional rules, as llama.cpp's
    converter writes a ``maxLength``).
    """
    nullable = nullable_rules(grammar)
    component = cyclic_components(grammar)
    return {r.name: Trusted(nullable, component.get(r.name) or frozenset((r.name,))) for r in grammar.rules}
