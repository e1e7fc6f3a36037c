"""The canonical BNF lowering: EBNF rules → plain productions.

κ, the structural analyses and both recognizers read this form, so every figure they
report is reproducible from the table below. Symbols on a right-hand side are IR atoms:
``Ref(name)`` for a nonterminal, and for terminals a ``CharClass`` (one code point),
``Terminal`` or ``Regex`` (Lark lexer atoms).

    construct in rule A            productions (N, N1… are fresh helper nonterminals)
    -----------------------------  ----------------------------------------------------
    A ::= e1 | … | ek              one production A → lower(ei) per top-level alternative
    e1 e2 … (sequence)             concatenation of the lowered items (no helper)
    "abc" (literal, GBNF/EBNF)     3 terminal symbols [a] [b] [c]: one per code point
    "abc" (literal, Lark)          1 terminal symbol: an anonymous lexer token
    [a-z] / [^"] (char class)      1 terminal symbol
    TERM, /re/ (Lark)              1 terminal symbol
    "" (epsilon)                   nothing (an empty right-hand side where alone)
    ( e1 | … | ek ) nested         N, with N → lower(ei) for each i
    x?                             N → x | ε
    x*                             N → N x | ε           (left recursive, as Lark does)
    x+                             N → N x | x
    x{m,}   (m ≥ 2)                x^(m-1) N  with N → N x | x
    x{m,n}  (n > m)                x^m O1, O1 → x O2 | ε, …, O(n-m) → x | ε
    x{m}                           x^m
    (= lookahead) assertion        nothing: a hint, not part of the language

where ``x`` stands for the lowered symbols of the repeated item itself (a nested
alternation inside it first becomes a helper of its own). Helper names are
``A#1, A#2, …`` in order of appearance, so a grammar always lowers to the same BNF.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import char, Alt, CharClass, Epsilon, Expr, Literal, Ref, Regex, Repeat, Seq, Terminal
from .grammar import Grammar
from .dialects import token_atoms
from .size import check_size

Symbol = Ref | CharClass | Terminal | Regex | Literal  # Literal only as a Lark token


@dataclass(frozen=True, slots=True)
class Production:
    lhs: str
    rhs: tuple[Symbol, ...]


@dataclass(frozen=True)
class BNF:
    """Plain productions; ``nonterminals`` lists user rules first, then helpers.
    ``origin[n]`` is the user rule a nonterminal came from (itself for user rules)."""

    start: str
    nonterminals: tuple[str, ...]
    productions: tuple[Production, ...]
    origin: dict[str, str]

    def by_lhs(self) -> dict[str, list[Production]]:
        out: dict[str, list[Production]] = {n: [] for n in self.nonterminals}
        for p in self.productions:
            out[p.lhs].append(p)
        return out


def lower(grammar: Grammar) -> BNF:
    """The canonical BNF of ``grammar`` (see the module docstring for the table).
    Raises GrammarError when its repetitions expand past ``size.MAX_EXPANDED``."""
    check_size(grammar)
    lark_tokens = token_atoms(grammar.dialect)
    nonterminals: list[str] = [r.name for r in grammar.rules]
    productions: list[Production] = []
    origin = {n: n for n in nonterminals}

    for rule in grammar.rules:
        counter = [0]

        def fresh() -> str:
            counter[0] += 1
            name = f"{rule.name}#{counter[0]}"
            nonterminals.append(name)
            origin[name] = rule.name
            return name

        def symbols(e: Expr) -> list[Symbol]:
            """The symbols ``e`` contributes to a right-hand side."""
            if isinstance(e, Epsilon):
                return []
            if isinstance(e, Literal):
                if lark_tokens:
                    return [e]
                return [char(c) for c in e.text]
            if isinstance(e, (CharClass, Terminal, Regex, Ref)):
                return [e]
            if isinstance(e, Seq):
                return [s for item in e.items for s in symbols(item)]
            if isinstance(e, Alt):
                n = fresh()
                for item in e.items:
                    productions.append(Production(n, tuple(symbols(item))))
                return [Ref(n)]
            if isinstance(e, Repeat):
                return repeat(e)
            raise TypeError(f"cannot lower {e!r}")

        def repeat(e: Repeat) -> list[Symbol]:
            x = symbols(e.item)
            lo, hi = e.min, e.max
            if hi is None:
                if lo == 0:  # x*  →  N → N x | ε
                    n = fresh()
                    productions.append(Production(n, (Ref(n), *x)))
                    productions.append(Production(n, ()))
                    return [Ref(n)]
                n = fresh()  # x{m,} → x^(m-1) N,  N → N x | x
                productions.append(Production(n, (Ref(n), *x)))
                productions.append(Production(n, tuple(x)))
                return x * (lo - 1) + [Ref(n)]
            out = x * lo
            if hi > lo:  # x^m O1, O1 → x O2 | ε, …, O(n-m) → x | ε
                names = [fresh() for _ in range(hi - lo)]
                for i, n in enumerate(names):
                    tail = (Ref(names[i + 1]),) if i + 1 < len(names) else ()
                    productions.append(Production(n, (*x, *tail)))
                    productions.append(Production(n, ()))
                out = out + [Ref(names[0])]
            return out

        body = rule.body
        for alternative in (body.items if isinstance(body, Alt) else (body,)):
            productions.append(Production(rule.name, tuple(symbols(alternative))))

    # Productions of a rule first, helpers after, each group in creation order.
    order = {n: i for i, n in enumerate(nonterminals)}
    productions.sort(key=lambda p: order[p.lhs])
    return BNF(grammar.start, tuple(nonterminals), tuple(productions), origin)
