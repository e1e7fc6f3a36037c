"""Support for the clean-up pass tests: a tiny grammar notation, a bounded enumerator of
languages, and a hypothesis strategy of small random grammars. Its own tests check the
enumerator on languages known by hand.

Notation (one rule per line, or rules separated by ';'; the first rule is the start):

    S ::= "ab" X | [a-c]* | ("x" | Y)? | "" | X{2,3}
    X ::= [^a] "é"

Literals use Python-style escapes; classes are [...] / [^...] with ranges; "" is ε.
The enumerator works on sequences of symbols: UTF-8 bytes for GBNF / EBNF, and for Lark
one opaque symbol per literal / terminal / regexp (a lexer token), so a pass that fused or
split a Lark token would change the enumerated language.
"""

from __future__ import annotations

import importlib.util
import re

from hypothesis import strategies as st

from gramopt.grammar import (Alt, CharClass, Epsilon, Expr, Grammar, Literal, Ref, Regex, Repeat,
                             Rule, Seq, Terminal, alt, seq, walk)

# ---------------------------------------------------------------- notation

_TOKEN = re.compile(r'''\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<cls>\[\^?(?:[^\]\\]|\\.)*\])
    |(?P<rep>\{\d+(?:,\d*)?\})|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>[()|?*+]))''', re.X)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"bad notation at {text[pos:]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _unescape(s: str) -> str:
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in s else s


def _class(tok: str) -> CharClass:
    body = tok[1:-1]
    negated = body.startswith("^")
    chars = _unescape(body[1:] if negated else body)
    ranges, i = [], 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            ranges.append((ord(chars[i]), ord(chars[i + 2])))
            i += 3
        else:
            ranges.append((ord(chars[i]), ord(chars[i])))
            i += 1
    return CharClass(tuple(ranges), negated)


def expr(text: str) -> Expr:
    """Parse one expression of the notation."""
    toks = _tokens(text)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else (None, None)

    def alternation() -> Expr:
        nonlocal pos
        items = [sequence()]
        while peek() == ("op", "|"):
            pos += 1
            items.append(sequence())
        return alt(*items)

    def sequence() -> Expr:
        items = []
        while peek()[0] in ("str", "cls", "name") or peek() == ("op", "("):
            items.append(postfix())
        return seq(*items)

    def postfix() -> Expr:
        nonlocal pos
        e = atom()
        while True:
            kind, val = peek()
            if kind == "op" and val in "?*+":
                e = Repeat(e, *{"?": (0, 1), "*": (0, None), "+": (1, None)}[val])
            elif kind == "rep":
                lo, _, hi = val[1:-1].partition(",")
                e = Repeat(e, int(lo), int(lo) if "," not in val else (int(hi) if hi else None))
            else:
                return e
            pos += 1

    def atom() -> Expr:
        nonlocal pos
        kind, val = peek()
        pos += 1
        if kind == "str":
            s = _unescape(val[1:-1])
            return Literal(s) if s else Epsilon()
        if kind == "cls":
            return _class(val)
        if kind == "name":
            return Terminal(val) if val.isupper() and len(val) > 1 and val.startswith("T_") else Ref(val)
        if (kind, val) == ("op", "("):
            e = alternation()
            assert peek() == ("op", ")"), text
            pos += 1
            return e
        raise ValueError(f"unexpected {val!r} in {text!r}")

    e = alternation()
    if pos != len(toks):
        raise ValueError(f"trailing {toks[pos:]} in {text!r}")
    return e


def grammar(text: str, dialect: str = "ebnf") -> Grammar:
    """Parse rules of the notation into a Grammar (start = first rule)."""
    rules = []
    for line in re.split(r"[;\n]", text):
        if line.strip():
            name, _, body = line.partition("::=")
            rules.append(Rule(name.strip(), expr(body)))
    return Grammar(tuple(rules), rules[0].name, dialect=dialect)


# ---------------------------------------------------------------- bounded enumeration

BASE_ALPHABET = "abcé"
RANDOM_ALPHABET = "abcdé"  # what random grammars are checked over: d is in no positive class


