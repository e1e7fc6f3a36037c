"""check_equivalence: planted unsound rewrites are caught by every method that can see
them, sound rewrites pass, verdicts agree with brute force, and it is fast."""

from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.grammar import (CharClass, Epsilon, Grammar, Literal, Ref, Regex, Repeat, Rule, Seq,
                             Terminal, alt, seq, transform)
from gramopt.verify import Bounds, Counterexample, check_equivalence
from gramopt.verify.regular import regularity
from gramopt.verify.symbols import compile_grammar
from test_verify_support import L, R, cls, g, grammars, json_grammar, language, prefixes
from examples import examples

FAST = Bounds(max_prefixes=4000, derivations=100)


def replace_rule(grammar: Grammar, name: str, body) -> Grammar:
    return grammar.with_bodies({name: body})


# ---------------------------------------------------------------- planted bugs in JSON


def drop_deep_alternative(j: Grammar) -> Grammar:
    """char ::= [^"\\\\\\x00-\\x1f] | "\\\\" ( [\\"\\\\/bfnrt] | "u" hex{4} ): drop the \\u escape."""
    body = j.rule("char").body
    esc = body.items[1]
    return replace_rule(j, "char", alt(body.items[0], seq(esc.items[0], esc.items[1].items[0])))


def remove_class_char(j: Grammar) -> Grammar:
    """hex [A-Fa-f0-9] loses 'f'."""
    def fn(e):
        if isinstance(e, CharClass) and e.ranges == ((ord("0"), ord("9")), (ord("A"), ord("F")),
                                                      (ord("a"), ord("f"))):
            return CharClass(((ord("0"), ord("9")), (ord("A"), ord("F")), (ord("a"), ord("e"))))
        return e
    return replace_rule(j, "char", transform(j.rule("char").body, fn))


def swap_sequence_items(j: Grammar) -> Grammar:
    """In the number rule, the optional fraction and exponent trade places."""
    items = list(j.rule("number").body.items)
    items[2], items[3] = items[3], items[2]
    return replace_rule(j, "number", Seq(tuple(items)))


def remove_multibyte_char(j: Grammar) -> Grammar:
    """The string-character class loses U+00E9 (é) only: a two-byte difference."""
    def fn(e):
        if isinstance(e, CharClass) and e.negated:
            return CharClass(e.ranges + ((0xE9, 0xE9),), True)
        return e
    return replace_rule(j, "char", transform(j.rule("char").body, fn))


PLANTED = [drop_deep_alternative, remove_class_char, swap_sequence_items, remove_multibyte_char]


@pytest.mark.parametrize("plant", PLANTED, ids=lambda f: f.__name__)
def test_planted_bug_in_json_is_caught(plant):
    j = json_grammar()
    bad = plant(j)
    assert bad != j
    r = check_equivalence(j, bad, FAST)
    assert not r.ok, plant.__name__
    cex = r.counterexample
    assert cex.in_original != cex.in_candidate
    assert "original" in str(cex) and cex.method in str(cex)
    # either direction: the planted grammar as the original
    assert not check_equivalence(bad, j, FAST).ok


@pytest.mark.parametrize("plant", PLANTED[:3], ids=lambda f: f.__name__)
def test_derivations_alone_catch_planted_bugs(plant):
    j = json_grammar()
    # (one missing code point among a million, remove_multibyte_char, is enumeration's job)
    r = check_equivalence(j, plant(j), Bounds(derivations=400), methods=("derivations",))
    assert not r.ok and r.counterexample.method == "random derivations"
    assert r.counterexample.kind == "string"


def test_json_against_itself_is_fast_and_bounded():
    j = json_grammar()
    r = check_equivalence(j, json_grammar())
    assert r.ok, r
    e = r.stats["enumeration"]
    assert e["bound_met"] and e["complete_len"] >= 6
    assert r.stats["derivations"]["sentences"] == [200, 200]
    assert "skipped" in r.stats["exact"]  # JSON is self-embedding


def test_shortest_counterexample_first():
    a = g(("S", alt(L("abc"), L("abd"), L("x"))))
    b = g(("S", alt(L("abc"), L("x"))))
    cex = check_equivalence(a, b).counterexample
    assert cex == Counterexample(b"abd", "prefix", True, False, "enumeration")
    assert str(cex).startswith('"abd" is a viable prefix of the original grammar but not of the candidate')


def test_string_counterexample_when_prefixes_agree():
    a = g(("S", seq(L("a"), Repeat(L("a"), 0, None))))
    b = g(("S", Repeat(L("a"), 0, None)))
    cex = check_equivalence(a, b).counterexample
    assert (cex.data, cex.kind, cex.in_original, cex.in_candidate) == (b"", "string", False, True)


