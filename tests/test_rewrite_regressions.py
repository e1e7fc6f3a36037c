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
