"""Inlining of non-start rules where κ says it pays (after extraction).

    # S ::= "a" B "c" ;  B ::= "b" "b"        -->   S ::= "a" "b" "b" "c"

Why it preserves the language: replacing a reference to a non-recursive rule B by B's
body replaces one derivation step B ⇒ body by the body in place; the derivations of the
start rule are in bijection. A rule is inlined only when it is not the start rule, does not
refer to itself (mutual recursion is fine: unfolding B in A's body keeps the least
fixpoint, and only shortens the cycle), has no lookahead or Lark alias/flag, is not named by a directive or a
lookahead, whose inlining leaves every body at most ``MAX_PASS_DEPTH`` deep (a chain of
1,000 rules would otherwise nest 1,000 deep), and the exact κ change (computed per rule over the canonical BNF — κ is a sum
over rules, plus 1) is ≤ 0: ties go to fewer rules.

Rules forced in by ``always`` (a target's policy: gramopt's Earley runtime wants leaf rules
inlined) are inlined whatever κ says only while their body is at most ``ALWAYS_MAX_KAPPA``:
a leaf's body names no rule, so inlining it never multiplies references, and each of the
grammar's references is replaced by at most ``ALWAYS_MAX_KAPPA`` states — the growth is
linear in the input. Without the cap a rule that *became* a leaf (its callees inlined) was
inlined again, a non-recursive subgrammar unfolded into one tree: NLTK's commandtalk went
from κ 94,754 to 5,728,392 in 100 s before the budget stopped it.

The pass has a work budget (``Budget``: κ of the bodies it rewrites); when spent it stops
and keeps what it inlined so far.

In the e-graph a reference and its rule's body are already one class, so the extractor
sees every inlined form; this pass only decides, with the exact figure, which rule classes
are worth a name.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from ..costmodels.kappa import rule_kappa
from ..grammar import MAX_PASS_DEPTH, Grammar, Ref, Rule, depth, refs, transform


def is_leaf(rule: Rule) -> bool:
    """A rule whose body names no rule: regular, and a place where an Earley parser
    completes back into every caller (gramopt's runtime: inlining `ws ::= [ \\t\\n]*` into
    xgrammar's JSON grammar took its p95 mask time from 182 µs back to 25 µs)."""
    return not refs(rule.body)


ALWAYS_MAX_KAPPA = 128  # the corpus's largest original shared leaf: llama.cpp's schema `space`, 127


def _self_recursive(rule: Rule) -> bool:
    return rule.name in refs(rule.body)


class Budget:
    """The inliner's work budget: κ of the rule bodies it rewrites, summed over every
    candidate it tries (``spent`` once a candidate would overrun it). Work units, so where
    it stops is the same on every machine."""

    def __init__(self, limit: float = math.inf):
        self.limit, self.used, self.spent = limit, 0, False

    def charge(self, work: int) -> bool:
        """Take ``work`` units; False (and ``spent``) when they would overrun the limit."""
        if self.spent or self.used + work > self.limit:
            self.spent = True
            return False
        self.used += work
        return True


def inline_rules(grammar: Grammar, always: Callable[[Rule], bool] | None = None,
                 budget: Budget | None = None) -> tuple[Grammar, list[str]]:
    """Inline every rule whose inlining does not increase κ, and every (unpinned,
    non-recursive) rule of κ ≤ ``ALWAYS_MAX_KAPPA`` for which ``always(rule)`` holds whatever
    κ says; return the grammar and the inlined names (in order). Rounds to a fixpoint: a rule visited before the
    rules it names were inlined into it (a leaf only afterwards) gets its second look.
    With a ``budget``, it stops at the first candidate that would overrun it, keeping the
    inlinings made so far (each preserves the language); ``budget.spent`` says so."""
    inlined: list[str] = []
    budget = budget or Budget()
    while not budget.spent:
        grammar, names = _inline_round(grammar, always, budget)
        if not names:
            break
        inlined += names
    return grammar, inlined


def _depth(known: dict[str, int], name: str, rule: Rule) -> int:
    """``depth(rule.body)``, remembered in ``known`` under ``name``."""
    d = known.get(name)
    if d is None:
        d = known[name] = depth(rule.body)
    return d


def _inline_round(grammar: Grammar, always: Callable[[Rule], bool] | None,
                  budget: Budget) -> tuple[Grammar, list[str]]:
    pinned = {grammar.start} | {a for d in grammar.directives for a in d.args}
    for r in grammar.rules:
        if r.lookahead is not None:
            pinned.update(refs(r.lookahead))
            pinned.add(r.name)
        if r.aliases or r.flags or r.priority is not None:
            pinned.add(r.name)
    rules = {r.name: r for r in grammar.rules}
    kap = {n: rule_kappa(r, grammar.dialect) for n, r in rules.items()}
    users_of: dict[str, dict[str, None]] = {}
    for n, r in rules.items():
        for m in refs(r.body):
            users_of.setdefault(m, {})[n] = None
    deep: dict[str, int] = {}  # depth of the current body of a rule, when known
    inlined: list[str] = []
    for name in list(rules):
        if name in pinned or name not in rules or _self_recursive(rules[name]):
            continue
        body = rules[name].body
        users = [u for u in list(users_of.get(name, ())) if u in rules and u != name]
        if not budget.charge(kap[name] + sum(kap[u] for u in users)):
            break

        def sub(e, body=body, name=name):
            if isinstance(e, Ref) and e.name == name:
                return body
            return e

        new = {}
        for u in users:
            b = transform(rules[u].body, sub)
            new[u] = replace(rules[u], body=b)
        # a reference at depth d replaced by a body of depth k nests at most d + k - 1 deep:
        # the exact depth is needed only where that bound is over the limit
        if any(_depth(deep, u, rules[u]) + _depth(deep, name, rules[name]) - 1 > MAX_PASS_DEPTH
               and depth(r.body) > MAX_PASS_DEPTH for u, r in new.items()):
            continue
        delta = sum(rule_kappa(r, grammar.dialect) - kap[u] for u, r in new.items()) - kap[name]
        if delta <= 0 or (always is not None and kap[name] <= ALWAYS_MAX_KAPPA and always(rules[name])):
            for u, r in new.items():
                rules[u] = r
                kap[u] = rule_kappa(r, grammar.dialect)
                deep.pop(u, None)
                for m in refs(body):  # u now uses what the inlined body used
                    users_of.setdefault(m, {})[u] = None
            del rules[name]
            inlined.append(name)
    if not inlined:
        return grammar, []
    return grammar.replace_rules(rules[r.name] for r in grammar.rules if r.name in rules), inlined