def alphabet(*grammars: Grammar) -> str:
    """The test alphabet: a, b, c, é and the code points the grammars mention (class
    bounds and their neighbours), so classes are sampled inside, outside and at the edges."""
    cps = {ord(c) for c in BASE_ALPHABET}
    for g in grammars:
        for r in g.rules:
            for node in walk(r.body):
                if isinstance(node, Literal):
                    cps.update(ord(c) for c in node.text)
                elif isinstance(node, CharClass):
                    for lo, hi in node.ranges:
                        cps.update(c for c in (lo - 1, lo, hi, hi + 1) if 0 <= c <= 0x10FFFF)
    return "".join(chr(c) for c in sorted(cps) if not 0xD800 <= c <= 0xDFFF)


def language(g: Grammar, k: int, sigma: str | None = None) -> frozenset[tuple]:
    """All symbol strings of L(g) of length ≤ k over ``sigma`` (bytes; Lark tokens as one
    symbol each): the least fixpoint of the rule equations truncated at length k, which is
    exactly L(g) ∩ Σ^≤k."""
    sigma = alphabet(g) if sigma is None else sigma
    lark = g.dialect == "lark"
    sets: dict[str, set[tuple]] = {r.name: set() for r in g.rules}

    def cat(a: set[tuple], b: set[tuple]) -> set[tuple]:
        by_len: list[list[tuple]] = [[] for _ in range(k + 1)]
        for v in b:
            by_len[len(v)].append(v)
        return {u + v for u in a for n in range(k - len(u) + 1) for v in by_len[n]}

    def ev(e: Expr) -> set[tuple]:
        if isinstance(e, Epsilon):
            return {()}
        if isinstance(e, Literal):
            s = (("lit", e.text),) if lark else tuple(e.text.encode("utf-8"))
            return {s} if len(s) <= k else set()
        if isinstance(e, CharClass):
            cps = e.code_points()
            return {tuple(c.encode("utf-8")) for c in sigma
                    if any(lo <= ord(c) <= hi for lo, hi in cps) and len(c.encode()) <= k}
        if isinstance(e, Terminal):
            return {(("term", e.name),)} if k else set()
        if isinstance(e, Regex):
            return {(("re", e.pattern),)} if k else set()
        if isinstance(e, Ref):
            return set(sets[e.name])
        if isinstance(e, Seq):
            out = {()}
            for item in e.items:
                out = cat(out, ev(item))
            return out
        if isinstance(e, Alt):
            return set().union(*(ev(i) for i in e.items))
        if isinstance(e, Repeat):
            x = ev(e.item)
            power, out, i = {()}, set(), 0
            while True:
                if i >= e.min:
                    out |= power
                if e.max is not None and i >= e.max:
                    return out
                power = cat(power, x)
                i += 1
                if not power or (i > e.min and power <= out):
                    return out
        raise TypeError(e)

    changed = True
    while changed:
        changed = False
        for r in g.rules:
            new = ev(r.body)
            if not new <= sets[r.name]:
                sets[r.name] |= new
                changed = True
    return frozenset(sets[g.start])


def prefixes(strings: frozenset[tuple], k: int) -> frozenset[tuple]:
    """Every prefix of length ≤ k (byte level: may end inside a UTF-8 character)."""
    return frozenset(s[:i] for s in strings for i in range(min(len(s), k) + 1))


HAVE_VERIFY = importlib.util.find_spec("gramopt.verify") is not None and \
    importlib.util.find_spec("gramopt.verify.check") is not None


def assert_verified(a: Grammar, b: Grammar, quick: bool = True) -> None:
    """``gramopt.verify.check_equivalence`` finds no difference (every byte prefix up to
    the bound through the reference Earley recognizers, production coverage, random
    derivations each way, exact comparison where regular). Skipped silently while
    gramopt.verify is absent."""
    if not HAVE_VERIFY:
        return
    from gramopt.verify import Bounds, check_equivalence
    bounds = Bounds(max_len=5, min_prefixes=300, max_prefixes=1500,
                    derivations=40) if quick else Bounds()
    result = check_equivalence(a, b, bounds)
    assert result.ok, f"{result}\n{a.rules}\n{b.rules}"


