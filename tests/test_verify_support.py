"""Helpers for the verify tests: grammars built with the IR, a brute-force language
enumerator, an xgrammar-EBNF printer, hypothesis strategies. No tests here.

The brute force is deliberately unlike Earley: least fixpoints of the sets of strings of
length ≤ k each nonterminal of the canonical BNF derives (``sentences``), and of the
prefixes of length ≤ k of those strings (``prefixes``) — over code points, so only for
grammars whose classes are ASCII (then code points are bytes).
"""

from __future__ import annotations

from hypothesis import strategies as st

from gramopt.grammar import (Alt, CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, Seq,
                             alt, lower, seq)
from gramopt.grammar.expr import Expr


def g(*rules: tuple[str, Expr], start: str | None = None) -> Grammar:
    return Grammar(tuple(Rule(n, b) for n, b in rules), start or rules[0][0])


def L(text: str) -> Literal:
    return Literal(text)


def cls(*ranges, negated=False) -> CharClass:
    rs = tuple((ord(a), ord(b)) if isinstance(a, str) else (a, b) for a, b in ranges)
    return CharClass(rs, negated)


R = Ref


# ---------------------------------------------------------------- brute force


def _ascii_bnf(grammar: Grammar):
    bnf = lower(grammar)
    prods = []
    for p in bnf.productions:
        syms = []
        for s in p.rhs:
            if isinstance(s, Ref):
                syms.append(s.name)
            else:
                syms.append(frozenset(bytes([c]) for lo, hi in s.code_points()
                                      for c in range(lo, min(hi, 0x7F) + 1)))
        prods.append((p.lhs, syms))
    return bnf.start, prods


def sentences(grammar: Grammar, k: int) -> dict[str, set[bytes]]:
    """Every nonterminal's strings of length ≤ k (a least fixpoint, terminating because
    the sets are finite)."""
    start, prods = _ascii_bnf(grammar)
    lang: dict[str, set[bytes]] = {}
    changed = True
    while changed:
        changed = False
        for lhs, syms in prods:
            cur = {b""}
            for s in syms:
                right = lang.get(s, set()) if isinstance(s, str) else s
                cur = {x + y for x in cur for y in right if len(x) + len(y) <= k}
                if not cur:
                    break
            mine = lang.setdefault(lhs, set())
            if not cur <= mine:
                mine |= cur
                changed = True
    return lang


def language(grammar: Grammar, k: int) -> set[bytes]:
    return sentences(grammar, k).get(grammar.start, set())


def productive(grammar: Grammar) -> set[str]:
    start, prods = _ascii_bnf(grammar)
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for lhs, syms in prods:
            if lhs not in out and all((s in out) if isinstance(s, str) else bool(s) for s in syms):
                out.add(lhs)
                changed = True
    return out


def prefixes(grammar: Grammar, k: int) -> set[bytes]:
    """Prefixes of length ≤ k of the start rule's strings (of any length): for A → X1…Xn
    with every Xi productive, prefixes are L(X1…Xi-1)·P(Xi), plus ε."""
    start, prods = _ascii_bnf(grammar)
    prod_nts = productive(grammar)
    lang = sentences(grammar, k)
    useful = [(lhs, syms) for lhs, syms in prods
              if all((s in prod_nts) if isinstance(s, str) else bool(s) for s in syms)]
    pre: dict[str, set[bytes]] = {n: {b""} for n in prod_nts}
    changed = True
    while changed:
        changed = False
        for lhs, syms in useful:
            cur = {b""}
            for s in syms:
                p = pre[s] if isinstance(s, str) else s | {b""}
                new = {x + y for x in cur for y in p if len(x) + len(y) <= k}
                if not new <= pre[lhs]:
                    pre[lhs] |= new
                    changed = True
                right = lang.get(s, set()) if isinstance(s, str) else s
                cur = {x + y for x in cur for y in right if len(x) + len(y) <= k}
                if not cur:
                    break
    return pre.get(start, set())


# ---------------------------------------------------------------- xgrammar EBNF printer


