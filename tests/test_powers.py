"""The laws of ``gramopt.grammar.powers`` checked against the languages they describe: every
bound pair over a small non-trivial base language, strings enumerated up to a length."""

import itertools

import pytest

from gramopt.grammar.powers import concat, nest

BASE = {"a", "ab"}  # not a code of one letter: powers of it differ in length and form
MAX_LEN = 8
BOUNDS = [(0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (2, 3), (0, None), (1, None), (2, None)]


def power(lang: set[str], lo: int, hi: int | None) -> set[str]:
    """∪_{lo≤k≤hi} lang^k, cut at MAX_LEN."""
    out, layer = set(), {""}
    for k in range(MAX_LEN + 1):
        if k >= lo and (hi is None or k <= hi):
            out |= layer
        layer = {u + v for u in layer for v in lang if len(u + v) <= MAX_LEN}
        if not layer:
            break
    return out


@pytest.mark.parametrize("p,q", list(itertools.product(BOUNDS, BOUNDS)))
def test_concat_is_the_product_of_the_languages(p, q):
    left, right = power(BASE, *p), power(BASE, *q)
    product = {u + v for u in left for v in right if len(u + v) <= MAX_LEN}
    assert product == power(BASE, *concat(p, q))


@pytest.mark.parametrize("inner,outer", [(i, o) for i in BOUNDS for o in BOUNDS if o[1] != 0])
def test_nest_is_exact_and_says_none_only_when_no_power_range_fits(inner, outer):
    nested = power(power(BASE, *inner), *outer)
    flat = nest(inner, outer)
    if flat is not None:
        assert nested == power(BASE, *flat)
    else:  # the law leaves out only forms that are not one power range of the base
        assert all(nested != power(BASE, lo, hi) for lo in range(MAX_LEN + 1)
                   for hi in list(range(lo, MAX_LEN + 1)) + [None])


def test_the_nine_egraph_rules_are_all_of_the_law():
    from gramopt.rewrites.repetition import _NESTED
    assert len(_NESTED) == 9 and all(r is not None for _, _, r in _NESTED)


def test_nest_of_a_huge_bound_is_immediate():
    assert nest((0, 1), (0, 100_000_000)) == (0, 100_000_000)
    assert nest((2, 2), (0, 100_000_000)) is None
