"""Repetition canonicalization.

Bounds. ``x{0,1}``, ``x{1,}``, ``x{0,}`` already are ``x?``, ``x+``, ``x*`` in the IR (one
node, ``Repeat(x, min, max)``); what remains:

    # x{1,1}  -->  x                 L¹ = L
    # x{0,0}  -->  ε                 L⁰ = {ε};  likewise ε{m,n} --> ε
    # x{m,}   -->  x*   (x nullable) ε ∈ L ⇒ L^k ⊆ L^(k+1), so ∪_(k≥m) L^k = L*
    # x{m,n}  -->  x{n} (x nullable) the same chain: ∪_(m≤k≤n) L^k = L^n;  x? --> x when n = 1

Nesting (each with d ≥ 1; d = 0 is the ε line above), law ``nest`` of
``gramopt.grammar.powers``, which computes the bounds:

    # (x*){c,d}      -->  x*         (x*)^k = x* for k ≥ 1, and ε ∈ x*
    # (x+){c,d}      -->  x{c,}      c ≤ 1:  ∪_(c≤k≤d) (L⁺)^k = ∪_(j≥c) L^j
    #   i.e. (x+)* --> x*, (x+)? --> x*, (x+)+ --> x+
    # (x?){c,d}      -->  x{0,d}     d ∈ {1, ∞}:  (ε ∪ L)^k = ∪_(j≤k) L^j
    #   i.e. (x?)* --> x*, (x?)+ --> x*, (x?)? --> x?
    # ("" | x | y?)* -->  (x | y)*   (M ∪ {ε})* = M*: ε-members and ? of members drop under a star

Not sound, so never done: ``(x{2})*`` is not ``x*`` (only even counts), nor is
``(x{2,})*``; ``(x+){2,3}`` is ``x{2,}`` but costs more κ, so it stays.

Sequences of powers of one base (x a plain item is x{1,1}; x may be a sequence u1 … uk),
law ``concat`` of ``gramopt.grammar.powers``, which computes the bounds:

    # x x*     -->  x+               L^a…b · L^c…d = ∪_(a+c≤k≤b+d) L^k = x{a+c,b+d}
    # x* x     -->  x+
    # x+ x+    -->  x{2,}
    # x? x?    -->  x{0,2}           (also removes the ambiguity of x? x?)
    # u v (u v)*  -->  (u v)+

Two plain copies ``x x`` are left alone (``x{2}`` is the same κ and no clearer).

κ never increases (each rewrite removes a helper or keeps the same lowering; see
``gramopt.grammar.bnf`` for the lowering). Nullability of references is trusted only for
rules that cannot reach the rule being rewritten (``common.safe_nullable``): in
``R ::= R{0,1}`` the ``{0,…}`` is R's only witness of ε, and ``R ::= R{1}`` would be empty.
Idempotent.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, Epsilon, Expr, Grammar, Repeat, Seq, alt, seq, transform
from ...grammar.powers import OPTIONAL, PLUS, STAR, concat, nest
from ..fixpoint import fixpoint
from .common import map_rules, nullable_expr, safe_nullable


def power(e: Expr) -> tuple[Expr, int, int | None]:
    """``e`` as (base, min, max): a repetition is its bounds, any other item x is x{1,1}."""
    if isinstance(e, Repeat):
        return e.item, e.min, e.max
    return e, 1, 1


def _has_empty_member(item: Expr) -> bool:
    """An ε or ``y?`` member of an alternation: then ε is in the alternation's language."""
    return isinstance(item, Alt) and any(
        isinstance(m, Epsilon) or (isinstance(m, Repeat) and (m.min, m.max) == (0, 1)) for m in item.items)


def _under_star(item: Expr) -> Expr:
    """An alternation with an ε or ``y?`` member, repeated without bound: its ε members
    dropped and ``y?`` members unwrapped, (M ∪ {ε})* = M*. Only valid under a star (the
    caller sets the lower bound to 0: the ε member made every x{lo,} equal to x*)."""
    members = [m.item if isinstance(m, Repeat) and (m.min, m.max) == (0, 1) else m
               for m in item.items if not isinstance(m, Epsilon)]
    return alt(*dict.fromkeys(members)) if members else Epsilon()


