"""Common prefix / suffix factoring of alternatives, where it shrinks κ.

    # "ab" X | "ac" Y        -->  "a" ("b" X | "c" Y)       (code-point granularity)
    # A B | A C | D          -->  A (B | C) | D              (item granularity)
    # X "end" | Y "end"      -->  (X | Y) "end"
    # "a" | "ab"             -->  "a" ("" | "b")             (ε-handling then makes it "a" "b"?)

Why it preserves the language: concatenation distributes over union,
p·L1 ∪ p·L2 = p·(L1 ∪ L2) and L1·s ∪ L2·s = (L1 ∪ L2)·s, and union is associative and
commutative, so the members sharing a prefix (suffix) may be gathered at the place of the
first of them and factored. In GBNF / EBNF a literal is the concatenation of its code points
("ab" = "a" "b"), so prefixes may end inside a literal; in Lark a literal is one lexer token
and only whole items are compared.

Members are grouped by their first (last) unit, and a group is factored by its longest
common prefix (suffix). Each factoring is kept only when it strictly lowers κ of the rule
(measured by lowering the rule, ``gramopt.costmodels.kappa``), so the pass never increases
κ; it repeats until nothing more pays, so it is idempotent. The top level of a Lark rule
with ``-> alias`` names is left alone (the aliases name its alternatives).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ...costmodels.kappa import rule_kappa
from ...grammar import Alt, Epsilon, Expr, Grammar, Literal, Repeat, Rule, Seq, alt, seq
from .common import fixpoint, has_aliases, map_rules

Unit = tuple[Expr, int]  # an item (or one code point of a literal) and the item it came from


def units(e: Expr, split_literals: bool) -> list[Unit]:
    """The units of one alternative: its items, literals cut into code points if asked."""
    items = e.items if isinstance(e, Seq) else () if isinstance(e, Epsilon) else (e,)
    out: list[Unit] = []
    for k, item in enumerate(items):
        if split_literals and isinstance(item, Literal):
            out.extend((Literal(c), k) for c in item.text)
        else:
            out.append((item, k))
    return out


def join(us: list[Unit]) -> Expr:
    """The expression of a run of units, code points of one literal joined back."""
    out: list[Expr] = []
    prev = None
    for expr, origin in us:
        if out and origin == prev and isinstance(expr, Literal) and isinstance(out[-1], Literal):
            out[-1] = Literal(out[-1].text + expr.text)
        else:
            out.append(expr)
        prev = origin
    return seq(*out)


def _common(seqs: list[list[Unit]], from_end: bool) -> int:
    """Length of the longest common prefix (suffix) of the unit lists."""
    n = 0
    shortest = min(len(s) for s in seqs)
    while n < shortest:
        pick = (lambda s: s[-1 - n][0]) if from_end else (lambda s: s[n][0])
        if len({pick(s) for s in seqs}) != 1:
            break
        n += 1
    return n


def factorings(e: Alt, split_literals: bool) -> list[Expr]:
    """Every one-group factoring of ``e``: prefixes first, then suffixes, groups in order."""
    us = [units(a, split_literals) for a in e.items]
    out: list[Expr] = []
    for from_end in (False, True):
        groups: dict[Expr, list[int]] = {}
        for i, u in enumerate(us):
            if u:
                groups.setdefault(u[-1][0] if from_end else u[0][0], []).append(i)
        for members in groups.values():
            if len(members) < 2:
                continue
            n = _common([us[i] for i in members], from_end)
            if from_end:
                shared = join(us[members[0]][-n:])
                inner = alt(*(join(us[i][:-n]) for i in members))
                factored = seq(inner, shared)
            else:
                shared = join(us[members[0]][:n])
                inner = alt(*(join(us[i][n:]) for i in members))
                factored = seq(shared, inner)
            items = [factored if i == members[0] else a
                     for i, a in enumerate(e.items) if i == members[0] or i not in members]
            out.append(alt(*items))
    return out


def _rebuild(e: Expr, items: list[Expr]) -> Expr:
    return seq(*items) if isinstance(e, Seq) else alt(*items)


def _factor(e: Expr, plug: Callable[[Expr], Expr], score: Callable[[Expr], int],
            split: bool, at_top: bool, top_ok: bool) -> Expr:
    """``e`` (whose body is ``plug(e)``) with κ-lowering factorings applied, children first."""
    if isinstance(e, (Seq, Alt)):
        items = list(e.items)
        for i in range(len(items)):
            def plug_i(new: Expr, i: int = i) -> Expr:
                return plug(_rebuild(e, items[:i] + [new] + items[i + 1:]))
            items[i] = _factor(items[i], plug_i, score, split, False, top_ok)
        e = _rebuild(e, items)
    elif isinstance(e, Repeat):
        lo, hi = e.min, e.max
        e = Repeat(_factor(e.item, lambda new: plug(Repeat(new, lo, hi)), score, split, False,
                           top_ok), lo, hi)
    if isinstance(e, Alt) and (top_ok or not at_top):
        best = score(plug(e))
        for candidate in factorings(e, split):
            cost = score(plug(candidate))
            if cost < best:
                e, best = candidate, cost
                break
    return e


def _rule(rule: Rule, dialect: str) -> Rule:
    def score(body: Expr) -> int:  # κ is a sum over rules: the rule's own share decides
        return rule_kappa(replace(rule, body=body), dialect)
    split = dialect != "lark"
    body = _factor(rule.body, lambda new: new, score, split, True, not has_aliases(rule))
    return rule if body == rule.body else replace(rule, body=body)


def _factor_once(grammar: Grammar) -> Grammar:
    return map_rules(grammar, lambda r: _rule(r, grammar.dialect))


def factor_alternatives(grammar: Grammar) -> Grammar:
    """Factor common prefixes and suffixes of alternatives wherever that lowers κ."""
    return fixpoint(_factor_once, grammar)