def to_ebnf(grammar: Grammar) -> str:
    """xgrammar EBNF; the start rule is printed as ``root``."""
    name = {r.name: ("root" if r.name == grammar.start else f"r_{r.name}") for r in grammar.rules}

    def lit(ch: str) -> str:
        c = ord(ch)
        return ch if 0x20 <= c < 0x7F and ch not in '"\\[]-^' else f"\\U{c:08x}"

    def ex(e: Expr) -> str:
        if isinstance(e, Epsilon):
            return '""'
        if isinstance(e, Literal):
            return '"' + "".join(lit(c) for c in e.text) + '"'
        if isinstance(e, CharClass):
            body = "".join(lit(chr(lo)) if lo == hi else f"{lit(chr(lo))}-{lit(chr(hi))}"
                           for lo, hi in e.ranges)
            return f"[{'^' if e.negated else ''}{body}]"
        if isinstance(e, Ref):
            return name[e.name]
        if isinstance(e, Seq):
            return "(" + " ".join(ex(i) for i in e.items) + ")"
        if isinstance(e, Alt):
            return "(" + " | ".join(ex(i) for i in e.items) + ")"
        if isinstance(e, Repeat):
            hi = "" if e.max is None else str(e.max)
            return f"({ex(e.item)}){{{e.min},{hi}}}"
        raise TypeError(e)

    return "\n".join(f"{name[r.name]} ::= {ex(r.body)}" for r in grammar.rules) + "\n"


# ---------------------------------------------------------------- JSON by the IR


def json_grammar() -> Grammar:
    """A JSON grammar in the shape of xgrammar's builtin one (multi-byte string chars)."""
    ws = Repeat(cls((" ", " "), ("\n", "\n"), ("\t", "\t")), 0, None)
    return g(
        ("root", R("value")),
        ("value", alt(R("object"), R("array"), R("string"), R("number"), L("true"), L("false"),
                      L("null"))),
        ("object", alt(seq(L("{"), ws, R("string"), ws, L(":"), ws, R("value"),
                           Repeat(seq(ws, L(","), ws, R("string"), ws, L(":"), ws, R("value")), 0, None),
                           ws, L("}")),
                       seq(L("{"), ws, L("}")))),
        ("array", alt(seq(L("["), ws, R("value"), Repeat(seq(ws, L(","), ws, R("value")), 0, None),
                          ws, L("]")),
                      seq(L("["), ws, L("]")))),
        ("string", seq(L('"'), Repeat(R("char"), 0, None), L('"'))),
        ("char", alt(cls(('"', '"'), ("\\", "\\"), (0, 0x1F), negated=True),
                     seq(L("\\"), alt(cls(('"', '"'), ("\\", "\\"), ("/", "/"), ("b", "b"),
                                          ("f", "f"), ("n", "n"), ("r", "r"), ("t", "t")),
                                      seq(L("u"), Repeat(cls(("A", "F"), ("a", "f"), ("0", "9")), 4, 4)))))),
        ("number", seq(Repeat(L("-"), 0, 1), alt(L("0"), seq(cls(("1", "9")), Repeat(cls(("0", "9")), 0, None))),
                       Repeat(seq(L("."), Repeat(cls(("0", "9")), 1, None)), 0, 1),
                       Repeat(seq(cls(("e", "e"), ("E", "E")), Repeat(cls(("+", "+"), ("-", "-")), 0, 1),
                                  Repeat(cls(("0", "9")), 1, None)), 0, 1))),
    )


# ---------------------------------------------------------------- hypothesis


def expr_strategy(names: list[str], alphabet: str = "abc", depth: int = 3):
    leaves = st.one_of(
        st.sampled_from(alphabet).map(Literal),
        st.text(alphabet, min_size=2, max_size=3).map(Literal),
        st.sets(st.sampled_from(alphabet), min_size=1, max_size=len(alphabet)).map(
            lambda s: CharClass(tuple((ord(c), ord(c)) for c in sorted(s)))),
        st.sampled_from(names).map(Ref),
        st.just(Epsilon()),
    )
    if depth == 0:
        return leaves
    sub = expr_strategy(names, alphabet, depth - 1)
    return st.one_of(
        leaves,
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(sub, st.sampled_from([(0, None), (1, None), (0, 1), (1, 2), (2, 2)])).map(
            lambda t: Repeat(t[0], *t[1])),
    )


@st.composite
def grammars(draw, max_rules: int = 3, alphabet: str = "abc", depth: int = 2) -> Grammar:
    n = draw(st.integers(1, max_rules))
    names = [f"R{i}" for i in range(n)]
    bodies = [draw(expr_strategy(names, alphabet, depth)) for _ in names]
    return Grammar(tuple(Rule(nm, b) for nm, b in zip(names, bodies)), names[0])
