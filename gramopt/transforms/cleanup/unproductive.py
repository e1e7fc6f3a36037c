"""Remove unproductive rules and the alternatives that refer to them.

    # S ::= "a" | "b" U ;  U ::= "c" U          -->   S ::= "a"
    # S ::= "a" ("b" U)* ;  U ::= U "x"          -->   S ::= "a"

A rule is productive when it derives some finite string (least fixpoint,
``gramopt.grammar.analysis.productive_rules``); an empty character class (``[^\\x00-\\U0010FFFF]``)
matches nothing and is unproductive too. Pruning an expression e gives ∅ or an expression
with the same language:

    Ref(U), U unproductive      ∅
    e1 … ek                     ∅ if any ei is ∅ (L·∅ = ∅), else the pruned items
    e1 | … | ek                 the non-∅ items (L ∪ ∅ = L); ∅ if none survive
    x{0,n} with x = ∅           ε     (only x⁰ = {ε} survives)
    x{m,n} with x = ∅, m ≥ 1    ∅

Why it preserves the language: each line above is a language identity, and an
unproductive rule has the empty language, so every string of L(G) has a derivation that
never expands one; removing them (and what reaches only them) leaves those derivations.

The start rule stays. When the start rule itself is unproductive, L(G) = ∅, which the IR
has no node for: the pass then returns the grammar unchanged (its language stays ∅, and
engines report it as they would have). Lookahead assertions that mention a removed rule are
pruned the same way, and dropped when nothing of them survives (a hint, not language).
κ never increases: only productions and symbols are removed.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import (Alt, CharClass, Epsilon, Expr, Grammar, Ref, Repeat, Rule, Seq, alt,
                        rebuilds_as_is, seq)
from ...grammar.analysis import productive_rules
from .common import alternatives, keep_alternatives


def prune(e: Expr, productive: set[str]) -> Expr | None:
    """``e`` with every part of empty language removed; ``None`` when L(e) = ∅."""
    if isinstance(e, Ref):
        return e if e.name in productive else None
    if isinstance(e, CharClass):
        return e if e.code_points() else None
    if isinstance(e, Seq):
        items = [prune(i, productive) for i in e.items]
        if any(i is None for i in items):
            return None
        return e if rebuilds_as_is(e, items) else seq(*items)
    if isinstance(e, Alt):
        items = [i for i in (prune(i, productive) for i in e.items) if i is not None]
        if not items:
            return None
        return e if rebuilds_as_is(e, items) else alt(*items)
    if isinstance(e, Repeat):
        item = prune(e.item, productive)
        if item is None:
            return Epsilon() if e.min == 0 else None
        return e if item is e.item else Repeat(item, e.min, e.max)
    return e


def _prune_rule(rule: Rule, productive: set[str]) -> Rule:
    """``rule`` pruned; ``rule`` itself when nothing in it is pruned (a body the smart
    constructors keep as it is), so an unchanged grammar compares by identity."""
    alts = alternatives(rule.body)
    items = [prune(a, productive) for a in alts]
    lookahead = None if rule.lookahead is None else prune(rule.lookahead, productive)
    if (lookahead is rule.lookahead and all(i is a for i, a in zip(items, alts))
            and (not isinstance(rule.body, Alt) or rebuilds_as_is(rule.body, items))):
        return rule
    new = keep_alternatives(rule, items)
    if rule.lookahead is not None:
        new = replace(new, lookahead=lookahead)
    return new


def remove_unproductive(grammar: Grammar) -> Grammar:
    """The grammar without rules (or alternatives) that derive no finite string."""
    productive = productive_rules(grammar)
    if grammar.start not in productive:
        return grammar
    rules = [_prune_rule(r, productive) for r in grammar.rules if r.name in productive]
    new = grammar.replace_rules(rules)
    return grammar if new == grammar else new
