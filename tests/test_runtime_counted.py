"""Counted repetitions (runtime.compile: x{m,n} past COUNT_FROM copies is a rule whose
Earley items hold the count in their state) against the plain BNF oracle, which unrolls.

With COUNT_FROM patched to 0 every repetition is counted, so small bounds exercise the
counter on exhaustive texts: masks and accept_token agree with the oracle on every prefix
of every string up to a length (bounded enumeration) and on random strings (hypothesis),
for m = 0, m = n, unbounded n, nested repetitions, an item that derives ε, an item that is
a rule, and multi-byte items. Large bounds compile to a constant number of states.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.grammar import CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from gramopt.runtime import Matcher, Vocab, compile_grammar
from gramopt.runtime import compile as compile_mod
from gramopt.runtime import matcher as matcher_mod

from test_runtime_masks import check_masks
from test_runtime_oracle import BnfOracle

a, b, c = Literal("a"), Literal("b"), Literal("c")
DIGIT = CharClass(((ord("0"), ord("9")),))


def G(*rules) -> Grammar:
    return Grammar(tuple(Rule(n, body) for n, body in rules), rules[0][0])


CASES = {
    "0..3": G(("root", seq(Repeat(a, 0, 3), b))),
    "2..2": G(("root", seq(c, Repeat(a, 2, 2), b))),
    "1..4 ambiguous item": G(("root", seq(Repeat(alt(a, Literal("aa")), 1, 4), b))),
    "2..unbounded": G(("root", seq(Repeat(alt(a, b), 2, None), c))),
    "0..unbounded": G(("root", Repeat(seq(a, b), 0, None))),
    "nested": G(("root", seq(Repeat(seq(c, Repeat(a, 1, 2)), 0, 3), b))),
    "nullable item": G(("root", seq(Repeat(alt(a, Epsilon()), 2, 3), b))),
    "nullable rule item": G(("root", seq(Repeat(Ref("A"), 1, 2), b)), ("A", alt(seq(a, Ref("A")), Epsilon()))),
    "rule item, recursive": G(("root", Repeat(Ref("P"), 0, 3)), ("P", alt(seq(Literal("("), Ref("P"), Literal(")")), a))),
    "multi-byte": G(("root", seq(Repeat(Literal("é"), 1, 3), Repeat(CharClass(((0x80, 0x10FFFF),)), 0, 2)))),
    "digits then sign": G(("root", seq(Repeat(DIGIT, 1, 5), Repeat(Literal("-"), 0, 1)))),
}

TOKENS = [b"a", b"b", b"c", b"aa", b"ab", b"ba", b"aaa", b"aab", b"abab", b"ca", b"cab", b"(", b")", b"(a",
          b"a)", "é".encode(), "é".encode()[:1], "é".encode()[1:], "éé".encode(), b"1", b"12", b"123",
          b"1234", b"12345", b"-", b"1-", b"\xff"]


def vocab() -> Vocab:
    return Vocab.from_bytes(TOKENS, eos=len(TOKENS))


@pytest.fixture
def count_everything(monkeypatch):
    """Every repetition counted (none unrolled), tables of other tests kept apart."""
    monkeypatch.setattr(compile_mod, "COUNT_FROM", 0)
    compile_mod._BODY_CACHE.clear()
    matcher_mod._TABLES.clear()
    yield
    compile_mod._BODY_CACHE.clear()
    matcher_mod._TABLES.clear()


def texts(alphabet: list[bytes], length: int) -> list[bytes]:
    return [b"".join(p) for k in range(length + 1) for p in itertools.product(alphabet, repeat=k)]


ALPHABETS = {"0..3": [b"a", b"b"], "2..2": [b"a", b"b", b"c"], "1..4 ambiguous item": [b"a", b"b"],
             "2..unbounded": [b"a", b"b", b"c"], "0..unbounded": [b"a", b"b"], "nested": [b"a", b"b", b"c"],
             "nullable item": [b"a", b"b"], "nullable rule item": [b"a", b"b"],
             "rule item, recursive": [b"(", b")", b"a"], "multi-byte": ["é".encode(), b"\xc3", b"\xa9", b"a"],
             "digits then sign": [b"1", b"2", b"-"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_counted_masks_equal_oracle(name, count_everything):
    g = CASES[name]
    assert compile_grammar(g).n_reps >= 1
    check_masks(g, vocab(), texts(ALPHABETS[name], 6 if len(ALPHABETS[name]) <= 2 else 4), BnfOracle(g))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_counted_random_strings(data, count_everything):
    name = data.draw(st.sampled_from(sorted(CASES)))
    g = CASES[name]
    oracle = BnfOracle(g)
    m = Matcher(g, vocab())
    text = data.draw(st.lists(st.sampled_from(ALPHABETS[name]), max_size=12).map(b"".join))
    for i in range(len(text) + 1):
        m.reset()
        assert m.accept_bytes(text[:i]) == oracle.is_viable_prefix(text[:i]) or i == 0, (name, text[:i])
        if i and not oracle.is_viable_prefix(text[:i]):
            break
        assert m.can_terminate() == (not oracle.empty and oracle.accepts(text[:i])), (name, text[:i])


def test_counted_equals_unrolled_masks():
    """Bounds just past COUNT_FROM (counted) against the same grammar unrolled."""
    n = compile_mod.COUNT_FROM + 3
    counted = G(("root", seq(Repeat(a, 2, n), b)))
    unrolled = G(("root", seq(Repeat(a, 2, n - 3), Repeat(a, 0, 3), b)))
    assert compile_grammar(counted).n_reps == 1 and compile_grammar(unrolled).n_reps == 0
    v = vocab()
    mc, mu = Matcher(counted, v), Matcher(unrolled, v)
    aa = TOKENS.index(b"aa")
    for k in range(n // 2 + 2):
        assert set(mc.allowed_tokens().tolist()) == set(mu.allowed_tokens().tolist()), k
        ok = mc.accept_token(aa)
        assert ok == mu.accept_token(aa), k
        if not ok:
            break


@pytest.mark.parametrize("n", [10_000, 100_000])
def test_large_bounds_compile_to_constant_states(n):
    g = G(("root", seq(Repeat(DIGIT, 1, n), Literal("."))))
    cg = compile_grammar(g)
    assert cg.n_states < 16 and cg.n_reps == 1
    m = Matcher(g, vocab())
    assert m.accept_bytes(b"1" * (n - 3))
    one, three = TOKENS.index(b"1"), TOKENS.index(b"123")
    allowed = set(m.allowed_tokens().tolist())
    assert one in allowed and three in allowed and TOKENS.index(b"1234") not in allowed
    assert m.accept_token(three) and not m.accept_token(one)