def test_empty_language_against_nonempty():
    empty = g(("S", seq(L("a"), R("S"))))
    cex = check_equivalence(empty, g(("S", L("a")))).counterexample
    assert cex.kind == "prefix" and cex.data == b"" and not cex.in_original
    other_empty = g(("S", seq(L("b"), R("S"))))
    assert check_equivalence(empty, other_empty, methods=("enumeration",)).stats["enumeration"]["exact"]
    assert str(check_equivalence(empty, other_empty)) == "equivalent (proved exactly)"


def test_a_proof_first_leaves_the_bounded_methods_out():
    """Two strongly regular grammars proved equal by their automata (``check.PROOF``): no other
    method runs; where the proof does not hold (JSON is self-embedding) every method runs."""
    a = g(("S", seq(Repeat(L("a"), 0, None), L("b"))))
    b = g(("S", alt(L("b"), seq(L("a"), R("S")))))
    r = check_equivalence(a, b)
    assert r.ok and r.stats["exact"]["exact"] and not {"enumeration", "coverage", "derivations"} & set(r.stats)
    j = check_equivalence(json_grammar(), json_grammar())
    assert {"enumeration", "coverage", "derivations", "exact"} <= set(j.stats)


# ---------------------------------------------------------------- sound rewrites pass


G4 = g(("S0", alt(R("S"), Epsilon())), ("S", alt(seq(R("S"), R("S")), L("a"), L("b"))))
G3 = g(("S", alt(seq(L("a"), R("S")), seq(L("b"), R("S")), Epsilon())))
STAR = g(("S", Repeat(cls(("a", "b")), 0, None)))
LEFT = g(("S", alt(seq(R("S"), cls(("a", "b"))), Epsilon())))
G1 = g(("S", alt(seq(L("a"), R("S"), L("b")), Epsilon())))
G2 = g(("S", alt(seq(L("a"), R("A"), L("b")), Epsilon())), ("A", alt(seq(L("a"), R("A"), L("b")), Epsilon())))


# G4 (S ::= S S) costs the enumeration ~3 CPU s on the reference recognizer: the default run
# checks it against G3, -m slow against LEFT too
@pytest.mark.parametrize("a,b", [(G3, G4), (G3, STAR), (STAR, LEFT), pytest.param(G4, LEFT, marks=pytest.mark.slow),
                                 (G1, G2)])
def test_equivalent_grammars_pass(a, b):
    r = check_equivalence(a, b, FAST)
    assert r.ok, r


@pytest.mark.parametrize("a,b", [(G3, STAR), (STAR, LEFT), (G3, LEFT)])
def test_regular_grammars_proved_exactly(a, b):
    r = check_equivalence(a, b, FAST)
    assert r.ok and r.stats["exact"]["exact"]
    assert str(r) == "equivalent (proved exactly)"


# ---------------------------------------------------------------- exact (regular) method


IDENT = g(("id", seq(cls(("a", "z"), ("_", "_")), Repeat(R("tail"), 0, None))),
          ("tail", cls(("a", "z"), ("0", "9"), ("_", "_"))))
NUMBER = g(("num", seq(Repeat(L("-"), 0, 1), R("digits"), Repeat(seq(L("."), R("digits")), 0, 1))),
           ("digits", alt(seq(R("digits"), cls(("0", "9"))), cls(("0", "9")))))
NUMBER_RIGHT = g(("num", seq(Repeat(L("-"), 0, 1), R("digits"), Repeat(seq(L("."), R("digits")), 0, 1))),
                 ("digits", alt(seq(cls(("0", "9")), R("digits")), cls(("0", "9")))))


def test_regularity_check():
    assert regularity(compile_grammar(IDENT)) is None
    assert regularity(compile_grammar(NUMBER)) is None
    assert regularity(compile_grammar(G1)) is not None
    assert regularity(compile_grammar(G4)) is not None


def test_exact_proves_and_refutes():
    r = check_equivalence(NUMBER, NUMBER_RIGHT, methods=("exact",))
    assert r.ok and r.stats["exact"]["exact"]
    bad = replace_rule(NUMBER_RIGHT, "digits", alt(seq(cls(("0", "8")), R("digits")), cls(("0", "9"))))
    r = check_equivalence(NUMBER, bad, methods=("exact",))
    assert not r.ok and r.counterexample.method == "exact (regular)"
    assert r.counterexample.data == b"90"


def test_exact_unicode_classes():
    a = g(("s", Repeat(cls((0x80, 0x10FFFF)), 0, None)))
    b = g(("s", Repeat(alt(cls((0x80, 0x7FF)), cls((0x800, 0xFFFF)), cls((0x10000, 0x10FFFF))), 0, None)))
    r = check_equivalence(a, b, methods=("exact",))
    assert r.ok and r.stats["exact"]["exact"]
    c = g(("s", Repeat(alt(cls((0x80, 0x7FF)), cls((0x800, 0xFFFF)), cls((0x10000, 0x10FFFE))), 0, None)))
    r = check_equivalence(a, c, methods=("exact",))
    assert not r.ok and r.counterexample.data == "\U0010ffff".encode()
    assert r.counterexample.kind == "prefix"


