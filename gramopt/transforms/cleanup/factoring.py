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
common prefix (suffix), its remainders factored in turn (a trie, in one pass). Each
factoring is kept only when it strictly lowers κ, computed from the group's own figures (κ
is linear in the pieces of an alternation: ``_factor_alt``), and a rule is kept as it was
unless its exact κ went down, so the pass never increases κ; it repeats until nothing more
pays, so it is idempotent. Linear in the rule's size per round: 50,000 alternatives take
a second, where scoring every candidate on the whole rule took minutes. The top level of a Lark rule
with ``-> alias`` names is left alone (the aliases name its alternatives).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Callable

from ...costmodels.kappa import expr_syms, rule_kappa
from ...grammar import MAX_PASS_DEPTH, Alt, Epsilon, Expr, Grammar, Literal, Repeat, Rule, Seq, alt, seq, walk
from ...grammar.dialects import token_atoms
from ..fixpoint import fixpoint
from .common import has_aliases, map_rules

MAX_TRIE_LEVELS = (MAX_PASS_DEPTH - 8) // 2  # each level nests a sequence and an alternation

Unit = tuple[Expr, int]  # an item (or one code point of a literal) and the item it came from


@lru_cache(maxsize=4096)
def _code_point(c: str) -> Literal:
    """The one-code-point literal of ``c`` (shared: a trie level splits every member anew)."""
    return Literal(c)


def units(e: Expr, split_literals: bool) -> list[Unit]:
    """The units of one alternative: its items, literals cut into code points if asked."""
    items = e.items if isinstance(e, Seq) else () if isinstance(e, Epsilon) else (e,)
    out: list[Unit] = []
    for k, item in enumerate(items):
        if split_literals and isinstance(item, Literal):
            if len(item.text) == 1:
                out.append((item, k))
            else:
                out.extend([(_code_point(c), k) for c in item.text])
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


def _cost(member: Expr, lark: bool, memo: dict) -> int:
    """κ of one alternative as a production: its symbols, its end state, its helpers."""
    n, h = expr_syms(member, lark, memo)
    return n + 1 + h


def _repeat_coef(e: Repeat, coef: int) -> int:
    """How many times a symbol of ``e.item``'s right-hand side counts in κ, when a symbol
    of ``e`` counts ``coef`` times (the Repeat row of ``costmodels.kappa.expr_syms``)."""
    lo, hi = e.min, e.max
    if hi is None:
        return 1 if lo == 0 else (lo - 1) * coef + 2
    return lo * coef + (hi - lo)


def _factor_alt(e: Alt, coef: int, lark: bool, split: bool, at_top: bool, levels: int, memo: dict) -> Expr:
    """``e`` with every κ-lowering prefix factoring, then every suffix factoring, applied
    group by group. κ is linear in the pieces of ``e``: an alternative costs ``_cost`` in
    the production it forms, and a symbol ``e`` puts in its parent's right-hand side costs
    ``coef``; so factoring one group of members changes κ by the group's own figures, and
    groups are independent. The remainders of a factored group are factored the same way
    (a trie, built in one pass), at most ``levels`` deep. ``memo``: ``expr_syms``'s, so each
    piece of the trie is scored once, not once per level above it."""
    if levels <= 0:
        return e
    for from_end in (False, True):
        if not isinstance(e, Alt):
            break
        members = list(e.items)
        us = [units(m, split) for m in members]
        groups: dict[Expr, list[int]] = {}
        for i, u in enumerate(us):
            if u:
                groups.setdefault(u[-1][0] if from_end else u[0][0], []).append(i)
        replaced: dict[int, Expr] = {}
        dropped: set[int] = set()
        for idx in groups.values():
            if len(idx) < 2:
                continue
            n = _common([us[i] for i in idx], from_end)
            whole = len(idx) == len(members)
            if from_end:
                shared = join(us[idx[0]][-n:])
                inner = alt(*(join(us[i][:-n]) for i in idx))
            else:
                shared = join(us[idx[0]][:n])
                inner = alt(*(join(us[i][n:]) for i in idx))
            if isinstance(inner, Alt):
                inner = _factor_alt(inner, coef if whole and not at_top else 1, lark, split, False, levels - 1,
                                    memo)
            f = seq(inner, shared) if from_end else seq(shared, inner)
            if whole and not at_top:  # e itself becomes f in its parent's right-hand side
                fn, fh = expr_syms(f, lark, memo)
                before = coef + 2 + sum(_cost(m, lark, memo) for m in members)
                after = coef * fn + fh
            else:
                before = sum(_cost(members[i], lark, memo) for i in idx)
                after = _cost(f, lark, memo)
            if after < before:
                replaced[idx[0]] = f
                dropped.update(idx[1:])
        if replaced:
            e = alt(*(replaced.get(i, m) for i, m in enumerate(members) if i not in dropped))
    return e


