"""Direct left recursion as a star: ``A ::= A α | β`` → ``A ::= β α*``."""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Epsilon, Expr, Grammar, Ref, Repeat, Seq, alt, refs, seq
from ...grammar.analysis import lexical_rules, nullable_expr, nullable_rules
from ...grammar.dialects import token_atoms
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
    return _remove_left_recursion(g, keep_lexemes=False)


def remove_left_recursion_keeping_lexemes(g: Grammar) -> tuple[Grammar, list[str]]:
    """``remove_left_recursion``, except for a rule ``A ::= A α₁ | … | A αₘ | ε`` whose star
    form ``(α₁|…|αₘ)*`` would name only lexical rules (``grammar.analysis.lexical_rules``):
    llguidance reads that star as one greedy lexeme where it parsed the left-recursive rule
    item by item (an obfuscated arithmetic grammar's ``ws``: the greedy form ate the ``\n``
    its root needs, and llguidance refused every next token). Such a rule is written
    right-recursive, ``A ::= (α₁|…|αₘ) A | ε``: the least solution of A = α·A ∪ ε is α*, as
    for the left-recursive form, and A still names itself, so it stays a parser rule, and no
    other rule's lexicality changes (a rule is lexical by what it names). Every other rule
    is treated as ``remove_left_recursion`` treats it."""
    return _remove_left_recursion(g, keep_lexemes=True)


def _remove_left_recursion(g: Grammar, keep_lexemes: bool) -> tuple[Grammar, list[str]]:
    nullable = nullable_rules(g)
    keep_lexemes = keep_lexemes and not token_atoms(g.dialect)  # a Lark grammar's lexemes are its terminals
    lexical = lexical_rules(g) if keep_lexemes else frozenset()
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
        if keep_lexemes and all(isinstance(b, Epsilon) for b in betas) and r.name != g.start \
                and all(n in lexical for a in alphas for n in refs(a)):
            rules.append(replace(r, body=alt(seq(alt(*alphas), Ref(r.name)), Epsilon())))
        else:
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