# ---------------------------------------------------------------- Lark atoms


def _lark(body, ignore=("WS",), ws_def=Regex(r"\s+")):
    from gramopt.grammar import Directive
    return Grammar((Rule("start", body),), "start",
                   terminals=(Rule("WS", ws_def), Rule("NAME", Regex("[a-z]+"))),
                   directives=tuple(Directive("ignore", (i,)) for i in ignore), dialect="lark")


def test_lark_grammars_compare_over_atoms():
    a = _lark(seq(Terminal("NAME"), Repeat(seq(Literal(","), Terminal("NAME")), 0, None)))
    same = _lark(alt(Terminal("NAME"), seq(Terminal("NAME"), Repeat(seq(Literal(","), Terminal("NAME")), 1, None))))
    assert check_equivalence(a, same, FAST).ok
    bad = _lark(seq(Terminal("NAME"), Repeat(seq(Literal(";"), Terminal("NAME")), 0, None)))
    r = check_equivalence(a, bad, FAST)
    assert not r.ok and isinstance(r.counterexample.data, tuple)
    assert str(r.counterexample).startswith("⟨NAME ','⟩")


def test_lark_lexer_differences_are_reported():
    a = _lark(Terminal("NAME"))
    assert not check_equivalence(a, _lark(Terminal("NAME"), ignore=())).ok
    r = check_equivalence(a, _lark(Terminal("NAME"), ws_def=Regex(" +")))
    assert not r.ok and r.counterexample is None and "WS" in r.stats["lexer"]


# ---------------------------------------------------------------- hypothesis vs brute force


def _unfold(grammar: Grammar, name: str) -> Grammar:
    """Replace references to ``name`` in the other rules by its body (one unfolding)."""
    body = grammar.rule(name).body
    fn = lambda e: body if isinstance(e, Ref) and e.name == name else e  # noqa: E731
    return grammar.with_bodies({r.name: transform(r.body, fn) for r in grammar.rules if r.name != name})


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(), st.data())
def test_sound_unfolding_passes(grammar, data):
    name = data.draw(st.sampled_from(grammar.names))
    r = check_equivalence(grammar, _unfold(grammar, name), Bounds(max_prefixes=2500, derivations=50))
    assert r.ok, r


def _mutate(grammar: Grammar, data) -> Grammar:
    """Replace one random node of one rule by a random small expression."""
    from test_verify_support import expr_strategy
    rule = data.draw(st.sampled_from(grammar.rules))
    nodes = []

    def collect(e):
        nodes.append(e)
        return e
    transform(rule.body, collect)
    target = data.draw(st.sampled_from(nodes))
    new = data.draw(expr_strategy(grammar.names, "abc", 1))
    done = [False]

    def fn(e):
        if not done[0] and e == target:
            done[0] = True
            return new
        return e
    return grammar.with_bodies({rule.name: transform(rule.body, fn)})


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(), st.data())
def test_verdicts_agree_with_brute_force(grammar, data):
    other = _mutate(grammar, data)
    r = check_equivalence(grammar, other, Bounds(max_prefixes=2500, derivations=50))
    k = 4
    differ = language(grammar, k) != language(other, k) or prefixes(grammar, k) != prefixes(other, k)
    if differ:  # a difference within length 4 must be found (enumeration covers it)
        assert not r.ok
    if not r.ok:  # and every counterexample is real
        cex = r.counterexample
        n = len(cex.data)
        judge = language if cex.kind == "string" else prefixes
        if n <= 6:
            assert (cex.data in judge(grammar, n)) == cex.in_original
            assert (cex.data in judge(other, n)) == cex.in_candidate
        assert cex.in_original != cex.in_candidate


@pytest.mark.parametrize("plant", [drop_deep_alternative, remove_class_char], ids=lambda f: f.__name__)
def test_coverage_alone_catches_dropped_alternatives(plant):
    j = json_grammar()
    r = check_equivalence(j, plant(j), methods=("coverage",))
    assert not r.ok and r.counterexample.method == "production coverage"


def test_coverage_sentences_use_every_production():
    from gramopt.verify.coverage import coverage_sentences
    from gramopt.verify.reference import Recognizer
    j = json_grammar()
    r = Recognizer(j)
    sentences = [bytes(w) for w in coverage_sentences(r.g)]
    assert len(sentences) == len(r.g.rhs)
    assert all(r.accepts(w) for w in sentences)
    assert b'"\\u0000"' in sentences  # the \u escape, in a shortest context
