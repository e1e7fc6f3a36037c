"""No dialect name compared as a string outside ``gramopt/formats`` (issue 25), as no target
name is compared outside ``gramopt/targets``: a difference between dialects is a field of
its ``formats.Dialect`` record. Measured by ``tools/front_door_census.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("front_door_census", ROOT / "tools" / "front_door_census.py")
census = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(census)


def test_no_file_outside_formats_compares_dialect_names():
    """Every difference between dialects is a field of its record (``formats.DIALECT``; defined
    on the IR's floor, ``grammar.dialects``, so grammar/, verify/ and runtime/ read it too)."""
    assert census.dialect_comparisons(ROOT / "gramopt") == []


def test_the_records_answer_what_the_comparisons_asked():
    """The fields that replaced the comparisons give what each comparison gave, for every
    dialect gramopt knows and for a name it does not (a JSON Schema, a grammar built in code)."""
    from gramopt.formats import DIALECT, dialect_record, token_atoms, written_as
    for name in (*DIALECT, "jsonschema", None):
        assert token_atoms(name) == (name == "lark")
        assert dialect_record(name).underscore_names == (name != "gbnf")  # helper-rule names: '-' only in GBNF
        assert dialect_record(name).left_recursion == (name != "gbnf")  # llama.cpp refuses left recursion
    assert [written_as(n) for n in DIALECT] == ["gbnf", "ebnf", "lark", "ebnf", "cfg"]


def test_the_census_sees_a_comparison(tmp_path):
    """The check can fail: a planted ``g.dialect == "lark"`` is found."""
    pkg = tmp_path / "gramopt"
    (pkg / "x").mkdir(parents=True)
    (pkg / "x" / "m.py").write_text('def f(g):\n    return g.dialect == "lark"\n', encoding="utf-8")
    assert census.dialect_comparisons(pkg) == ["gramopt/x/m.py:2"]