def _factor(e: Expr, coef: int, lark: bool, split: bool, at_top: bool, top_ok: bool, memo: dict) -> Expr:
    """``e`` with κ-lowering factorings applied, children first; a symbol ``e`` puts on
    its right-hand side counts ``coef`` times in κ."""
    if isinstance(e, Seq):
        e = seq(*(_factor(i, coef, lark, split, False, top_ok, memo) for i in e.items))
    elif isinstance(e, Alt):
        e = alt(*(_factor(i, 1, lark, split, False, top_ok, memo) for i in e.items))
    elif isinstance(e, Repeat):
        e = Repeat(_factor(e.item, _repeat_coef(e, coef), lark, split, False, top_ok, memo), e.min, e.max)
    if isinstance(e, Alt) and (top_ok or not at_top):
        e = _factor_alt(e, coef, lark, split, at_top, MAX_TRIE_LEVELS, memo)
    return e


def _rule(rule: Rule, dialect: str) -> Rule:
    lark = token_atoms(dialect)
    body = _factor(rule.body, 1, lark, not lark, True, not has_aliases(rule), {})
    if body == rule.body or rule_kappa(replace(rule, body=body), dialect) >= rule_kappa(rule, dialect):
        return rule
    return replace(rule, body=body)


_MEMO: dict[tuple[Rule, str], tuple[Expr, int]] = {}  # (rule, dialect) -> (the body _rule gives, nodes held)
_MEMO_NODES = 1_000_000  # expression nodes the remembered rules and bodies may hold, together
_memo_held = 0


def _rule_memo(rule: Rule, dialect: str) -> Rule:
    """``_rule`` remembered for the latest rules, up to ``_MEMO_NODES`` expression nodes
    of rules and bodies (the newest always): the pipeline runs this pass again on its own
    output (its fixpoint, the clean-up rounds, the pipeline's fixpoint), and a 50,000-word
    enum took a second per run, a grammar of 2,000 large rules (NLTK's commandtalk after
    inlining) seconds per round. ``_rule`` is a pure function of the rule and the dialect,
    so a remembered body is the body. Only the body is remembered: a rule's comment and
    position are not part of its equality, so an equal rule of another grammar (a batch
    worker's earlier item) must not lend them — that made batch output depend on which
    worker took which grammar first."""
    global _memo_held
    key = (rule, dialect)
    hit = _MEMO.get(key)
    if hit is None:
        body = _rule(rule, dialect).body
        held = _nodes(rule.body) + (0 if body is rule.body else _nodes(body))
        hit = _MEMO[key] = (body, held)
        _memo_held += held
        while _memo_held > _MEMO_NODES and len(_MEMO) > 1:
            _memo_held -= _MEMO.pop(next(iter(_MEMO)))[1]
    body = hit[0]
    return rule if body == rule.body else replace(rule, body=body)


def _nodes(e: Expr) -> int:
    return sum(1 for _ in walk(e))


def _factor_once(grammar: Grammar) -> Grammar:
    return map_rules(grammar, lambda r: _rule_memo(r, grammar.dialect))


def factor_alternatives(grammar: Grammar) -> Grammar:
    """Factor common prefixes and suffixes of alternatives wherever that lowers κ."""
    return fixpoint(_factor_once, grammar, 64)
