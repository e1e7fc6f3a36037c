"""The llguidance target's engine check (gramopt/engines/llguidance.py): llguidance's greedy
lexer must not tell the optimized grammar from the original."""

import pytest

pytest.importorskip("llguidance")

from gramopt.formats import parse, write  # noqa: E402
from gramopt.passes import optimize  # noqa: E402
from gramopt.engines.llguidance import engine_difference, sentences  # noqa: E402

# cm keeps a self-embedding recursion (a rule for llguidance); ce is regular
NESTED = r'''root ::= "x" (cm | ce)
cm ::= "\"" "," | [a-z] cm | "(" cm ")"
ce ::= [a-z] ce | "\"" "}"
'''
# the same language with ce as a repetition: llguidance lexes ce as one greedy lexeme
# [a-z]*"}, which swallows the letters cm needs, so it rejects the sentence xb",
AS_LEXEME = NESTED.replace('ce ::= [a-z] ce | "\\"" "}"', 'ce ::= [a-z]* "\\"" "}"')


def test_check_finds_the_greedy_lexer_difference():
    assert AS_LEXEME != NESTED
    d = engine_difference(parse(NESTED, "gbnf"), parse(AS_LEXEME, "gbnf"))
    assert d is not None
    assert d.prefix.endswith(b'"') and ord(",") in d.only_original and not d.only_optimized
    assert "llguidance allows ','" in d.describe()


# one whitespace rule, three forms: parser-level (left- or right-recursive), a lexeme (a star)
WS_LEFT = 'root ::= (item "\\n")+\nitem ::= [a-z] ws\nws ::= ws [ \\t\\n] | ""\n'
WS_STAR = WS_LEFT.replace('ws ::= ws [ \\t\\n] | ""', 'ws ::= [ \\t\\n]*')
WS_RIGHT = WS_LEFT.replace('ws ::= ws [ \\t\\n] | ""', 'ws ::= [ \\t\\n] ws | ""')


def test_llguidance_lexes_a_star_rule_greedily_and_a_recursive_one_by_atoms():
    """llguidance 1.9.1: ``ws ::= [ \\t\\n]*`` is one greedy lexeme, which swallows the
    newline after ``z``, so the next item and the end are refused; the recursive forms are
    parsed a character at a time, as the language says (over single bytes). A fix-up that writes such left
    recursion as a star changes llguidance's masks; the judge sees it and keeps the input."""
    left = parse(WS_LEFT, "gbnf")
    d = engine_difference(left, parse(WS_STAR, "gbnf"))
    assert d is not None and d.prefix.endswith(b"\n") and ord("a") in d.only_original and not d.only_optimized
    assert engine_difference(left, parse(WS_RIGHT, "gbnf")) is None


def test_llguidance_runs_out_of_items_on_a_right_recursive_rule_of_one_character():
    """... and the right-recursive form is no way out for a fix-up that must remove left
    recursion (llama.cpp refuses it): llguidance's Earley parser is quadratic in a right
    recursion, and over Qwen's tokens (a run of 40 spaces) its mask ran past 50,000 items
    ("Too many items"), leaving only the end allowed. So a left-recursive helper's star form
    stays, and where its masks differ the judge keeps the input."""
    from gramopt.judge.masks import EngineCheck
    d = EngineCheck("llguidance", parse(WS_LEFT, "gbnf"), 600).difference(parse(WS_RIGHT, "gbnf"))
    assert d is not None and d.n_only_input > 100 and d.n_only_candidate <= 1  # (at most the end)


def test_check_agrees_on_equal_grammars():
    g = parse(NESTED, "gbnf")
    assert engine_difference(g, g) is None


def test_sentences_are_in_the_language():
    from gramopt.verify import Recognizer
    g = parse(NESTED, "gbnf")
    got = sentences(g, 20, seed=3)
    assert got and all(Recognizer(g).accepts(s) for s in got)


def test_llguidance_target_keeps_what_llguidance_accepts():
    g = parse(NESTED, "gbnf")
    r = optimize(g, target="llguidance")
    check = [p for p in r.report.passes if p.name == "engine-check"]
    assert check and any("llguidance differs" in n for n in check[0].notes)
    assert r.report.verified == "ok"
    assert engine_difference(g, r.grammar) is None
    # the judge restores the culprit rule alone: ce stays a recursive rule, not a lexeme
    assert 'ce ::= [a-z] ce | "\\"" "}"' in write(r.grammar, "gbnf")
    assert any("the input's definition restored" in n for n in check[0].notes)


def test_other_targets_do_not_run_the_engine_check():
    r = optimize(parse(NESTED, "gbnf"), target="generic")
    assert all(p.name != "engine-check" for p in r.report.passes)
