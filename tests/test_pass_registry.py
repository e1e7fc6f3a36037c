"""One pass registry (``gramopt.transforms.registry.PASSES``) and one fixpoint loop (issue 25):
production, ``--passes``, the targets' fix-ups and the law tests read the same table.
Measured by ``tools/front_door_census.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gramopt import passes
from gramopt.formats import parse
from gramopt.transforms import registry
from gramopt.transforms.registry import PASSES

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("front_door_census", ROOT / "tools" / "front_door_census.py")
census = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(census)


def test_one_registry_and_one_fixpoint_loop():
    pkg = ROOT / "gramopt"
    assert [r.split(":")[0] for r in census.registries(pkg)] == ["gramopt/transforms/registry.py"]
    assert [r.split(":")[0] for r in census.fixpoint_loops(pkg)] == ["gramopt/transforms/fixpoint.py"]


def test_the_census_sees_a_second_registry_and_loop(tmp_path):
    """The checks can fail: a planted registry and a planted rerun-until-unchanged loop are found."""
    pkg = tmp_path / "gramopt"
    (pkg / "x").mkdir(parents=True)
    (pkg / "x" / "m.py").write_text("RESHAPINGS = {}\n\ndef f(step, g):\n    for _ in range(8):\n"
                                    "        new = step(g)\n        if new == g:\n            break\n"
                                    "        g = new\n    return g\n", encoding="utf-8")
    assert census.registries(pkg) == ["gramopt/x/m.py:1 RESHAPINGS"]
    assert census.fixpoint_loops(pkg) == ["gramopt/x/m.py:4 (cap 8)"]


@pytest.mark.parametrize("loop, found", [
    ("while True:\n        g, names = round_(g)\n        if not names:\n            break\n", True),
    ("while not spent:\n        new = step(g)\n        if new == g:\n            return g\n        g = new\n", True),
    # a scanner advancing an index, a walk up to an existing folder, a search: not rounds of passes
    ("while i < n:\n        i = skip(g, i)\n", False),
    ("while not exists(g):\n        g = parent(g)\n", False),
    ("while True:\n        x = find(g)\n        if x is None:\n            break\n        g = x\n", False),
])
def test_the_census_sees_a_while_loop_of_rounds(tmp_path, loop, found):
    """A ``while`` loop that reruns a round until it changes nothing is counted (the inliner's was,
    before it went through ``transforms.fixpoint``); loops that only look alike are not."""
    pkg = tmp_path / "gramopt"
    (pkg / "x").mkdir(parents=True)
    (pkg / "x" / "m.py").write_text("def f(g, n, spent):\n    i = 0\n    " + loop + "    return g\n",
                                    encoding="utf-8")
    assert census.fixpoint_loops(pkg) == (["gramopt/x/m.py:3 (cap none)"] if found else [])


def test_production_runs_the_registry():
    """The pass manager, ``--passes`` and the pipelines name the one table."""
    assert passes.PASSES is PASSES
    assert set(passes.DEFAULT_PASSES) | set(passes.REQUEST_PASSES) <= set(PASSES)
    assert passes.EGRAPH_PASSES == {n for n, p in PASSES.items() if p.kind == registry.EGRAPH}
    assert {n for n, p in PASSES.items() if p.kind == registry.RESHAPE} == {
        f"reshape-{n}" for n, _, _ in registry.RESHAPE_STEPS}


@pytest.mark.parametrize("name", sorted(n for n, p in PASSES.items() if p.kind != registry.EGRAPH))
def test_every_ir_pass_runs_alone_in_the_pass_manager(name):
    """Every IR pass of the registry can be named in ``passes=`` (``--passes``) and keeps the
    language there (the pass manager's own check)."""
    g = parse('root ::= a a b\na ::= "x" | "x"\nb ::= b "y" | "z"\n', "gbnf")
    result = passes.optimize(g, target="generic", passes=[name])
    assert result.report.verified == "ok"


def test_the_targets_compose_the_registrys_reshapings(monkeypatch):
    """The llama.cpp fix-up runs the registry's ``reshape-widest-last`` (a planted step is called)."""
    from gramopt.targets import llamacpp
    seen = []
    step = PASSES["reshape-widest-last"]
    monkeypatch.setitem(PASSES, "reshape-widest-last",
                        registry.Pass(step.name, step.kind, step.run, lambda g: seen.append(g) or step.step(g)))
    llamacpp.fixup(parse('root ::= [a-z] | "x"\n', "gbnf"), [], {})
    assert len(seen) == 1
