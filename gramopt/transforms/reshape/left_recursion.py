"""Direct left recursion as a star: ``A ::= A α | β`` → ``A ::= β α*``."""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Epsilon, Expr, Grammar, Ref, Repeat, Seq, alt, seq
from ...grammar.analysis import nullable_expr, nullable_rules
from .common import _alternatives


def remove_left_recursion(g: Grammar) -> tuple[Grammar, list[str]]:
    """``A ::= A α₁ | … | A αₘ | β₁ | … | βₖ`` becomes ``A ::= β₁ (α₁|…|αₘ)* | … | βₖ
    (α₁|…|αₘ)*`` (a leading ``(A x)? y`` counts as ``A x y | y``). Argument: L(A) is the least
    solution of A = A·α ∪ β, which is β·α* (the classic removal of immediate left recursion,
    A → β A′, A′ → α A′ | ε, with A′ written as a star). Rules where some αᵢ is nullable (an
    unguarded or ambiguous loop) or no βⱼ exists are left alone, and so are Lark rules whose
    alternatives carry ``-> alias`` names (the parse tree's node names). Returns the grammar and the
    rules changed. xgrammar parses a left-recursive rule by re-completing it at every item,
    and its mask cache sees the rule's end after every item; the star form has neither."""
    nullable = nullable_rules(g)
    changed: list[str] = []
    rules = []
    for r in g.rules:
        if any(r.aliases) or r.pinned:  # Lark's -> names its alternatives: a star cannot carry
            rules.append(r)                # them; an engine's own form stays as written (Rule.pinned)
            continue
        alts = [x for a in _alternatives(r.body) for x in _split_leading_optional(a, r.name)]
        rec = [_after_left_ref(a, r.name) for a in alts]
        alphas = [x for x in rec if x is not None]
        betas = [a for a, x in zip(alts, rec) if x is None]
        if not alphas or not betas or any(nullable_expr(x, nullable) for x in alphas):
            rules.append(r)
            continue
        star = Repeat(alt(*alphas), 0, None)
        rules.append(replace(r, body=alt(*(seq(b, star) for b in betas))))
        changed.append(r.name)
    return (g.replace_rules(rules), changed) if changed else (g, [])


def _after_left_ref(e: Expr, name: str) -> Expr | None:
    """α when ``e`` is ``name α`` (ε when ``e`` is just ``name``), else None."""
    if e == Ref(name):
        return Epsilon()
    if isinstance(e, Seq) and e.items[0] == Ref(name):
        return seq(*e.items[1:])
    return None


def _split_leading_optional(e: Expr, name: str) -> tuple[Expr, ...]:
    """``(name x)? y`` as the two alternatives ``name x y`` and ``y`` (same language); any
    other expression as itself."""
    if isinstance(e, Seq) and isinstance(e.items[0], Repeat) and (e.items[0].min, e.items[0].max) == (0, 1):
        inner = e.items[0].item
        if _after_left_ref(inner, name) is not None:
            return (seq(inner, *e.items[1:]), seq(*e.items[1:]))
    return (e,)
