"""Property: optimizing random small grammars never changes the language."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.grammar import Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from gramopt.passes import optimize
from examples import examples

check_equivalence = pytest.importorskip("gramopt.verify").check_equivalence

NAMES = ["S", "A", "B"]


def exprs(depth):
    leaf = st.one_of(st.sampled_from([Literal("a"), Literal("b"), Literal("ab"), Epsilon()]),
                     st.sampled_from(NAMES).map(Ref))
    if depth == 0:
        return leaf
    sub = exprs(depth - 1)
    return st.one_of(
        leaf,
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(sub, st.sampled_from([(0, None), (1, None), (0, 1)])).map(
            lambda t: Repeat(t[0], *t[1]) if t[0] != Epsilon() else t[0]),
    )


grammars = st.lists(exprs(2), min_size=3, max_size=3).map(
    lambda bodies: Grammar(tuple(Rule(n, b) for n, b in zip(NAMES, bodies)), "S"))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(grammars, st.sampled_from(["generic", "llama.cpp", "llguidance", "xgrammar"]))
def test_random_grammars_keep_their_language(g, target):
    out = optimize(g, target=target, verify=False).grammar
    res = check_equivalence(g, out)
    assert res.ok, (g, out, res.counterexample)
