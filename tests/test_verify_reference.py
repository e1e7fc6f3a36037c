"""The reference recognizer: golden tables, brute force, xgrammar, Leo on/off."""

from __future__ import annotations

from corpus_location import CORPUS as _CORPUS_DIR

import itertools
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.grammar import Epsilon, Grammar, Literal, Regex, Repeat, Rule, Terminal, alt, seq
from gramopt.verify import Recognizer
from test_verify_support import L, R, cls, g, grammars, json_grammar, language, prefixes, to_ebnf
from examples import examples

G1 = g(("S", alt(seq(L("a"), R("S"), L("b")), Epsilon())))
G4 = g(("S0", alt(R("S"), Epsilon())), ("S", alt(seq(R("S"), R("S")), L("a"), L("b"))))
LEFT = g(("E", alt(seq(R("E"), L("+"), L("n")), L("n"))))
RIGHT = g(("E", alt(seq(L("n"), L("+"), R("E")), L("n"))))
NULLABLE = g(("S", seq(R("A"), R("B"), R("A"), L("x"))), ("A", alt(R("B"), Epsilon())),
             ("B", alt(seq(R("A"), R("A")), L("y"))))
CYCLE = g(("S", alt(R("T"), L("a"))), ("T", alt(R("S"), seq(R("T"), L("b")))))
UNICODE = g(("S", seq(L("<"), Repeat(alt(cls((0xE9, 0xE9)), cls((0x4E00, 0x9FFF)),
                                          cls((0x1F600, 0x1F64F))), 0, None), L(">"))))
NEGATED = g(("S", seq(L('"'), Repeat(cls(('"', '"'), ("\\", "\\"), negated=True), 0, None), L('"'))))
EMPTY_LANG = g(("S", seq(L("a"), R("S"))))
HALF_DEAD = g(("S", alt(seq(L("a"), R("D")), L("b"))), ("D", seq(L("d"), R("D"))))

GOLDEN = [
    (G1, [b"", b"ab", b"aabb", b"aaabbb"], [b"a", b"b", b"aab", b"abab", b"ba", b"abb"]),
    (G4, [b"", b"a", b"b", b"ab", b"bba", b"abababba"], [b"c", b"ac", b" "]),
    (LEFT, [b"n", b"n+n", b"n+n+n"], [b"", b"n+", b"+n", b"nn", b"n++n"]),
    (RIGHT, [b"n", b"n+n", b"n+n+n"], [b"", b"n+", b"+n", b"nn", b"n++n"]),
    (NULLABLE, [b"x", b"yx", b"yyx", b"yyyyx"], [b"", b"y", b"xx", b"xy"]),
    (CYCLE, [b"a", b"ab", b"abbb"], [b"", b"b", b"ba"]),
    (UNICODE, ["<>".encode(), "<é>".encode(), "<中é😀>".encode()],
     [b"<\xe9>", "<ê>".encode(), "<😀".encode(), "<\xed\xa0\x80>".encode("latin-1")]),
    (NEGATED, [b'""', b'"abc"', '"é中"'.encode()], [b'"', b'"a"b"', b'"\\"', b'"\xff"']),
    (EMPTY_LANG, [], [b"", b"a", b"aa"]),
    (HALF_DEAD, [b"b"], [b"a", b"ad", b""]),
]


@pytest.mark.parametrize("leo", [True, False])
@pytest.mark.parametrize("case", range(len(GOLDEN)))
def test_golden_accept_reject(case, leo):
    grammar, accept, reject = GOLDEN[case]
    r = Recognizer(grammar, leo=leo)
    for w in accept:
        assert r.accepts(w), w
        for i in range(len(w) + 1):
            assert r.is_viable_prefix(w[:i]), w[:i]
    for w in reject:
        assert not r.accepts(w), w


def test_anbn_next_bytes_and_states():
    r = Recognizer(G1)
    assert r.next_bytes(b"") == {ord("a")}
    assert r.next_bytes(b"aa") == {ord("a"), ord("b")}
    assert r.next_bytes(b"aab") == {ord("b")}
    assert r.next_bytes(b"ab") == frozenset()
    assert r.next_bytes(b"ba") == frozenset()
    s = r.initial()
    for x in b"aab":
        s = r.advance(s, x)
    assert s is not None and not r.state_accepts(s)
    assert r.state_accepts(r.advance(s, ord("b")))
    assert r.advance(s, ord("a")) is None


def test_dead_prefixes_and_empty_language():
    r = Recognizer(EMPTY_LANG)
    assert not r.initial().viable and not r.is_viable_prefix(b"") and r.next_bytes(b"") == frozenset()
    r = Recognizer(HALF_DEAD)  # 'a' leads only to an unproductive rule: not viable
    assert r.next_bytes(b"") == {ord("b")}
    assert not r.is_viable_prefix(b"a")


def test_prefix_inside_multibyte_character():
    r = Recognizer(UNICODE)
    assert r.is_viable_prefix(b"<\xe4")  # first byte of 中 (E4 B8 AD)
    assert r.is_viable_prefix(b"<\xe4\xb8")
    assert not r.is_viable_prefix(b"<\xe3")  # U+3xxx not in the class
    assert r.next_bytes(b"<\xf0\x9f") == {0x98, 0x99}  # U+1F600-1F64F
    assert r.next_bytes(b"<\xc3") == {0xA9}
    assert not r.accepts(b"<\xe4\xb8>")


