"""Calibration: least squares recovers known weights exactly, R² and residuals are
reported, node weights follow from the fit, models round-trip through JSON, and the
extractor takes engine weights without changing the generic behaviour."""

from __future__ import annotations

import numpy as np
import pytest

from gramopt.costmodels import calibration as cal
from gramopt.formats import parse, write


def synthetic_rows(w: dict, b: float, n_forms: int = 6, steps: int = 40, noise: float = 0.0, seed: int = 0):
    """Steps of ``n_forms`` grammar forms: random counters, per-form static features, and
    T = w·x + b (+ noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in range(n_forms):
        static = {k: float(rng.integers(0, 30)) for k in cal.STATIC}
        for _ in range(steps):
            row = {k: float(rng.integers(0, 500)) for k in cal.DYNAMIC}
            row.update(static)
            row["t_us"] = b + sum(w.get(k, 0.0) * row[k] for k in cal.FEATURES) + noise * rng.standard_normal()
            row["form"] = f"f{f}"
            rows.append(row)
    return rows


def test_recovers_known_weights_exactly():
    w = {"predictions": 0.5, "completions": 1.25, "scans": 0.0, "trie_nodes": 0.01, "leo": 2.0, "sets": 3.0,
         "sac": 0.75}
    rows = synthetic_rows(w, 4.0, n_forms=12)
    # static features constant per form: fit the dynamic ones (and two static) where they are identifiable
    feats = list(cal.DYNAMIC) + ["kappa", "concat"]
    m = cal.fit(rows, "synthetic", features=feats)
    for k in cal.DYNAMIC:
        assert m.weights[k] == pytest.approx(w[k], abs=1e-9)
    assert m.weights["kappa"] == pytest.approx(0.0, abs=1e-9)
    assert m.intercept == pytest.approx(4.0, abs=1e-7)
    assert m.r2 == pytest.approx(1.0, abs=1e-12)
    assert m.residuals["max_abs"] < 1e-7 and set(m.residuals["by_form"]) == {f"f{i}" for i in range(12)}


def test_r2_below_one_with_noise_and_residuals_reported():
    rows = synthetic_rows({"completions": 1.0}, 2.0, n_forms=5, noise=50.0)
    m = cal.fit(rows, "noisy", features=list(cal.DYNAMIC))
    assert 0.0 < m.r2 < 1.0
    assert m.residuals["rmse"] > 0 and m.residuals["p95_abs"] <= m.residuals["max_abs"]
    assert "R²" in m.format()


def test_r_squared_definition():
    y = np.array([1.0, 2.0, 3.0])
    assert cal.r_squared(y, y) == 1.0
    assert cal.r_squared(y, np.full(3, 2.0)) == 0.0


def test_node_weights_in_kappa_units():
    """T̄ = 2·κ + 60·concat + 4·left_rec per step (no dynamic part): node weights 30 and 2."""
    rng = np.random.default_rng(1)
    rows = []
    for f in range(10):
        s = {k: float(rng.integers(0, 20)) for k in cal.STATIC}
        for _ in range(5):
            rows.append({**s, "t_us": 1 + 2 * s["kappa"] + 60 * s["concat"] + 4 * s["left_rec"], "form": f"f{f}"})
    m = cal.fit(rows, "static-only", features=list(cal.STATIC))
    assert m.r2 == pytest.approx(1.0)
    assert m.node_weights["concat"] == pytest.approx(30.0)
    assert m.node_weights["left_rec"] == pytest.approx(2.0)
    assert m.node_weights["infix"] == cal.generic_node_weights()["infix"]  # fitted 0: the generic floor


def test_node_weights_fold_counters_through_static_features():
    """Counters that grow with a static feature carry their time into that feature's weight:
    completions = 30·concat per step and T = 1·completions + 1·κ → concat costs 30 κ units."""
    rng = np.random.default_rng(2)
    rows = []
    for f in range(10):
        s = {k: float(rng.integers(1, 20)) for k in cal.STATIC}
        for i in range(6):
            c = 30 * s["concat"] + (i % 2)  # step-to-step variation, mean fixed by the form
            rows.append({**s, "completions": c, "t_us": c + s["kappa"], "form": f"f{f}"})
    m = cal.fit(rows, "folded", features=["completions"] + list(cal.STATIC))
    assert m.node_weights["concat"] == pytest.approx(30.0, rel=1e-6)


def test_paired_node_weights_cancel_the_language():
    """log T̄ = language effect + 0.01·κ + 0.5·concat + 0.02·left_rec: node weights 50 and 2
    whatever each language's own baseline; features that never vary stay generic."""
    rng = np.random.default_rng(3)
    rows = []
    for g in range(6):
        base = float(rng.uniform(0, 8))  # languages differ by orders of magnitude
        for f in range(3):
            s = dict.fromkeys(cal.STATIC, 0.0)
            s.update(kappa=float(rng.integers(5, 50)), concat=float(rng.integers(0, 4)),
                     left_rec=float(rng.integers(0, 4)))
            t = float(np.exp(base + 0.01 * s["kappa"] + 0.5 * s["concat"] + 0.02 * s["left_rec"]))
            rows += [{**s, "t_us": t, "form": f"g{g}:f{f}", "group": f"g{g}"} for _ in range(3)]
    m = cal.fit(rows, "paired", features=list(cal.STATIC))
    assert m.node_weights["concat"] == pytest.approx(50.0, rel=1e-3)
    assert m.node_weights["left_rec"] == pytest.approx(2.0, rel=1e-3)
    assert m.node_weights["infix"] == cal.generic_node_weights()["infix"]
    assert any("paired log fit" in n for n in m.notes)


