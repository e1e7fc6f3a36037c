"""The package keeps its floors (README, layout section): no cycle, no import against the
floors, function-level imports counted too (``tools/import_graph.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)


def test_no_cycle_and_no_upward_import():
    g = import_graph.graph(str(ROOT / "gramopt"))
    assert g["cycles"] == []
    assert g["upward"] == []
    assert g["unplaced"] == []


def test_the_checker_sees_a_lazy_upward_import(tmp_path):
    """A planted function-level import from runtime into formats is reported."""
    pkg = tmp_path / "gramopt"
    for sub in ("grammar", "formats", "runtime"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "runtime" / "x.py").write_text("def f():\n    from ..formats import y\n")
    (pkg / "formats" / "y.py").write_text("from ..grammar import z\n")
    (pkg / "grammar" / "z.py").write_text("")
    g = import_graph.graph(str(pkg))
    assert g["upward"] == [("gramopt.runtime.x", "gramopt.formats")] or \
        g["upward"] == [("gramopt.runtime.x", "gramopt.formats.y")]
    assert g["function_level_edges"] == 1


def test_the_checker_sees_a_cycle(tmp_path):
    pkg = tmp_path / "gramopt" / "grammar"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    assert import_graph.graph(str(pkg.parent))["cycles"] == [["gramopt.grammar.a", "gramopt.grammar.b"]]


def test_the_checker_keeps_verify_and_runtime_below_decoding(tmp_path):
    """verify stands on grammar alone and runtime is the mask engine: a function-level import of
    the decoding loop from either is reported; decoding importing both is not."""
    pkg = tmp_path / "gramopt"
    for sub in ("grammar", "runtime", "verify", "decoding"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "decoding" / "loop.py").write_text("from ..runtime import m\nfrom ..verify import r\n")
    (pkg / "runtime" / "m.py").write_text("def f():\n    from ..decoding import loop\n")
    (pkg / "verify" / "r.py").write_text("def f():\n    from ..runtime import m\n")
    g = import_graph.graph(str(pkg))
    assert g["upward"] == [("gramopt.runtime.m", "gramopt.decoding.loop"), ("gramopt.verify.r", "gramopt.runtime.m")]
    assert g["function_level_edges"] == 2
