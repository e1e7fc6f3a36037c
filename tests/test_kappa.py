"""κ: the paper's exact figures and the documented lowering of EBNF constructs."""

import pytest

from gramopt.costmodels import kappa
from gramopt.costmodels.kappa import kappa_of_bnf
from gramopt.grammar import (CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, lower,
                             seq)


def g(*rules, start=None):
    rs = tuple(Rule(n, b) for n, b in rules)
    return Grammar(rs, start or rs[0].name)


A, B = Literal("a"), Literal("b")
G1 = g(("S", alt(seq(A, Ref("S"), B), Epsilon())))
G2 = g(("S", alt(seq(A, Ref("A"), B), Epsilon())), ("A", alt(seq(A, Ref("A"), B), Epsilon())))


def test_kappa_g1_is_8():
    assert kappa(G1) == 8


def test_kappa_g2_is_15():
    assert kappa(G2) == 15


@pytest.mark.parametrize("body, expected", [
    # S → abc : 1 + 2·1 + (3+1)
    (Literal("abc"), 7),
    # a class is one symbol whatever its ranges: 1 + 2 + 2
    (CharClass(((97, 122), (65, 90))), 5),
    # x* : S → N (2), N → N x (3), N → ε (1): 1 + 2·2 + 6
    (Repeat(A, 0, None), 11),
    # x+ : S → N (2), N → N x (3), N → x (2): 1 + 4 + 7
    (Repeat(A, 1, None), 12),
    # x? : S → N (2), N → x (2), N → ε (1)
    (Repeat(A, 0, 1), 10),
    # x{2,3}: S → x x O (4), O → x (2), O → ε (1): 1 + 4 + 7
    (Repeat(A, 2, 3), 12),
    # x{3}: S → x x x
    (Repeat(A, 3, 3), 7),
    # x{2,}: S → x N (3), N → N x (3), N → x (2)
    (Repeat(A, 2, None), 13),
    # nested alternation: S → "c" N (3), N → a (2), N → b (2)
    (seq(Literal("c"), alt(A, B)), 12),
    # multi-byte literal counts code points, not bytes
    (Literal("é€"), 6),
])
def test_kappa_of_ebnf_constructs(body, expected):
    assert kappa(g(("S", body))) == kappa_of_bnf(lower(g(("S", body)))) == expected


def test_lowering_is_deterministic_and_names_helpers_after_rule():
    grammar = g(("S", seq(Repeat(A, 0, None), Repeat(B, 1, None))))
    bnf = lower(grammar)
    assert bnf.nonterminals == ("S", "S#1", "S#2")
    assert bnf.origin == {"S": "S", "S#1": "S", "S#2": "S"}
    assert lower(grammar) == bnf


def test_lark_literal_is_one_token():
    grammar = Grammar((Rule("start", Literal("abc")),), "start", dialect="lark")
    assert kappa(grammar) == 1 + 2 + 2


@pytest.mark.parametrize("lo,hi", [(0, None), (1, None), (2, None), (3, None), (0, 1), (2, 2), (1, 4), (0, 3)])
@pytest.mark.parametrize("item", ['"ab"', '[a-z]', '("a" | "bc")'])
def test_the_kappa_table_is_the_lowering(item, lo, hi):
    """``costmodels.kappa``'s table (used by ``rule_kappa`` and the extractor's node cost)
    counts what ``grammar/bnf.py`` lowers: κ of the BNF equals 1 + HELPER + the construct's
    symbols + 1 + its helper states."""
    from gramopt.costmodels.kappa import HELPER, alt_kappa, repeat_kappa, rule_kappa
    from gramopt.formats import parse
    g = parse(f"root ::= {item}{{{lo},{'' if hi is None else hi}}}\n", "ebnf")
    x, h = {'"ab"': (2, 0), '[a-z]': (1, 0)}.get(item) or alt_kappa([(1, 0), (2, 0)])
    syms, helpers = repeat_kappa(x, lo, hi, h)
    assert kappa_of_bnf(lower(g)) == 1 + HELPER + syms + 1 + helpers == 1 + rule_kappa(g.rules[0], "ebnf")


def test_per_rule_kappa_is_the_lowerings_on_real_grammars():
    """``costmodels.kappa`` (summed per rule, what the pass reports and the result's report
    give) equals κ over the BNF lowering on the vendored grammars and their optimized forms,
    GBNF and Lark."""
    from pathlib import Path

    from gramopt.egraph import Limits
    from gramopt.formats import read
    from gramopt.passes import optimize
    no_engine_check = Limits(engine_check_steps=0)  # any optimized form will do: not ~22 CPU s of masks on json
    data = Path(__file__).parent / "data"
    paths = sorted((data / "gbnf").glob("*.gbnf")) + [data / "lark" / "main.lark"]  # sub.lark: its library
    assert len(paths) >= 3
    for p in paths:
        gr = read(str(p))
        for form in (gr, optimize(gr, target="xgrammar" if gr.dialect != "lark" else "generic", verify=False,
                                  fast=True, limits=no_engine_check).grammar):
            assert kappa(form) == kappa_of_bnf(lower(form)), p
