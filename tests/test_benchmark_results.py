"""Figures come from results files, not prose: the hostile-input benchmark's "before" column is
a results file that names exactly its reproductions."""

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


hostile = _load("hostile_inputs")


def test_hostile_before_column_names_exactly_the_reproductions(tmp_path):
    keys = list(dict.fromkeys(k for k, _, _ in hostile.cases(tmp_path, quick=False)))
    before = hostile.read_before(hostile.BEFORE, keys)
    assert set(before["rows"]) == set(keys) and before["column"]
    assert {k for k, _, _ in hostile.cases(tmp_path, quick=True)} < set(keys)
    partial = tmp_path / "before.json"
    partial.write_text(json.dumps({"column": "c", "rows": {k: "0" for k in keys[1:]}}), encoding="utf-8")
    with pytest.raises(ValueError, match=keys[0]):
        hostile.read_before(partial, keys)
