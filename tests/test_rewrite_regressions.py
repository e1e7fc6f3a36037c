"""Soundness bugs found by the property tests and the decoding checks, kept as exact cases."""

from __future__ import annotations

import pytest

from gramopt.grammar import Alt, Epsilon, Grammar, Literal, Repeat, Rule
from gramopt.rewrites.cleanup import PASSES
from gramopt.verify import check_equivalence

a = Literal("a")


@pytest.mark.parametrize("body,expected", [
    # ("a" | "a")+ once became "a"*: deduplicating the members was taken for dropping an ε member
    (Repeat(Alt((a, a)), 1, None), None),
    (Repeat(Alt((a, Epsilon())), 1, None), Repeat(a, 0, None)),
    (Repeat(Alt((a, Repeat(Literal("b"), 0, 1))), 2, None),
     Repeat(Alt((a, Literal("b"))), 0, None)),
])
def test_repetition_of_alternation(body, expected):
    g = Grammar((Rule("R0", body),), "R0")
    out = PASSES["repetition"](g)
    if expected is not None:
        assert out.rules[0].body == expected
    assert check_equivalence(g, out).ok


def test_duplicated_recursive_rule_merges_before_factoring():
    """A copy of a recursive rule that refers to the original (as the obfuscator makes
    them) is merged before factoring can reshape the two copies differently."""
    from gramopt.costmodels import kappa
    from gramopt.formats import parse
    from gramopt.passes import optimize
    from gramopt.rewrites.cleanup.equivalent_rules import merge_equivalent_rules
    clean = parse('root ::= "(" v ")"\nv ::= "f " (v " " P | v " " P " " v) | "x"\nP ::= "p" | "q"', "gbnf")
    dup = parse('root ::= "(" v2 ")"\nv ::= "f " (v " " P | v3 " " P " " v) | "x"\nP ::= "p" | "q"\n'
                'v2 ::= "f " (v " " P | v " " P " " v) | "x"\nv3 ::= d1\nd1 ::= v', "gbnf")
    merged = merge_equivalent_rules(dup)
    assert merged.names == ["root", "v", "P"]
    assert merged.rule("root").body == clean.rule("root").body
    out = optimize(dup).grammar  # verified
    assert len(out.rules) <= len(clean.rules) and kappa(out) <= kappa(optimize(clean).grammar)


def test_equivalent_rules_keeps_pinned_and_start():
    from gramopt.formats import parse
    from gramopt.rewrites.cleanup.equivalent_rules import merge_equivalent_rules
    g = parse('root ::= a b\na ::= "x" a | "y"\nb ::= "x" b | "y"', "gbnf")
    assert merge_equivalent_rules(g).names == ["root", "a"]
    g = parse('root ::= "x" root | "y" | a\na ::= "x" a | "y"', "gbnf")  # start never removed
    assert "root" in merge_equivalent_rules(g).names
