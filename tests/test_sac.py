"""Exact SAC figures (costmodels/sac.py docstring states them)."""

from __future__ import annotations

import pytest

from gramopt.costmodels import sac_trace
from gramopt.costmodels.sac import sac_report
from gramopt.grammar import Epsilon, Grammar, Literal, Ref, Rule, alt, seq

S, S0 = Ref("S"), Ref("S0")
a, b = Literal("a"), Literal("b")

G4 = Grammar((Rule("S0", alt(S, Epsilon())), Rule("S", alt(seq(S, S), a, b))), "S0")
G3 = Grammar((Rule("S", alt(seq(a, S), seq(b, S), Epsilon())),), "S")
GL = Grammar((Rule("S", alt(seq(S, a), seq(S, b), Epsilon())),), "S")
TEXT = "abbabaabbbab" * 2


@pytest.mark.parametrize("strategy", ["leo", "earley"])
def test_g4_quadratic_splits(strategy):
    rep = sac_report(G4, TEXT, strategy)
    assert len(rep) == len(TEXT)
    for t, s in enumerate(rep, 1):
        assert s.split_packed == t * (t - 1) // 2
        assert s.other_packed == 2  # S → a|b and S0 → S
        assert s.symbol_nodes == t + 1  # S[i,t] for i < t, and S0[0,t]
        assert s.terminal_nodes == 1 and s.intermediate_nodes == 0
    assert sac_trace(G4, TEXT, strategy) == [t * (t - 1) // 2 for t in range(1, len(TEXT) + 1)]
    assert sum(sac_trace(G4, "a" * 30)) == sum(t * (t - 1) // 2 for t in range(1, 31))  # Θ(n³)


def test_g3_right_linear_plain_earley_is_linear_per_step():
    rep = sac_report(G3, TEXT, "earley")
    for t, s in enumerate(rep, 1):
        assert (s.split_packed, s.other_packed, s.symbol_nodes) == (t, 1, t + 1)


def test_g3_right_linear_leo_is_constant():
    """The ε-completion at t advances S → a S· (t-1) (split S[t-1,t]); completing that
    from origin t-1 < t takes the Leo chain to the topmost S[0,t]: 2 splits, as in the runtime."""
    rep = sac_report(G3, TEXT, "leo")
    assert all(s.other_packed == 1 for s in rep)
    assert sac_trace(G3, TEXT) == [1] + [2] * (len(TEXT) - 1)
    assert sac_trace(G3, "ab" * 200)[-1] == 2


@pytest.mark.parametrize("strategy", ["leo", "earley"])
def test_left_recursive_constant(strategy):
    rep = sac_report(GL, TEXT, strategy)
    assert all((s.split_packed, s.other_packed, s.symbol_nodes) == (1, 0, 1) for s in rep)


def test_stops_on_rejected_text():
    assert sac_trace(G3, "abc") == [1, 2]


def test_lark_atoms_rejected():
    from gramopt.grammar import Terminal
    g = Grammar((Rule("S", seq(Terminal("A"), a)),), "S", dialect="lark")
    with pytest.raises(ValueError, match="Lark"):
        sac_trace(g, "a")
