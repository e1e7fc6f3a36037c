"""Inlining of non-start rules where κ says it pays (after extraction).

    # S ::= "a" B "c" ;  B ::= "b" "b"        -->   S ::= "a" "b" "b" "c"

Why it preserves the language: replacing a reference to a non-recursive rule B by B's
body replaces one derivation step B ⇒ body by the body in place; the derivations of the
start rule are in bijection. A rule is inlined only when it is not the start rule, does not
refer to itself (mutual recursion is fine: unfolding B in A's body keeps the least
fixpoint, and only shortens the cycle), is not pinned (``Rule.pinned``: a lookahead, an engine
macro) nor used by a pinned rule (whose body stays as written), has no Lark alias/flag, is not
named by a directive or a lookahead, whose inlining leaves every body at most ``MAX_PASS_DEPTH`` deep (a chain of
1,000 rules would otherwise nest 1,000 deep), and the exact κ change (computed per rule over the canonical BNF — κ is a sum
over rules, plus 1) is ≤ 0: ties go to fewer rules.

Rules forced in by ``always`` (a target's policy: gramopt's Earley runtime wants leaf rules
inlined) are inlined whatever κ says only while their body is at most ``ALWAYS_MAX_KAPPA``:
a leaf's body names no rule, so inlining it never multiplies references, and each of the
grammar's references is replaced by at most ``ALWAYS_MAX_KAPPA`` states — the growth is
linear in the input. Without the cap a rule that *became* a leaf (its callees inlined) was
inlined again, a non-recursive subgrammar unfolded into one tree: NLTK's commandtalk went
from κ 94,754 to 5,728,392 in 100 s before the budget stopped it.

The κ change of a trial is counted, not measured by rewriting every user (``uses_in``,
``inline_delta``): κ is affine in the symbols and helper states of each reference's place,
so replacing every ``Ref(B)`` in a body changes its κ by Σ weight·(symbols(B) − 1) +
helpers(B) over the occurrences, less ``SPLICE_SAVING`` where an alternation is spliced
into an alternation. The figure equals the rewrite's (tests/test_inline_cost.py checks it
against the rewrite, and the whole pass against one that rewrites every user); where the
counts cannot say (a body the smart constructors would reshape, an ε body) the user is
rewritten and counted as before. The users are rewritten only when B is inlined.

The pass has a work budget (``Budget``: κ of the bodies it rewrites); when spent it stops
and keeps what it inlined so far.

In the e-graph a reference and its rule's body are already one class, so the extractor
sees every inlined form; this pass only decides, with the exact figure, which rule classes
are worth a name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from ..costmodels.kappa import HELPER, expr_syms, rule_kappa
from ..grammar.dialects import token_atoms
from ..grammar import (MAX_PASS_DEPTH, Alt, CharClass, Epsilon, Expr, Grammar, Literal, Ref, Repeat, Rule, Seq,
                       depth, refs, transform)
from .fixpoint import fixpoint


def is_leaf(rule: Rule) -> bool:
    """A rule whose body names no rule: regular, and a place where an Earley parser
    completes back into every caller (gramopt's runtime: inlining `ws ::= [ \\t\\n]*` into
    xgrammar's JSON grammar took its p95 mask time from 182 µs back to 25 µs)."""
    return not refs(rule.body)


ALWAYS_MAX_KAPPA = 128  # the corpus's largest original shared leaf: llama.cpp's schema `space`, 127


INLINE_BY_KAPPA = "kappa"   # inline a rule where the exact κ does not grow
INLINE_LEAVES = "leaves"    # also every leaf rule (names no rule), whatever κ says
INLINE_NONE = "none"        # keep every rule
INLINE_LEXICAL = "lexical"  # by κ, only rules that are no lexeme of llguidance (``keeps_lexemes``)
"""The inlining policies a target chooses (``Target.inlining``; the ``inline`` pass reads them)."""


def keeps_lexemes(grammar: Grammar) -> Callable[[Rule], bool]:
    """Whether inlining a rule into its users leaves llguidance's lexemes as they are: the
    rule is not lexical (``grammar.analysis.lexical_rules``: llguidance's GBNF reader makes
    each lexical rule one greedy lexeme; a non-lexical rule's users name it, so they are not
    lexical either, and its literals were lexemes of their own already), or its body is one
    literal or one class (written in place it is one lexeme of the same language). A lexical
    rule inlined into a non-lexical user is what moves llguidance's lexer: its one greedy
    lexeme becomes a sequence of smaller ones (``item ::= "- " [^\n]+ "\n"`` inlined into
    ``root ::= item+``: 250x slower there). Into a lexical user it keeps the masks but makes
    a larger lexeme, which the llguidance cost model prices higher (1.36x on an obfuscated
    BFCL grammar, where the guard then kept the input without its redundancy): not done. Each allowed inlining
    leaves every other rule as lexical as it was (a lexical user names only lexical rules
    still; a non-lexical user still names a non-lexical rule, or itself), so the set taken
    from ``grammar`` once holds for the whole pass."""
    from ..grammar.analysis import lexical_rules
    lexical = lexical_rules(grammar)

    def may(rule: Rule) -> bool:
        return rule.name not in lexical or isinstance(rule.body, (Literal, CharClass))
    return may


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
                 budget: Budget | None = None,
                 may: Callable[[Rule], bool] | None = None) -> tuple[Grammar, list[str]]:
    """Inline every rule whose inlining does not increase κ, and every (unpinned,
    non-recursive) rule of κ ≤ ``ALWAYS_MAX_KAPPA`` for which ``always(rule)`` holds whatever
    κ says, never a rule for which ``may(rule)`` is false; return the grammar and
    the inlined names (in order). Rounds to a fixpoint
    (``transforms.fixpoint``): a rule visited before the rules it names were inlined into it (a
    leaf only afterwards) gets its second look.
    With a ``budget``, it stops at the first candidate that would overrun it, keeping the
    inlinings made so far (each preserves the language); ``budget.spent`` says so."""
    inlined: list[str] = []
    budget = budget or Budget()

    def round_(g: Grammar) -> Grammar:
        if budget.spent:
            return g
        g, names = _inline_round(g, always, budget, may)
        inlined.extend(names)
        return g

    # a round that inlines a rule drops it, so rounds that change the grammar number at most its rules
    return fixpoint(round_, grammar, len(grammar.rules) + 1), inlined


