"""Remove duplicate alternatives.

    # a | b | a        -->  a | b
    # ("x" | "y" | "x") "z"  -->  ("x" | "y") "z"

Why it preserves the language: union is idempotent (L ∪ L = L) and commutative, so a member
equal (as an IR node, hence in language) to an earlier one adds nothing; the first
occurrence keeps its place. It also removes the ambiguity the copy caused (every string of
``a`` had two derivations). In Lark, top-level alternatives with different ``-> alias``
names build different trees and are kept; equal ones are merged. κ never increases.
Idempotent.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, Expr, Grammar, Rule, alt, transform
from .common import alternatives, keep_alternatives, map_rules


def dedup_members(e: Alt) -> Expr:
    """``e`` without members equal to an earlier member."""
    return alt(*dict.fromkeys(e.items))


def _rule(rule: Rule) -> Rule:
    step = lambda e: dedup_members(e) if isinstance(e, Alt) else e  # noqa: E731
    items = [transform(a, step) for a in alternatives(rule.body)]
    if len(items) == 1:
        return replace(rule, body=items[0])
    aliases = rule.aliases if len(rule.aliases) == len(items) else (None,) * len(items)
    seen: set = set()
    kept: list[Expr | None] = []
    for item, name in zip(items, aliases):
        kept.append(None if (item, name) in seen else item)
        seen.add((item, name))
    return keep_alternatives(rule, kept)


def remove_duplicate_alternatives(grammar: Grammar) -> Grammar:
    """Drop every alternative equal to an earlier alternative of the same alternation."""
    return map_rules(grammar, _rule)
