"""grammar.memo: results remembered by the identity of the objects a grammar holds."""

from dataclasses import replace

from gramopt.formats import parse
from gramopt.grammar.memo import IdentityMemo, identity_key, remembered_pass
from gramopt.transforms.registry import CLEANUP_ORDER, PASSES, remove_redundancy

TEXT = 'root ::= a b\na ::= "x" "y"\nb ::= c\nc ::= "x" "y"\n'


def grammar():
    return parse(TEXT, "gbnf")


def test_same_objects_hit_and_new_objects_recompute():
    calls = []

    @remembered_pass(2)
    def count(g):
        calls.append(g)
        return g.replace_rules(g.rules[:1])

    g = grammar()
    first = count(g)
    assert count(g) is first and len(calls) == 1
    copy = g.replace_rules(g.rules)  # another Grammar object holding the very same rules: a hit
    assert count(copy) is first and len(calls) == 1
    other = grammar()  # equal, but other objects: computed again
    assert count(other) is not first and count(other) == first and len(calls) == 2


def test_an_equal_rule_with_another_comment_is_not_lent():
    g = grammar()
    commented = g.replace_rules([replace(g.rules[0], comment="# mine")] + list(g.rules[1:]))
    assert commented == g  # comments are not compared …
    assert identity_key(commented) != identity_key(g)  # … but the key tells the objects apart
    out = PASSES["cleanup-fusion"](g), PASSES["cleanup-fusion"](commented)
    assert out[1].rules[0].comment == "# mine" and out[0].rules[0].comment == ""


def test_unchanged_returns_the_grammar_given():
    g = remove_redundancy(grammar())
    again = g.replace_rules(g.rules)
    assert remove_redundancy(g) is g and remove_redundancy(again) is again


def test_memo_is_bounded():
    memo = IdentityMemo(2)
    gs = [grammar() for _ in range(3)]
    for g in gs:
        memo.get(g, lambda x: len(x.rules))
    assert len(memo.entries) == 2


def test_remembered_passes_match_the_plain_ones():
    g = grammar()
    for name, _ in CLEANUP_ORDER:
        fn = PASSES[f"cleanup-{name}"].step  # the remembered clean-up production runs
        assert fn(g) == fn.__wrapped__(g), name