SPLICE_SAVING = HELPER + 2
"""κ an alternation body saves where it is spliced into an alternation (``a | B`` with
``B ::= b | c`` gives ``a | b | c``): the nested helper's entry and exit states and the
production slot ``… → N`` it would have taken (one symbol, one end state)."""


@dataclass(frozen=True, slots=True)
class Uses:
    """What the κ of a rule body owes to its references (``uses_in``): per referenced
    name, ``[weight, count, spliced]`` — the sum over its occurrences of ∂κ/∂(symbols put
    there), how many occurrences, and how many sit where an alternation would be spliced
    in (an alternative of an ``Alt``, or the whole body). ``depth`` is the body's
    ``depth``; ``normal`` says the body is as the smart constructors build it (no ``Seq``
    holding a ``Seq`` or ε, no ``Alt`` holding an ``Alt``, every one of at least two items
    in a tuple), the condition under which ``transform`` rebuilds nothing but the paths to
    the references it replaces."""

    body: Expr
    refs: dict[str, list[int]]
    depth: int
    normal: bool


def uses_in(body: Expr) -> Uses:
    """``Uses`` of ``body``, in one walk. The weights follow the κ table
    (``costmodels.kappa``): κ is affine in the (symbols, helper states) of every node, a
    node's helper states count once whatever its context, and its symbols with a weight
    set by its ancestors up to the nearest alternation or the top (weight 1 there: every
    alternative is a production). A sequence passes its own weight w to its items; ``x{lo}``
    gives x the weight w·lo, ``x{lo,lo+k}`` w·lo + k (k helper productions hold x once
    each), ``x{lo,}`` with lo ≥ 1 w·(lo − 1) + 2, ``x*`` 1 (its helper's production)."""
    refs_: dict[str, list[int]] = {}
    normal, deepest = True, 0
    stack: list[tuple[Expr, int, bool, int]] = [(body, 1, True, 1)]
    while stack:
        node, weight, spliced, d = stack.pop()
        if d > deepest:
            deepest = d
        if isinstance(node, Ref):
            u = refs_.get(node.name)
            if u is None:
                refs_[node.name] = [weight, 1, int(spliced)]
            else:
                u[0] += weight
                u[1] += 1
                u[2] += spliced
        elif isinstance(node, Seq):
            items = node.items
            if type(items) is not tuple or len(items) < 2:
                normal = False
            for i in items:
                if isinstance(i, (Seq, Epsilon)):
                    normal = False
                stack.append((i, weight, False, d + 1))
        elif isinstance(node, Alt):
            items = node.items
            if type(items) is not tuple or len(items) < 2:
                normal = False
            for i in items:
                if isinstance(i, Alt):
                    normal = False
                stack.append((i, 1, True, d + 1))
        elif isinstance(node, Repeat):
            lo, hi = node.min, node.max
            if hi is None:
                w = 1 if lo == 0 else weight * (lo - 1) + 2
            else:
                w = weight * lo + (hi - lo)
            stack.append((node.item, w, False, d + 1))
    return Uses(body, refs_, deepest, normal)