def test_negated_class_excludes_surrogates_and_invalid_utf8():
    r = Recognizer(NEGATED)
    nxt = r.next_bytes(b'"')
    assert ord('"') in nxt and ord("\\") not in nxt and 0x80 not in nxt and 0xC0 not in nxt
    assert 0xC2 in nxt and 0xF4 in nxt and 0xF5 not in nxt
    assert r.next_bytes(b'"\xed') == set(range(0x80, 0xA0))  # no surrogates
    assert r.next_bytes(b'"\xf4') == set(range(0x80, 0x90))  # ≤ U+10FFFF


def test_states_are_shared_and_right_recursion_is_finite():
    r = Recognizer(RIGHT)
    s = r.run(b"n+n+n+n+")
    t = r.run(b"n+")
    assert s is t  # Leo: right recursion does not grow the state
    r = Recognizer(RIGHT, leo=False)
    assert r.run(b"n+n+n+n+") is not r.run(b"n+")


def test_lark_atoms():
    lark = Grammar((Rule("start", seq(Terminal("A"), Repeat(alt(Regex("b+"), Literal("c")), 0, None))),),
                   "start", terminals=(Rule("A", Literal("a")),), dialect="lark")
    r = Recognizer(lark)
    ids = {a: i for i, a in enumerate(r.atoms)}
    a, b, c = ids[Terminal("A")], ids[Regex("b+")], ids[Literal("c")]
    assert r.accepts((a,)) and r.accepts((a, b, c, b)) and not r.accepts((b,)) and not r.accepts(())
    assert r.next_symbols((a,)) == {b, c}
    shared = Recognizer(lark, atoms=(Literal("z"),))
    assert shared.atoms[0] == Literal("z") and shared.alphabet == 4


# ---------------------------------------------------------------- brute force


def _all_strings(alphabet: bytes, k: int):
    for n in range(k + 1):
        for t in itertools.product(alphabet, repeat=n):
            yield bytes(t)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(), st.booleans())
def test_random_grammars_vs_brute_force(grammar, leo):
    k = 4
    lang = language(grammar, k)
    pre = prefixes(grammar, k)
    r = Recognizer(grammar, leo=leo)
    for w in _all_strings(b"abcd", k):
        assert r.accepts(w) == (w in lang), w
        assert r.is_viable_prefix(w) == (w in pre), w
        if len(w) < k:
            assert r.next_bytes(w) == {x for x in b"abcd" if w + bytes([x]) in pre}, w


# ---------------------------------------------------------------- xgrammar


def _xgr_matcher(text):
    xgt = pytest.importorskip("xgrammar.testing")
    try:
        return xgt._get_matcher_from_grammar(text)
    except Exception:  # noqa: BLE001  a grammar xgrammar refuses
        return None


def _xgr_accepts(text: str, data: bytes, terminate: bool) -> bool | None:
    m = _xgr_matcher(text)
    if m is None:
        return None
    ok = m.accept_string(data)
    return ok and (m.is_terminated() if terminate else True)


@pytest.mark.engines
@pytest.mark.parametrize("case", [0, 1, 2, 3, 4, 6, 7])
def test_golden_vs_xgrammar(case):
    grammar, accept, reject = GOLDEN[case]
    text = to_ebnf(grammar)
    r = Recognizer(grammar)
    for w in (*accept, *reject):
        for i in range(len(w) + 1):
            want = _xgr_accepts(text, w[:i], terminate=False)
            assert want is None or want == r.is_viable_prefix(w[:i]), (text, w[:i])
        want = _xgr_accepts(text, w, terminate=True)
        assert want is None or want == r.accepts(w), (text, w)


@pytest.mark.engines
def test_json_vs_xgrammar_random_strings():
    grammar = json_grammar()
    text = to_ebnf(grammar)
    r = Recognizer(grammar)
    rng = random.Random(7)
    docs = ['{"a": [1, -2.5e+3, true, null], "b\\u00e9": {"c": "中"}}', "[]", '{"x":"😀"}',
            '[1, 2', '{"a" 1}', '"\\q"', "-01", "1.5E-7"]
    for doc in docs:
        data = doc.encode()
        cuts = sorted({0, len(data), *(rng.randrange(len(data) + 1) for _ in range(6))})
        for i in cuts:
            assert _xgr_accepts(text, data[:i], terminate=False) == r.is_viable_prefix(data[:i]), data[:i]
        assert _xgr_accepts(text, data, terminate=True) == r.accepts(data), data


CORPUS = str(_CORPUS_DIR)


def _corpus_cases():
    out = []
    for folder in ("ebnf", "gbnf"):
        d = os.path.join(CORPUS, folder)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith((".ebnf", ".gbnf")):
                stem = f.rsplit(".", 1)[0]
                samples = sorted(s for s in os.listdir(d) if s.startswith(stem + ".sample"))
                if samples:
                    out.append((os.path.join(d, f), [os.path.join(d, s) for s in samples]))
    return out


@pytest.mark.engines
@pytest.mark.parametrize("path,samples", _corpus_cases(), ids=lambda x: os.path.basename(x) if isinstance(x, str) else "")
def test_corpus_samples_vs_xgrammar(path, samples):
    pytest.importorskip("gramopt.formats.ebnf", reason="GBNF/EBNF reader not landed yet")
    from gramopt.formats import read
    from gramopt.grammar import GrammarError
    try:
        grammar = read(path)
    except GrammarError as e:
        pytest.skip(f"reader: {e.message}")
    r = Recognizer(grammar)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for s in samples:
        with open(s, "rb") as f:
            data = f.read()
        assert r.accepts(data), s
        for cut in (data[: len(data) // 2], data[:-1], data + b"}"):
            want = _xgr_accepts(text.replace("::= |", '::= "" |'), cut, terminate=False)
            if want is not None:
                assert want == r.is_viable_prefix(cut), (s, cut[-20:])
