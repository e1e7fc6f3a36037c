"""Verification proportional to what changed (verify/unchanged.py): the unchanged rules,
the abstraction, and verdicts identical to the full check (differential: corpus, hypothesis)."""

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gramopt.formats import parse
from gramopt.grammar import Alt, Literal, Ref, Terminal, alt, seq
from gramopt.transforms.registry import PASSES
from gramopt.verify import Bounds, check_equivalence
from gramopt.verify.unchanged import abstract_unchanged, unchanged_rules
from test_cleanup_support import expressions, grammars
from examples import examples

SMALL = Bounds(max_len=4, min_prefixes=500, max_prefixes=500, derivations=30, max_work=300_000)
CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "gbnf"

BASE = 'root ::= a b\na ::= "x" c\nb ::= "y" | "z" b\nc ::= "c"\nd ::= "d"\n'


def g(text):
    return parse(text, "gbnf")


def test_unchanged_rules_golden():
    # start => goal: the rules whose reachable sub-grammar is the same in both
    cases = [
        (BASE, BASE, {"root", "a", "b", "c", "d"}),
        (BASE, BASE.replace('c ::= "c"', 'c ::= "C"'), {"b", "d"}),  # c changed: a and root reach it
        (BASE, BASE.replace('b ::= "y" | "z" b', 'b ::= "z" b | "y"'), {"a", "c", "d"}),
        (BASE, BASE.replace('d ::= "d"\n', ""), {"root", "a", "b", "c"}),  # d only in one grammar
    ]
    for before, after, same in cases:
        assert unchanged_rules(g(before), g(after)) == same


def test_abstraction_letters_the_unchanged_rules():
    un = abstract_unchanged(g(BASE), g(BASE.replace('"x" c', '"x" c | "x" "c"')))
    assert un.letters == (Terminal("⟨same:b⟩"), Terminal("⟨same:c⟩"))  # named from changed rules
    assert un.original.names == ["root", "a"] and "⟨same:c⟩" in str(un.candidate.rule("a").body)
    assert abstract_unchanged(g(BASE), g(BASE)).identical
    assert abstract_unchanged(g(BASE), g(BASE.replace('d ::= "d"', 'd ::= "e"'))).identical  # unreachable


def test_identical_start_is_exact_and_a_difference_is_the_full_checks():
    same = check_equivalence(g(BASE), g(BASE.replace('d ::= "d"', 'd ::= "e"')), incremental=True)
    assert same.ok and same.stats["unchanged"]["exact"]
    bad = g(BASE.replace('c ::= "c"', 'c ::= "c" | "q"'))
    inc, full = check_equivalence(g(BASE), bad, incremental=True), check_equivalence(g(BASE), bad)
    assert not inc.ok and inc.counterexample == full.counterexample and "unchanged" not in inc.stats


def verdicts_agree(a, b, bounds=SMALL):
    inc = check_equivalence(a, b, bounds, incremental=True)
    full = check_equivalence(a, b, bounds)
    assert inc.ok == full.ok
    assert inc.counterexample == full.counterexample
    return inc


@settings(max_examples=examples(150), deadline=None)
@given(grammars(), st.data())
def test_random_edits_agree_with_the_full_check(grammar, data):
    names = grammar.names
    i = data.draw(st.integers(0, len(names) - 1))
    rule = grammar.rules[i]
    new = data.draw(st.one_of(expressions(names), st.just(alt(rule.body, rule.body)),
                              st.just(seq(rule.body))))
    edited = grammar.replace_rules(grammar.rules[:i] + (replace(rule, body=new),) + grammar.rules[i + 1:])
    verdicts_agree(grammar, edited)


@settings(max_examples=examples(100), deadline=None)
@given(grammars())
def test_clean_ups_agree_with_the_full_check(grammar):
    verdicts_agree(grammar, PASSES["cleanup"](grammar))


@pytest.mark.parametrize("name", ["llamacpp__arithmetic", "llamacpp__json", "llamacpp__chess", "llamacpp__list"])
def test_corpus_edits_agree_with_the_full_check(name):
    grammar = g((CORPUS / f"{name}.gbnf").read_text())
    verdicts_agree(grammar, PASSES["cleanup"](grammar), Bounds())
    last = grammar.rules[-1]  # a difference in one rule
    changed = grammar.replace_rules(grammar.rules[:-1] + (replace(last, body=Alt((last.body, Literal("§")))),))
    verdicts_agree(grammar, changed, Bounds())
