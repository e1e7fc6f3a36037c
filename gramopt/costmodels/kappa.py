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
"""

from __future__ import annotations

from ..grammar import BNF, Alt, Epsilon, Grammar, Literal, Repeat, Rule, Seq, lower


def kappa_of_bnf(bnf: BNF) -> int:
    return 1 + 2 * len(bnf.nonterminals) + sum(len(p.rhs) + 1 for p in bnf.productions)


def kappa(grammar: Grammar) -> int:
    """κ of ``grammar`` over its canonical BNF lowering."""
    return kappa_of_bnf(lower(grammar))


def expr_syms(e, lark: bool = False) -> tuple[int, int]:
    """(symbols ``e`` puts on the right-hand side it sits in, states of the helper
    nonterminals it creates) under the canonical lowering (``gramopt.grammar.bnf``)."""
    if isinstance(e, Epsilon):
        return 0, 0
    if isinstance(e, Literal):
        return (1 if lark else len(e.text)), 0
    if isinstance(e, Seq):
        n = h = 0
        for i in e.items:
            a, b = expr_syms(i, lark)
            n, h = n + a, h + b
        return n, h
    if isinstance(e, Alt):
        h = 2
        for i in e.items:
            a, b = expr_syms(i, lark)
            h += a + 1 + b
        return 1, h
    if isinstance(e, Repeat):
        x, h = expr_syms(e.item, lark)
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


def rule_kappa(rule: Rule, dialect: str) -> int:
    """κ contributed by one rule (its nonterminals' entry/exit states and productions),
    counted directly by the table in ``gramopt.grammar.bnf`` (cross-checked against
    ``kappa`` in the tests): κ(G) = 1 + Σ_rules rule_kappa. No BNF is built: cheap enough for a
    pass to score every candidate rewrite of a rule."""
    lark = dialect == "lark"
    alts = rule.body.items if isinstance(rule.body, Alt) else (rule.body,)
    total = 2
    for a in alts:
        n, h = expr_syms(a, lark)
        total += n + 1 + h
    return total
