"""Property tests: on random small grammars (1–4 rules over {a, b, c, é}, GBNF-style and
Lark-style) every clean-up pass of the registry production runs (each one, and their rounds,
``cleanup``) keep the language (all strings up to 5
bytes / tokens agree, and their prefixes), never increase κ, and are idempotent."""

import pytest
from hypothesis import HealthCheck, given, settings

from gramopt.costmodels.kappa import kappa
from gramopt.transforms.registry import CLEANUP, PASSES
from test_cleanup_support import RANDOM_ALPHABET, assert_same_language, grammars
from examples import examples

RUNS = {name: p for name, p in PASSES.items() if p.kind == CLEANUP}
simplify = PASSES["cleanup"]
SETTINGS = settings(max_examples=examples(60), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", list(RUNS))
@SETTINGS
@given(g=grammars())
def test_pass_keeps_language_kappa_and_is_idempotent(name, g):
    out = RUNS[name](g)
    out.check()
    assert_same_language(g, out, k=5, sigma=RANDOM_ALPHABET)
    assert kappa(out) <= kappa(g)
    assert RUNS[name](out) == out


@pytest.mark.parametrize("name", list(RUNS))
@SETTINGS
@given(g=grammars(lark=True))
def test_lark_pass_keeps_token_language(name, g):
    out = RUNS[name](g)
    out.check()
    assert_same_language(g, out, k=5, sigma=RANDOM_ALPHABET)
    assert kappa(out) <= kappa(g)
    assert RUNS[name](out) == out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=grammars())
def test_simplify_passes_the_verifier(g):
    """The shipped verifier (reference Earley recognizers, every prefix, derivations both
    ways) agrees with the bounded enumerator: simplify never changes the language."""
    from test_cleanup_support import assert_verified
    out = simplify(g)
    assert_verified(g, out, quick=False)
