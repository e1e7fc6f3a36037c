"""xgrammar derives a lookahead assertion for a rule used once at a non-last place (its
LookaheadAssertionAnalyzer); the default target keeps those it found in the input
(``transforms.reshape.derived_lookaheads``) and names no nullable expression as a shared rule
(``Extractor(name_nullable=False)``). Speed: ``benchmarks/results/derived-lookaheads-2026-11-27``."""

from __future__ import annotations

import dataclasses

import pytest

from corpus_location import CORPUS

from gramopt import targets
from gramopt.bench.obfuscate import obfuscate
from gramopt.formats import parse, read
from gramopt.grammar.analysis import nullable_rules, recursive_rules
from gramopt.passes import optimize
from gramopt.transforms.registry import remove_redundancy
from gramopt.transforms.reshape.derived_lookaheads import derived_lookaheads, keep_derived_lookaheads
from gramopt.verify import check_equivalence

# xgrammar's converter writes one rule per property: two identical array rules, each used once
# before more of its object (so each has an assertion); merged, the one left is used twice
CONVERTED = '''root ::= "{" pa "," pb "}"
pa ::= "[" num items* "]" | "[" "]"
pa_items ::= "," num
items ::= "," num
pb ::= "[" num items2* "]" | "[" "]"
items2 ::= "," num
num ::= sign [0-9]+
sign ::= "" | "-"
'''
MERGED = '''root ::= "{" pa "," pa "}"
pa ::= "[" num items* "]" | "[" "]"
items ::= "," num
num ::= sign [0-9]+
sign ::= "" | "-"
'''


@pytest.mark.parametrize("text, derived", [
    (CONVERTED, {"pa", "pb", "sign"}),  # num is last in its sequences; items* repeats a rule
    (MERGED, {"sign"}),                  # pa occurs twice
    ('root ::= a "x"\na ::= "y"', {"a"}),
    ('root ::= a "x" | "z" a\na ::= "y"', set()),  # last in another rule's sequence
    ('root ::= a "x" | b "z"\na ::= "y"\nb ::= a "w"', {"b"}),  # a: two non-last places
    ('root ::= a "x"\na ::= "y" (= "x")', set()),  # an assertion written: nothing derived
    ('root ::= "x" (a "y")* "z"\na ::= "q"', {"a"}),  # inside a group: the group's sequence
    ('root ::= a "x"\na ::= "y" a | "y"', {"a"}),  # last in its own rule only: as xgrammar
])
def test_derived_lookaheads_as_xgrammar_counts_them(text, derived):
    assert derived_lookaheads(parse(text, "ebnf")) == derived


def test_merged_copies_are_given_back_and_the_language_kept():
    original, merged = parse(CONVERTED, "ebnf"), parse(MERGED, "ebnf")
    kept, copied = keep_derived_lookaheads(original, merged)
    assert copied == ["pa_2"]
    assert derived_lookaheads(kept) == {"pa", "pa_2", "sign"}
    assert check_equivalence(merged, kept).ok and check_equivalence(original, kept).ok
    assert keep_derived_lookaheads(original, kept) == (kept, [])  # idempotent


def test_copies_reach_the_rules_a_copy_references():
    """A copy's references are occurrences too: a child that had its own assertion in the input
    is copied with it."""
    original = parse('root ::= a "x" b "y"\na ::= "(" c ")" \nb ::= "(" d ")"\nc ::= "k"\nd ::= "k"', "ebnf")
    merged = parse('root ::= a "x" a "y"\na ::= "(" c ")"\nc ::= "k"', "ebnf")
    kept, copied = keep_derived_lookaheads(original, merged)
    assert copied == ["a_2", "c_2"]
    assert {"a", "a_2", "c", "c_2"} <= derived_lookaheads(kept)
    assert check_equivalence(original, kept).ok


def test_recursive_rules_and_rules_without_an_assertion_are_left_alone():
    original = parse('root ::= a "x" b "y"\na ::= "(" a | "k"\nb ::= "(" b | "k"', "ebnf")
    merged = parse('root ::= a "x" a "y"\na ::= "(" a | "k"', "ebnf")
    assert derived_lookaheads(original) == {"a", "b"}
    assert keep_derived_lookaheads(original, merged) == (merged, [])
    copies = parse(CONVERTED.replace("root ::= ", 'root ::= pa "," pb "," ') , "ebnf")
    assert keep_derived_lookaheads(copies, parse(MERGED, "ebnf"))[1] == []  # pa, pb: no assertion to keep


@pytest.mark.parametrize("name", ["llamacpp__json.gbnf", "llamacpp__arithmetic.gbnf", "llamacpp__list.gbnf"])
@pytest.mark.parametrize("seed", [0, 1])
def test_differential_on_obfuscated_corpus_grammars(name, seed):
    """Obfuscated (duplicated rules, delegations), cleaned, then the input's assertions given
    back: the language is the input's, and every rule that kept its name keeps its assertion."""
    path = CORPUS / "gbnf" / name
    if not path.exists():
        pytest.skip("corpus not present")
    obf = obfuscate(read(str(path)), seed)
    cleaned = remove_redundancy(obf)
    kept, copied = keep_derived_lookaheads(obf, cleaned, "-")
    assert check_equivalence(obf, kept).ok
    names = {r.name for r in kept.rules} - set(copied)
    assert (derived_lookaheads(obf) & names) - recursive_rules(kept) <= derived_lookaheads(kept)


def test_the_default_target_names_no_nullable_shared_rule():
    """Whitespace written at every place of an object rule stays where it was written under
    the default target; the generic target may name it as a rule of its own."""
    ws = '[ \\t\\n]*'
    text = (f'root ::= "{{" {ws} "\\"a\\"" {ws} ":" {ws} v {ws} "," {ws} "\\"b\\"" {ws} ":" {ws} v {ws} "}}"\n'
            f'v ::= "1" | "2"\n')
    g = parse(text, "ebnf")
    portable = dataclasses.replace(targets.get("portable"), guard=None, checked_in=())
    out = optimize(g, target=portable, verify=False).grammar
    assert nullable_rules(out) == set()
    generic = optimize(g, target="generic", verify=False).grammar
    assert nullable_rules(generic), "the check can fail: the generic target names it"


def test_a_written_follow_assertion_gives_way_to_the_derived_one():
    """The xgrammar target writes FOLLOW-set assertions; on a rule xgrammar derives an exact one
    for (the whole rest of its one sequence) the written one is left out again."""
    original = parse('root ::= "{" a "," b "}"\na ::= "[" [0-9]* "]"\nb ::= "x"', "ebnf")
    hinted = parse('root ::= "{" a "," b "}"\na ::= "[" [0-9]* "]" (= ",")\nb ::= "x"', "ebnf")
    kept, done = keep_derived_lookaheads(original, hinted)
    assert done == ["-(= …) a"] and kept == original
    elsewhere = parse('root ::= "{" a "," b "}"\na ::= "[" [0-9]* "]" (= ",")\nb ::= "x"', "ebnf")
    assert keep_derived_lookaheads(elsewhere, hinted) == (hinted, [])  # written in the input: kept
