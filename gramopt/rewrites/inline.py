"""Inlining of non-start rules where κ says it pays (after extraction).

    # S ::= "a" B "c" ;  B ::= "b" "b"        -->   S ::= "a" "b" "b" "c"

Why it preserves the language: replacing a reference to a non-recursive rule B by B's
body replaces one derivation step B ⇒ body by the body in place; the derivations of the
start rule are in bijection. A rule is inlined only when it is not the start rule, does not
refer to itself (mutual recursion is fine: unfolding B in A's body keeps the least
fixpoint, and only shortens the cycle), has no lookahead or Lark alias/flag, is not named by a directive or a
lookahead, and the exact κ change (computed per rule over the canonical BNF — κ is a sum
over rules, plus 1) is ≤ 0: ties go to fewer rules.

In the e-graph a reference and its rule's body are already one class, so the extractor
sees every inlined form; this pass only decides, with the exact figure, which rule classes
are worth a name.
"""

from __future__ import annotations

from dataclasses import replace

from ..grammar import Alt, Epsilon, Grammar, Literal, Ref, Repeat, Rule, Seq, refs, transform


def rule_kappa(rule: Rule, dialect: str) -> int:
    """κ contributed by one rule (its nonterminals' entry/exit states and productions),
    counted directly by the table in ``gramopt.grammar.bnf`` (cross-checked against
    ``kappa`` in the tests): κ(G) = 1 + Σ_rules rule_kappa."""
    lark = dialect == "lark"

    def syms(e) -> tuple[int, int]:  # (symbols on the right-hand side, helper states)
        if isinstance(e, Epsilon):
            return 0, 0
        if isinstance(e, Literal):
            return (1 if lark else len(e.text)), 0
        if isinstance(e, Seq):
            n = h = 0
            for i in e.items:
                a, b = syms(i)
                n, h = n + a, h + b
            return n, h
        if isinstance(e, Alt):
            h = 2
            for i in e.items:
                a, b = syms(i)
                h += a + 1 + b
            return 1, h
        if isinstance(e, Repeat):
            x, h = syms(e.item)
            lo, hi = e.min, e.max
            if hi is None:
                if lo == 0:
                    return 1, h + x + 5
                return x * (lo - 1) + 1, h + 2 * x + 5
            k = hi - lo
            if k == 0:
                return x * lo, h
            return x * lo + 1, h + k * (x + 5) - 1
        return 1, 0

    alts = rule.body.items if isinstance(rule.body, Alt) else (rule.body,)
    total = 2
    for a in alts:
        n, h = syms(a)
        total += n + 1 + h
    return total


def _self_recursive(rule: Rule) -> bool:
    return rule.name in refs(rule.body)


def inline_rules(grammar: Grammar) -> tuple[Grammar, list[str]]:
    """Inline every rule whose inlining does not increase κ; return the grammar and the
    inlined names (in order)."""
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
    inlined: list[str] = []
    for name in list(rules):
        if name in pinned or name not in rules or _self_recursive(rules[name]):
            continue
        body = rules[name].body
        users = [u for u in list(users_of.get(name, ())) if u in rules and u != name]

        def sub(e, body=body, name=name):
            if isinstance(e, Ref) and e.name == name:
                return body
            return e

        new = {}
        for u in users:
            b = transform(rules[u].body, sub)
            new[u] = replace(rules[u], body=b)
        delta = sum(rule_kappa(r, grammar.dialect) - kap[u] for u, r in new.items()) - kap[name]
        if delta <= 0:
            for u, r in new.items():
                rules[u] = r
                kap[u] = rule_kappa(r, grammar.dialect)
                for m in refs(body):  # u now uses what the inlined body used
                    users_of.setdefault(m, {})[u] = None
            del rules[name]
            inlined.append(name)
    if not inlined:
        return grammar, []
    return grammar.replace_rules(rules[r.name] for r in grammar.rules if r.name in rules), inlined