def test_anchor_and_weak_fit():
    gen = cal.generic_node_weights()
    # κ has no effect: A → A A keeps its generic cost and scales the others
    out, notes = cal._in_kappa_units({"kappa": 0.0, "concat": 2.0, "left_rec": 0.5}, "t", r2=0.9)
    assert out["concat"] == gen["concat"] and out["left_rec"] == pytest.approx(gen["concat"] / 4)
    assert out["infix"] == gen["infix"] and "A → A A" in notes[0]
    # negative effects clip to 0 (monotone costs); nothing goes below the generic cost
    out, _ = cal._in_kappa_units({"kappa": 1.0, "right_rec": -3.0, "concat": 2.0}, "t", r2=0.9)
    assert out["right_rec"] == 0.0 and out["concat"] == gen["concat"]
    # a weak fit changes nothing
    out, notes = cal._in_kappa_units({"kappa": 1.0, "concat": 50.0}, "t", r2=0.2)
    assert out == gen and "generic" in notes[0]


def test_degenerate_fit_keeps_generic_weights():
    rows = [{"kappa": 5.0, "t_us": 1.0, "form": "a"}, {"kappa": 5.0, "t_us": 1.0, "form": "b"}]
    m = cal.fit(rows, "tiny", features=["kappa"])
    assert m.node_weights == cal.generic_node_weights() and m.notes


def test_model_json_round_trip(tmp_path):
    m = cal.fit(synthetic_rows({"scans": 1.0}, 0.0), "roundtrip")
    cal.save_model(m, str(tmp_path))
    back = cal.load_model("roundtrip", str(tmp_path))
    assert back is not None and back.weights == m.weights and back.r2 == m.r2
    assert back.predict({"scans": 2.0}) == pytest.approx(m.predict({"scans": 2.0}))


def test_static_features():
    g = parse('root ::= s\ns ::= s s | l "x" | "y" s | s "+" s\nl ::= l "a" | "b"\n', "gbnf")
    f = cal.static_features(g)
    assert (f["concat"], f["infix"], f["left_rec"], f["right_rec"], f["rules"]) == (1, 1, 1, 1, 3)
    assert f["lookahead"] == 0
    assert cal.static_features(parse('root ::= a\na ::= "x" (= "y")\n', "ebnf"))["lookahead"] == 1


def test_rows_from_bench_results():
    from gramopt.bench.run import Options, measure_case
    from gramopt.bench.suites import Case
    case = Case("g4", "pathological", 'root ::= s\ns ::= s s | "a" | "b"\n', "gbnf", ("abab",))
    # the rows are the point, not the language check of G4's optimize (~2-3 CPU s: test_bench's)
    res = measure_case(case, Options(engines=("gramopt",), vocab="bytes", reps=1, verify=False))
    rows = cal.rows_from_results([res], "gramopt")
    assert len(rows) == 2 * 5  # original and optimized, 4 bytes + stop
    assert {"t_us", "completions", "sac", "kappa", "form"} <= set(rows[0])
    assert [r["sac"] for r in rows[:5]] == [0, 1, 3, 6, 0]


def _extract(src: str, **kw) -> str:
    from gramopt.egraph import Extractor, GrammarEGraph, Limits, Runner
    from gramopt.rewrites import rules as rewrite_rules
    eg = GrammarEGraph(parse(src, "gbnf"))
    Runner(rewrite_rules(None), Limits()).run(eg)
    return write(Extractor(eg, **kw).extract().grammar, "gbnf")


def test_extractor_engine_weights():
    """[ab]*: the generic κ prefers the left-recursive helper; an engine that charges left
    recursion more than the κ it saves keeps the repetition."""
    src = 'root ::= [ab]*\n'
    generic = _extract(src)
    assert generic == _extract(src, weights=None)
    heavy = dict(cal.generic_node_weights(), left_rec=50.0)
    assert _extract(src, weights=heavy) == 'root ::= [ab]*\n'
    assert "root [ab]" in _extract(src, weights=dict(cal.generic_node_weights()))
