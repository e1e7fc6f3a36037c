"""Masks of the compiled runtime against the plain BNF oracle on small byte vocabularies.

Every token's verdict is checked: allowed ⇔ oracle.is_viable_prefix(text + token);
stop token allowed ⇔ oracle.accepts(text). Both mask algorithms (per-state token classes,
and the whole-trie walk) must agree. Tokens end inside multi-byte characters on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.grammar import CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from gramopt.runtime import Matcher, RuntimeGrammarError, Vocab, compile_grammar

from test_runtime_oracle import BnfOracle, reference_recognizer

E_ACUTE = "é".encode()  # c3 a9
SNOW = "☃".encode()  # e2 98 83

BASE_TOKENS = [b"a", b"b", b"c", b"(", b")", b"+", b" ", b"ab", b"ba", b"aa", b"bb", b"abc", b"a(",
               b")+", b"((", b"))", b"(a", b"a)", b"+a", b" a", b"a ", E_ACUTE, E_ACUTE[:1], E_ACUTE[1:],
               b"a" + E_ACUTE[:1], E_ACUTE[1:] + b"b", SNOW, SNOW[:2], SNOW[2:], SNOW[:1], SNOW[1:],
               b"\xff", b"x", b"abab", b"aaaa", b"\"", b"\"a", b"a\"", b"1", b"12", b"-", b"-1"]


def small_vocab() -> Vocab:
    return Vocab.from_bytes(BASE_TOKENS, eos=len(BASE_TOKENS))


def G(*rules, start=None) -> Grammar:
    rs = tuple(Rule(n, b) for n, b in rules)
    return Grammar(rs, start or rs[0].name)


S, A, B = Ref("S"), Ref("A"), Ref("B")
a, b_, c = Literal("a"), Literal("b"), Literal("c")

GRAMMARS = {
    "star": G(("root", seq(a, Repeat(alt(b_, Literal("é")), 0, None), c))),
    "anbn_nested": G(("root", S), ("S", alt(seq(a, S, b_), Epsilon()))),
    "right_rec": G(("root", S), ("S", alt(seq(a, S), seq(b_, S), Epsilon()))),
    "left_rec": G(("root", S), ("S", alt(seq(S, a), seq(S, b_), Epsilon()))),
    "ambiguous_SS": G(("root", alt(S, Epsilon())), ("S", alt(seq(S, S), a, b_))),
    "expr": G(("root", Ref("E")),
              ("E", alt(seq(Ref("E"), Literal("+"), Ref("E")), seq(Literal("("), Ref("E"), Literal(")")),
                        Ref("N"), a)),
              ("N", Repeat(CharClass(((ord("0"), ord("9")),)), 1, None))),
    "unicode_class": G(("root", Repeat(CharClass(((0x80, 0x10FFFF),)), 1, 3))),
    "negated": G(("root", seq(Literal('"'), Repeat(CharClass(((34, 34), (92, 92)), negated=True), 0, None),
                              Literal('"')))),
    "nullable_chain": G(("root", seq(A, B, A, c)), ("A", alt(Epsilon(), a)), ("B", Repeat(A, 0, 2))),
    "mutual_right": G(("root", A), ("A", alt(seq(a, B), Epsilon())), ("B", alt(seq(b_, A), c))),
    "self_root": G(("root", alt(seq(a, Ref("root"), b_), Epsilon()))),
    "bounded": G(("root", Repeat(alt(a, Literal("ab")), 2, 4))),
    "cyclic_units": G(("root", A), ("A", alt(B, a)), ("B", alt(A, b_))),
    "unproductive": G(("root", alt(seq(a, Ref("X")), b_)), ("X", seq(c, Ref("X")))),
    "empty_lang": G(("root", Ref("X")), ("X", seq(c, Ref("X")))),
}


def check_masks(grammar: Grammar, vocab: Vocab, texts, oracle=None):
    oracle = oracle or BnfOracle(grammar)
    m = Matcher(grammar, vocab)
    w = Matcher(grammar, vocab, mode="walk")
    eos = vocab.eos_ids[0]
    for text in texts:
        m.reset()
        w.reset()
        if text and not m.accept_bytes(text):
            assert not oracle.is_viable_prefix(text), text
            continue
        assert oracle.is_viable_prefix(text) or (text == b"" and oracle.empty), text
        w.accept_bytes(text) if text else None
        got = set(m.allowed_tokens().tolist())
        assert got == set(w.allowed_tokens().tolist()), text
        want = {i for i, tb in enumerate(vocab.token_bytes)
                if tb and oracle.is_viable_prefix(text + tb)}
        if not oracle.empty and oracle.accepts(text):
            want.add(eos)
        assert got == want, (text, sorted(got - want), sorted(want - got))
        # accept_token agrees with the mask
        for t in range(len(vocab)):
            ok = m.accept_token(t)
            assert ok == (t in want), (text, t)
            if ok:
                m.rollback(1)


def prefixes(strings):
    out = {b""}
    for s in strings:
        for i in range(len(s) + 1):
            out.add(s[:i])
    return sorted(out)


TEXTS = prefixes([b"abcabc", b"aabb", b"ab+ab", b"(a+(12))+a", "aé\xe9b".encode(), b"abab", b"\"ab\"",
                  "é☃é".encode(), b"c", b"bcac", b"aaab"])


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_match_oracle(name):
    check_masks(GRAMMARS[name], small_vocab(), TEXTS)


def test_empty_language_masks_nothing():
    m = Matcher(GRAMMARS["empty_lang"], small_vocab())
    assert len(m.allowed_tokens()) == 0 and not m.accept_token(0)


def test_lark_atoms_rejected():
    from gramopt.grammar import Terminal
    g = G(("root", seq(Terminal("WORD"), a)))
    with pytest.raises(RuntimeGrammarError, match="Lark"):
        compile_grammar(g)


def test_bitmask_layout_and_rows():
    v = small_vocab()
    m = Matcher(GRAMMARS["star"], v)
    out = np.zeros((3, v.n_words), np.int32)
    m.fill_next_token_bitmask(out, 1)
    assert not out[0].any() and not out[2].any()
    allowed = m.allowed_tokens()
    for t in range(len(v)):
        assert bool((out[1][t // 32] >> (t % 32)) & 1) == (t in allowed)
    flat = np.zeros(v.n_words, np.int32)
    m.fill_next_token_bitmask(flat)
    assert (flat == out[1]).all()


def test_eos_termination_and_rollback():
    v = small_vocab()
    eos = v.eos_ids[0]
    m = Matcher(GRAMMARS["anbn_nested"], v)
    assert eos in m.allowed_tokens()  # ε is in the language
    assert m.accept_token(BASE_TOKENS.index(b"aa"))
    assert eos not in m.allowed_tokens() and not m.accept_token(eos)
    assert m.accept_token(BASE_TOKENS.index(b"bb"))
    assert m.accept_token(eos) and m.is_terminated()
    assert not m.accept_token(0)
    m.rollback(2)
    assert not m.is_terminated() and m.num_tokens == 1
    assert BASE_TOKENS.index(b"bb") in m.allowed_tokens()
    m.reset()
    assert m.num_tokens == 0 and eos in m.allowed_tokens()


def test_counters_reported():
    v = small_vocab()
    m = Matcher(GRAMMARS["ambiguous_SS"], v)
    m.accept_bytes(b"abab")
    c = m.fill_next_token_bitmask(np.zeros(v.n_words, np.int32))
    assert c.trie_nodes > 0 and c.items > 0
    assert m.accept_token(0)
    c = m.last_counters
    assert c.scans > 0 and c.completions > 0 and c.items == c.predictions + c.completions + c.scans


def test_right_recursion_items_linear_with_leo():
    """Right recursion costs O(1) items per byte (Leo), left recursion too."""
    v = small_vocab()
    for name in ("right_rec", "left_rec"):
        m = Matcher(GRAMMARS[name], v)
        per = []
        for i in range(200):
            m.accept_bytes(b"a")
            per.append(m.chart.counters.copy())
        d1 = per[50][0] - per[49][0]
        d2 = per[199][0] - per[198][0]
        assert d1 == d2 and d2 < 10, (name, d1, d2)


# ------------------------------------------------------------ property-based

ATOMS = [a, b_, c, Literal("ab"), Literal("é"), CharClass(((ord("a"), ord("b")),)),
         CharClass(((ord("a"), ord("a")),), negated=True), Epsilon()]


def exprs(refs):
    leaf = st.sampled_from(ATOMS + refs)
    return st.recursive(leaf, lambda ch: st.one_of(
        st.lists(ch, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(ch, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(ch, st.integers(0, 2), st.sampled_from([None, 0, 1, 2])).map(
            lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2]))), max_leaves=6)


@st.composite
def grammars(draw):
    names = ["root", "A", "B"]
    refs = [Ref("A"), Ref("B"), Ref("root")]
    bodies = [draw(exprs(refs)) for _ in names]
    return Grammar(tuple(Rule(n, b) for n, b in zip(names, bodies)), "root")


HYP_TOKENS = [b"a", b"b", b"c", b"ab", b"ba", b"abc", E_ACUTE[:1], E_ACUTE[1:], E_ACUTE, b"aa", b"x",
              b"a" + E_ACUTE[:1], b"\xff"]


@settings(max_examples=int(__import__("os").environ.get("GRAMOPT_HYP", "40")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(), st.lists(st.sampled_from([b"a", b"b", b"c", E_ACUTE, b"ab"]), max_size=4))
def test_random_grammars_match_oracle(g, parts):
    v = Vocab.from_bytes(HYP_TOKENS, eos=len(HYP_TOKENS))
    text = b"".join(parts)
    check_masks(g, v, prefixes([text]))


def test_reference_recognizer_agrees():
    """Once gramopt.verify.reference lands, it must agree with the runtime too."""
    ref = reference_recognizer(GRAMMARS["star"])
    if ref is None:
        pytest.skip("gramopt.verify.reference not available yet")
    v = small_vocab()
    for name in sorted(GRAMMARS):
        g = GRAMMARS[name]
        ref = reference_recognizer(g)
        m = Matcher(g, v)
        for text in TEXTS:
            m.reset()
            # The empty prefix is viable iff the language is non-empty: some token (or EOS) is allowed.
            ok = m.accept_bytes(text) if text else (m.can_terminate() or m.allowed_tokens().size > 0)
            assert ok == bool(ref.is_viable_prefix(text)), (name, text)
            if ok:
                assert m.can_terminate() == bool(ref.accepts(text)), (name, text)


def _naive_live_rules(names, dfas, use_bytes):
    """Rule-level fixpoint: a rule is live when its automaton reaches a final state from its
    start through byte edges (when use_bytes) and edges on live rules."""
    live, changed = set(), True
    while changed:
        changed = False
        for n in names:
            d, seen, stack = dfas[n], {0}, [0]
            while stack and n not in live:
                q = stack.pop()
                if d.final[q]:
                    live.add(n)
                    changed = True
                nxt = ([t for m, t in d.rule_edges(q) if m in live]
                       + ([t for _, _, t in d.byte_edges(q)] if use_bytes else []))
                for t in nxt:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
    return live


@settings(max_examples=int(__import__("os").environ.get("GRAMOPT_HYP", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(grammars())
def test_live_rules_are_the_rule_level_fixpoint(g):
    """compile's productive/nullable rules (one Horn propagation) equal the plain fixpoint."""
    from gramopt.runtime.compile import _live_states, _Network, _rule_dfa
    names = [r.name for r in g.rules]
    dfas = {r.name: _rule_dfa(r.body) for r in g.rules}
    net = _Network(names, [dfas[n] for n in names])
    for use_bytes in (True, False):
        rules, states = _live_states(net, use_bytes)
        assert {n for i, n in enumerate(names) if rules[i]} == _naive_live_rules(names, dfas, use_bytes)
        assert all(states[net.base[i]] for i in range(len(names)) if rules[i])
