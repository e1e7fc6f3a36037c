"""κ(G): the control-state count of a grammar.

    κ(G) = 1 + 2|N| + Σ_p (|rhs(p)| + 1)

over the canonical BNF productions (``gramopt.grammar.bnf``): one state per dot position
of every production, an entry and an exit state per nonterminal, plus one start state.
How EBNF constructs count follows from the lowering table in ``bnf.py``:

* a literal of k code points is k terminal symbols ("abc" adds 3 to its production);
  in Lark a literal is one anonymous token (adds 1);
* a character class, however many ranges, is one terminal symbol (adds 1);
* ``x*`` adds a helper N → N x | ε: 2 (N) + (|x|+2) + 1, plus 1 for N's use;
  ``x+`` likewise with N → N x | x; ``x?`` adds N → x | ε; ``x{m,n}`` copies x m times
  and adds n−m nested optional helpers;
* a nested alternation ``( … | … )`` adds a helper with one production per alternative.

Exact facts (tests): G1 = {S → a S b | ε} has κ 8; G2 = {S → a A b | ε, A → a A b | ε} has κ 15.

The table (one home: ``rule_kappa`` and the extractor's node cost, ``egraph.extract.NodeCost``,
both read it; ``tests/test_kappa.py`` checks it against the lowering of ``grammar/bnf.py``).
Each construct puts ``symbols`` on its parent's right-hand side and adds ``helper`` states
(its helper nonterminals' entry/exit states and productions); x is the item's symbols::

    construct       symbols        helper states
    "abc"           3 (Lark: 1)    0
    [a-z], TERM     1              0
    ( e1 | … | ek ) 1              HELPER + Σ (|ei| + 1)           N → e1 | … | ek
    x*              1              HELPER + (x + 2) + 1            N → N x | ε
    x{m,} (m ≥ 1)   x(m−1) + 1     HELPER + (x + 2) + (x + 1)      N → N x | x
    x{m,n} (n > m)  x·m + 1        k(x + 5) − 1, k = n − m          O1 → x O2 | ε … Ok → x | ε
    x{m}            x·m            0
"""

from __future__ import annotations

from functools import lru_cache

from ..grammar import BNF, Alt, Epsilon, Grammar, Literal, Repeat, Rule, Seq, lower
from ..grammar.dialects import token_atoms
from ..grammar.memo import forgotten


HELPER = 2  # a nonterminal's entry and exit states


def literal_kappa(length: int, lark: bool) -> int:
    """Symbols of a literal of ``length`` code points (a Lark literal is one token)."""
    return 1 if lark else length


def alt_kappa(items) -> tuple[int, float]:
    """(symbols, helper states) of a nested alternation of items given as (symbols, helpers)."""
    return 1, HELPER + sum(n + 1 + h for n, h in items)


def repeat_kappa(x: float, lo: int, hi: int | None, h: float = 0) -> tuple[float, float]:
    """(symbols, helper states) of ``item{lo,hi}`` (hi None: unbounded) whose item puts ``x``
    symbols on a right-hand side and adds ``h`` helper states of its own."""
    if hi is None:
        if lo == 0:
            return 1, h + HELPER + (x + 2) + 1
        return x * (lo - 1) + 1, h + HELPER + (x + 2) + (x + 1)
    k = hi - lo
    if k == 0:
        return x * lo, h
    return x * lo + 1, h + k * (x + 5) - 1


def kappa_of_bnf(bnf: BNF) -> int:
    return 1 + 2 * len(bnf.nonterminals) + sum(len(p.rhs) + 1 for p in bnf.productions)


def kappa(grammar: Grammar) -> int:
    """κ of ``grammar`` over its canonical BNF lowering, counted rule by rule from the table
    (``rule_kappa``: equal to ``kappa_of_bnf(lower(grammar))``, which the tests check)
    without building the BNF: a 10,000-rule grammar's lowering took a second per call, and
    ``x{4,32767}`` lowers to 65,000 productions."""
    return 1 + sum(rule_kappa(r, grammar.dialect) for r in grammar.rules)


def expr_syms(e, lark: bool = False, memo: dict | None = None) -> tuple[int, int]:
    """(symbols ``e`` puts on the right-hand side it sits in, states of the helper
    nonterminals it creates) under the canonical lowering (``gramopt.grammar.bnf``), read
    from the table above. ``memo`` (a dict the caller keeps for a while) remembers composite
    nodes by identity — each entry holds its node, so an id is never reused while it is in
    the memo — for a caller that scores nested pieces again and again (factoring's trie)."""
    if memo is None or not isinstance(e, (Seq, Alt, Repeat)):
        return _expr_syms(e, lark, memo)
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    out = _expr_syms(e, lark, memo)
    memo[id(e)] = (e, out)
    return out


def _expr_syms(e, lark: bool, memo: dict | None) -> tuple[int, int]:
    if isinstance(e, Epsilon):
        return 0, 0
    if isinstance(e, Literal):
        return literal_kappa(len(e.text), lark), 0
    if isinstance(e, Seq):
        n = h = 0
        for i in e.items:
            a, b = expr_syms(i, lark, memo)
            n, h = n + a, h + b
        return n, h
    if isinstance(e, Alt):
        return alt_kappa(expr_syms(i, lark, memo) for i in e.items)
    if isinstance(e, Repeat):
        x, h = expr_syms(e.item, lark, memo)
        return repeat_kappa(x, e.min, e.max, h)
    return 1, 0


def rule_kappa(rule: Rule, dialect: str) -> int:
    """κ contributed by one rule (its nonterminals' entry/exit states and productions),
    counted directly by the table in ``gramopt.grammar.bnf`` (cross-checked against
    ``kappa`` in the tests): κ(G) = 1 + Σ_rules rule_kappa. No BNF is built: cheap enough for a
    pass to score every candidate rewrite of a rule. A function of the body and of whether
    atoms are tokens alone, remembered per body (``_body_kappa``): the pipeline scores every
    rule of a grammar before and after each pass, and a pass changes few of them (10,000
    rules: 132,000 calls per optimization)."""
    return _body_kappa(rule.body, token_atoms(dialect))


@forgotten  # between a batch's items
@lru_cache(maxsize=1 << 16)
def _body_kappa(body, lark: bool) -> int:
    alts = body.items if isinstance(body, Alt) else (body,)
    total = HELPER
    for a in alts:
        n, h = expr_syms(a, lark)
        total += n + 1 + h
    return total