def inline_delta(uses: Uses, name: str, body: Expr, syms: tuple[int, int]) -> int | None:
    """κ(the body of ``uses`` with every ``Ref(name)`` replaced by ``body``, as ``transform``
    rebuilds it) − κ(as it is), computed from the counts alone: each occurrence changes the
    symbols of its place from 1 to those of ``body`` (times its weight) and adds ``body``'s
    helper states (``syms``: ``expr_syms(body)``), less ``SPLICE_SAVING`` where an
    alternation body is spliced in. None where the figure is not exact: a body that is not
    ``normal`` (``transform`` would reshape more than the references' places), or an ε
    ``body`` (dropping it from a sequence can leave a lone alternation that its parent
    splices)."""
    if not uses.normal or isinstance(body, Epsilon):
        return None
    u = uses.refs.get(name)
    if u is None:
        return 0
    weight, count, spliced = u
    n, h = syms
    return weight * (n - 1) + count * h - (spliced * SPLICE_SAVING if isinstance(body, Alt) else 0)


def _substituted(rule: Rule, sub: Callable[[Expr], Expr]) -> Rule:
    """``rule`` with ``sub`` applied to its body; a Lark rule's ``-> alias`` names stay with
    their top-level alternatives (an inlined alternation spliced there carries the alias of
    the alternative it replaced: ``(b | c) -> x`` is ``b -> x | c -> x`` to Lark)."""
    if not any(rule.aliases):
        return replace(rule, body=transform(rule.body, sub))
    from .cleanup.common import alternatives, keep_alternatives
    return keep_alternatives(rule, [transform(a, sub) for a in alternatives(rule.body)])


def _inline_round(grammar: Grammar, always: Callable[[Rule], bool] | None,
                  budget: Budget, may: Callable[[Rule], bool] | None = None) -> tuple[Grammar, list[str]]:
    """One pass over the rules in order. A candidate's trial costs one look-up per user
    (``inline_delta`` on each user's ``Uses``, remembered until that user changes); the
    users are rewritten only when it is inlined (or, rarely, to measure an exact depth or
    a κ the counts do not give)."""
    lark = token_atoms(grammar.dialect)
    pinned = {grammar.start} | {a for d in grammar.directives for a in d.args}
    frozen = {r.name for r in grammar.rules if r.pinned}  # kept as written: nothing inlined into them
    pinned |= frozen
    for r in grammar.rules:
        if r.lookahead is not None:
            pinned.update(refs(r.lookahead))
        if r.aliases or r.flags or r.priority is not None:
            pinned.add(r.name)
    rules = {r.name: r for r in grammar.rules}
    kap = {n: rule_kappa(r, grammar.dialect) for n, r in rules.items()}
    known = {n: uses_in(r.body) for n, r in rules.items()}  # uses_in of a rule's current body

    def uses(n: str) -> Uses:
        hit = known[n]
        if hit.body is not rules[n].body:
            hit = known[n] = uses_in(rules[n].body)
        return hit

    users_of: dict[str, dict[str, None]] = {}
    for n in rules:
        for m in known[n].refs:
            users_of.setdefault(m, {})[n] = None

    inlined: list[str] = []
    for name in list(rules):
        if name in pinned or name not in rules or name in uses(name).refs:  # (self-recursive)
            continue
        body = rules[name].body
        users = [u for u in list(users_of.get(name, ())) if u in rules and u != name]
        if frozen.intersection(users) or (may is not None and not may(rules[name])):
            continue
        if not budget.charge(kap[name] + sum(kap[u] for u in users)):
            break

        def sub(e, body=body, name=name):
            if isinstance(e, Ref) and e.name == name:
                return body
            return e

        new: dict[str, Rule] = {}  # users rewritten so far

        def rewritten(u: str) -> Rule:
            r = new.get(u)
            if r is None:
                r = new[u] = _substituted(rules[u], sub)
            return r

        deltas, syms = {}, expr_syms(body, lark)
        for u in users:
            d = inline_delta(uses(u), name, body, syms)
            deltas[u] = rule_kappa(rewritten(u), grammar.dialect) - kap[u] if d is None else d
        # a reference at depth d replaced by a body of depth k nests at most d + k - 1 deep:
        # the exact depth is needed only where that bound is over the limit
        k = uses(name).depth
        if any(uses(u).depth + k - 1 > MAX_PASS_DEPTH and depth(rewritten(u).body) > MAX_PASS_DEPTH
               for u in users):
            continue
        delta = sum(deltas.values()) - kap[name]
        if delta <= 0 or (always is not None and kap[name] <= ALWAYS_MAX_KAPPA and always(rules[name])):
            used = uses(name).refs  # each user now uses what the inlined body used
            for u in users:
                rules[u] = rewritten(u)
                kap[u] += deltas[u]
                for m in used:
                    users_of.setdefault(m, {})[u] = None
            del rules[name]
            inlined.append(name)
    if not inlined:
        return grammar, []
    return grammar.replace_rules(rules[r.name] for r in grammar.rules if r.name in rules), inlined
