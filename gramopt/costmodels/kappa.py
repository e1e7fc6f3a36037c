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

from ..grammar import BNF, Grammar, lower


def kappa_of_bnf(bnf: BNF) -> int:
    return 1 + 2 * len(bnf.nonterminals) + sum(len(p.rhs) + 1 for p in bnf.productions)


def kappa(grammar: Grammar) -> int:
    """κ of ``grammar`` over its canonical BNF lowering."""
    return kappa_of_bnf(lower(grammar))