def _flattens(inner: Repeat, lo: int, hi: int | None) -> bool:
    """Whether ``inner{lo,hi}`` is flattened: the nesting lines of the docstring, the forms
    law ``nest`` flattens that never cost more κ (``(x+){2,3}`` = ``x{2,}`` stays)."""
    bounds = (inner.min, inner.max)
    return (bounds == STAR or (bounds == PLUS and lo <= 1)
            or (bounds == OPTIONAL and hi in (1, None)))


def canonical_repeat(e: Repeat, nullable: set[str]) -> Expr:
    """``e`` rewritten by the bound and nesting identities of the module docstring."""
    x, lo, hi = e.item, e.min, e.max
    if hi is None and _has_empty_member(x):  # ε ∈ L(x), so x{lo,} = x* = (x without ε)*
        x, lo = _under_star(x), 0
    if isinstance(x, Epsilon) or hi == 0:
        return Epsilon()
    if isinstance(x, Repeat) and _flattens(x, lo, hi):
        flat = nest((x.min, x.max), (lo, hi))
        if flat == (x.min, x.max):
            return x
        return canonical_repeat(Repeat(x.item, *flat), nullable)
    if nullable_expr(x, nullable):
        lo = 0 if hi is None else hi
    if (lo, hi) == (1, 1):
        return x
    return Repeat(x, lo, hi)


def _merge(left: Expr, right: Expr, nullable: set[str]) -> Expr | None:
    """One repetition for two adjacent powers of the same base (at least one a Repeat)."""
    if not (isinstance(left, Repeat) or isinstance(right, Repeat)):
        return None
    (x, a, b), (y, c, d) = power(left), power(right)
    if x != y:
        return None
    return canonical_repeat(Repeat(x, *concat((a, b), (c, d))), nullable)


def _absorb(items: list[Expr], i: int, nullable: set[str]) -> list[Expr] | None:
    """Items with the repetition at ``i`` of a sequence u1…uk absorbing a copy of u1…uk
    written just before or just after it; None when there is none."""
    rep = items[i]
    if not (isinstance(rep, Repeat) and isinstance(rep.item, Seq)):
        return None
    unit = list(rep.item.items)
    k = len(unit)
    grown = canonical_repeat(Repeat(rep.item, rep.min + 1, None if rep.max is None else rep.max + 1),
                             nullable)
    if i >= k and items[i - k:i] == unit:
        return items[:i - k] + [grown] + items[i + 1:]
    if items[i + 1:i + 1 + k] == unit:
        return items[:i] + [grown] + items[i + 1 + k:]
    return None


def merge_powers(e: Seq, nullable: set[str]) -> Expr:
    """``e`` with adjacent powers of one base merged into one repetition, to a fixpoint."""
    items = list(e.items)
    changed = True
    while changed:
        changed = False
        for i in range(len(items)):
            merged = _merge(items[i], items[i + 1], nullable) if i + 1 < len(items) else None
            if merged is not None:
                items[i:i + 2] = list(seq(merged).items) if isinstance(seq(merged), Seq) else [merged]
                items = [m for m in items if not isinstance(m, Epsilon)]
                changed = True
                break
            absorbed = _absorb(items, i, nullable)
            if absorbed is not None:
                items = absorbed
                changed = True
                break
    return seq(*items)


def _node(e: Expr, nullable: set[str]) -> Expr:
    if isinstance(e, Repeat):
        return canonical_repeat(e, nullable)
    if isinstance(e, Seq):
        return merge_powers(e, nullable)
    return e


def canonicalize_repetition(grammar: Grammar) -> Grammar:
    """Apply the repetition identities of the module docstring to every rule body, repeated
    until nothing changes (a rewrite can cut a reference and so shrink a component)."""
    return fixpoint(_once, grammar, 64)


def _once(grammar: Grammar) -> Grammar:
    nullable = safe_nullable(grammar)
    return map_rules(grammar, lambda r: replace(
        r, body=transform(r.body, lambda e: _node(e, nullable[r.name]))))
