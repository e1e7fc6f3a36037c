"""Figures come from results files, not prose: the README's quoted figures are the phrases
``benchmarks/readme_figures.py`` makes from the committed results files, a new run is checked
against them by its machine-independent counts, and the hostile-input benchmark's "before"
column is a results file that names exactly its reproductions."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


figures = _load("readme_figures")
hostile = _load("hostile_inputs")


def test_the_readme_quotes_the_results_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert figures.missing_from_readme(readme) == []


def test_a_figure_typed_by_hand_is_caught():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for f in figures.FIGURES:
        phrase = f.phrase(f.load())
        changed = " ".join(readme.split()).replace(phrase, phrase.replace("×", "x", 1).replace(" ms", " µs", 1))
        assert [name for name, _ in figures.missing_from_readme(changed)] == [f.name]


def test_the_expected_phrases():
    """Golden: the phrases as the README prints them (a change of a results file shows here)."""
    by_name = {f.name: f.phrase(f.load()) for f in figures.FIGURES}
    assert by_name["llamacpp"] == "per-mask geomean 1.04× at p50 and 1.28× at p95"
    assert by_name["serving"].startswith("p50 per mask 475 ms → 0.13 ms with masks equal at all 1,159 steps")


@pytest.mark.parametrize("figure", figures.FIGURES, ids=lambda f: f.name)
def test_a_new_run_is_checked_by_its_counts(figure, tmp_path, capsys):
    same = tmp_path / "same.json"
    same.write_text((ROOT / figure.expected).read_text(encoding="utf-8"), encoding="utf-8")
    assert figures.compare(figure, same)
    data = figure.load()
    if figure.name == "serving":
        data["stream"]["verdicts"]["disagree"] = 1
    else:
        data = [dict(r, equal=False) if i == 0 else r for i, r in enumerate(data)]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data), encoding="utf-8")
    assert not figures.compare(figure, other)
    assert "DIFFERS" in capsys.readouterr().out


def test_hostile_before_column_names_exactly_the_reproductions(tmp_path):
    keys = list(dict.fromkeys(k for k, _, _ in hostile.cases(tmp_path, quick=False)))
    before = hostile.read_before(hostile.BEFORE, keys)
    assert set(before["rows"]) == set(keys) and before["column"]
    assert {k for k, _, _ in hostile.cases(tmp_path, quick=True)} < set(keys)
    partial = tmp_path / "before.json"
    partial.write_text(json.dumps({"column": "c", "rows": {k: "0" for k in keys[1:]}}), encoding="utf-8")
    with pytest.raises(ValueError, match=keys[0]):
        hostile.read_before(partial, keys)
