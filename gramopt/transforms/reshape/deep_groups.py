"""Groups nested deeper than the passes' bound lifted into rules of their own, as the reader
lifts them (``formats.ebnf``: ``MAX_BODY_DEPTH``).

A reshaping can deepen a body: ``flatten_character_rules`` writes a character rule's
alternation where ``char`` was, two levels below it, and llama.cpp's converter writes a
string's ``maxLength`` as ``char (char (char …)?)?`` as deep as the reader allows (48). The
passes never keep a body deeper than ``MAX_PASS_DEPTH`` (``passes._too_big`` reverts the whole
pass), so the xgrammar target's fix-up was thrown away on such strings, and with it the flat
characters: xgrammar 0.2.8's p95 along o13272's valid instance went from 89 ms a Qwen mask as
written to 1.3 ms with ``char`` flat and the nest lifted at the bound
(``benchmarks/results/deep-groups-2026-11-28``).

Argument: a rule means its body, so replacing a subexpression by a reference to a fresh rule
whose body it is leaves every rule's language unchanged (the reader's own lift).
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, Expr, Grammar, Ref, Repeat, Rule, Seq, alt, seq
from ...grammar.dialects import dialect_record
from ...grammar.expr import MAX_PASS_DEPTH, depth
from .common import _fresh


def lift_deep_groups(g: Grammar, max_depth: int = MAX_PASS_DEPTH) -> tuple[Grammar, list[str]]:
    """``g`` with every rule body at most ``max_depth`` deep. In a body deeper than that (a
    pinned one, ``Rule.pinned``, is left as written), bottom-up, a group that would be deeper
    than ``max_depth - 2`` becomes a reference to a fresh rule ``<rule><sep><k>`` placed after
    its rule (its body at most ``max_depth - 1`` deep), as the reader lifts them; a body at
    most ``max_depth`` deep is left as it is. Returns the grammar and the rules changed."""
    limit = max_depth - 2
    taken = set(g.names)
    sep = dialect_record(g.dialect).name_separator
    rules: list[Rule] = []
    changed: list[str] = []
    for r in g.rules:
        lifted: list[Rule] = []

        def lift(e: Expr, owner: str = r.name) -> Ref:
            name = _fresh(f"{owner}{sep}{len(lifted) + 1}", taken)
            lifted.append(Rule(name, e))
            return Ref(name)

        if r.pinned or depth(r.body) <= max_depth:
            rules.append(r)
            continue
        body, _ = _bounded(r.body, limit, lift, top=True)
        rules.append(replace(r, body=body) if lifted else r)
        rules += lifted
        if lifted:
            changed.append(r.name)
    return (g.replace_rules(rules), changed) if changed else (g, [])


def _bounded(e: Expr, limit: int, lift, top: bool = False) -> tuple[Expr, int]:
    """(``e`` with its groups deeper than ``limit`` lifted, ``e`` itself too unless ``top``;
    an upper bound on its depth): a node is rebuilt only when a child changed (the smart
    constructors may splice a child, which only makes it shallower)."""
    if isinstance(e, (Seq, Alt)):
        parts = [_bounded(c, limit, lift) for c in e.items]
        items = [x for x, _ in parts]
        node = e if all(x is c for x, c in zip(items, e.items)) else (seq if isinstance(e, Seq) else alt)(*items)
        height = 1 + max(h for _, h in parts)
    elif isinstance(e, Repeat):
        item, h = _bounded(e.item, limit, lift)
        node = e if item is e.item else type(e)(item, e.min, e.max)  # a Lark [x] stays what it is
        height = 1 + h
    else:
        return e, 1
    if height > limit and not top:
        return lift(node), 1
    return node, height
