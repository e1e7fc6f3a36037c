"""How large a grammar becomes once its repetitions are expanded, without expanding them.

    expanded_size(expr, dialect) -> int      symbols of ``expr`` with every x{m,n} copied out
    check_size(grammar, limit=MAX_EXPANDED)  GrammarError naming the rule when over ``limit``

Every consumer of a grammar that expands ``x{m,n}`` into copies — the canonical BNF
(``bnf.lower``: κ, the analyses, the verifier), gramopt's runtime (``runtime.compile``), and
the engines themselves (llama.cpp refuses repetitions above a few thousand) — is at most
linear in this figure, so checking it first bounds their time and memory: 26 bytes of
``root ::= "a"{0,100000000}`` are refused at once instead of growing to gigabytes.

The figure counts a literal's code points (one token for Lark), one per other atom, sums
over sequences and alternatives, and a repetition as ``max(m, n, 1)`` copies of its item
(an unbounded one as ``m + 1``), so nested repetitions multiply: ``(("a"{0,1000}){0,1000})``
is 10⁶. It is an upper bound of what the BNF lowering builds (which shares a nested
repetition's helper rules) and exactly what the runtime's automaton builder copies.
"""

from __future__ import annotations

from .expr import Alt, Epsilon, Expr, Literal, Repeat, Seq
from .grammar import Grammar, GrammarError
from .dialects import token_atoms

MAX_EXPANDED = 4_000_000  # symbols; the 50,000-word enums of real catalogs are ~400,000


def expanded_size(expr: Expr, dialect: str = "ebnf") -> int:
    """Symbols of ``expr`` once every repetition is copied out (module docstring)."""
    if isinstance(expr, Epsilon):
        return 0
    if isinstance(expr, Literal):
        return 1 if token_atoms(dialect) else len(expr.text)
    if isinstance(expr, (Seq, Alt)):
        return sum(expanded_size(e, dialect) for e in expr.items)
    if isinstance(expr, Repeat):
        copies = max(expr.min + 1 if expr.max is None else expr.max, 1)
        return copies * expanded_size(expr.item, dialect)
    return 1


def grammar_size(grammar: Grammar) -> int:
    """Expanded size of every rule and lookahead of ``grammar``, summed."""
    total = 0
    for r in (*grammar.rules, *grammar.terminals):
        total += expanded_size(r.body, grammar.dialect)
        if r.lookahead is not None:
            total += expanded_size(r.lookahead, grammar.dialect)
    return total


def check_size(grammar: Grammar, limit: int = MAX_EXPANDED) -> Grammar:
    """``grammar`` itself when its expanded size is at most ``limit``; else a GrammarError
    at the largest rule, saying what to do instead."""
    total, worst, worst_size = 0, None, -1
    for r in (*grammar.rules, *grammar.terminals):
        n = expanded_size(r.body, grammar.dialect)
        if r.lookahead is not None:
            n += expanded_size(r.lookahead, grammar.dialect)
        total += n
        if n > worst_size:
            worst, worst_size = r, n
    if total > limit:
        raise GrammarError(
            f"rule '{worst.name}' expands to {worst_size:,} symbols once its repetitions are "
            f"copied out (the grammar to {total:,}); gramopt's limit is {limit:,}: write large "
            f"counts as x* or x+ with a smaller bound", worst.pos)
    return grammar