def assert_same_language(a: Grammar, b: Grammar, k: int = 6, sigma: str | None = None) -> None:
    """L(a) and L(b) agree on every string of length ≤ k over ``sigma`` (default: the test
    alphabet of both), and so do their prefixes of length ≤ k − 1 (viable prefixes,
    bounded)."""
    sigma = alphabet(a, b) if sigma is None else sigma
    la, lb = language(a, k, sigma), language(b, k, sigma)
    if la != lb:
        diff = sorted(la ^ lb, key=lambda s: (len(s), s))[:5]
        raise AssertionError(f"languages differ on {diff}\n{a.rules}\n{b.rules}")
    assert prefixes(la, k - 1) == prefixes(lb, k - 1)


# ---------------------------------------------------------------- random grammars

_TEXTS = ["a", "b", "c", "é", "ab", "ba", "aé", "cc"]
_CLASSES = [((97, 97),), ((97, 98),), ((98, 99),), ((97, 99),), ((0xE9, 0xE9),), ((99, 99), (0xE9, 0xE9))]
_BOUNDS = [(0, 1), (0, None), (1, None), (2, None), (1, 1), (0, 0), (2, 3), (0, 2), (2, 2)]


def expressions(names: list[str], lark: bool = False, depth: int = 3) -> st.SearchStrategy[Expr]:
    """Random IR over {a, b, c, é} with references to ``names``."""
    leaves = [st.sampled_from(_TEXTS).map(Literal), st.sampled_from(names).map(Ref),
              st.just(Epsilon())]
    if lark:
        leaves.append(st.sampled_from(["T_A", "T_B"]).map(Terminal))
    else:
        leaves.append(st.builds(CharClass, st.sampled_from(_CLASSES), st.just(False)))
        leaves.append(st.builds(CharClass, st.sampled_from(_CLASSES), st.just(True)))
    leaf = st.one_of(*leaves)

    def extend(inner):
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
            st.tuples(inner, st.sampled_from(_BOUNDS)).map(lambda t: Repeat(t[0], *t[1])))

    return st.recursive(leaf, extend, max_leaves=7)


@st.composite
def grammars(draw, lark: bool = False) -> Grammar:
    """A random grammar of 1–4 rules R0…R3 (start R0) over the test alphabet."""
    n = draw(st.integers(1, 4))
    names = [f"R{i}" for i in range(n)]
    rules = tuple(Rule(name, draw(expressions(names, lark))) for name in names)
    terminals = (Rule("T_A", Literal("a")), Rule("T_B", Literal("b"))) if lark else ()
    return Grammar(rules, "R0", terminals=terminals, dialect="lark" if lark else "ebnf")


# ---------------------------------------------------------------- self-tests


def test_notation_builds_ir():
    g = grammar('S ::= "ab" X | [a-c]* | ("x")? | ""\nX ::= [^a] "é"{2,}')
    s = g.rule("S").body
    assert s == Alt((Seq((Literal("ab"), Ref("X"))), Repeat(CharClass(((97, 99),)), 0, None),
                     Repeat(Literal("x"), 0, 1), Epsilon()))
    assert g.rule("X").body == Seq((CharClass(((97, 97),), True), Repeat(Literal("é"), 2, None)))


def test_enumerator_on_known_languages():
    g = grammar('S ::= "a" S "b" | ""')  # a^n b^n
    assert language(g, 6) == {tuple(b"a" * n + b"b" * n) for n in range(4)}
    g = grammar('S ::= [ab]{2,3}')
    assert len(language(g, 6)) == 4 + 8
    g = grammar('S ::= [^a]', )
    assert tuple("é".encode()) in language(g, 2) and (97,) not in language(g, 2)
    g = grammar('S ::= S "a"')  # unproductive: empty language
    assert language(g, 6) == frozenset()
    lark = grammar('S ::= "ab" | "a" "b"', dialect="lark")
    assert len(language(lark, 3)) == 2  # one token "ab" vs two tokens "a" "b"
