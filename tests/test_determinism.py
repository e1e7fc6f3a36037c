"""Same input, same version, same options → the same bytes, whatever the machine's load and
whatever files lie in the environment.

* Saturation and verification budgets are work units: a clock that runs fast (a loaded
  machine) changes neither the e-graph nor the verifier's coverage, until the outer safety
  limit, which falls back (the e-graph pass keeps its input) or refuses (verification) and
  says so.
* A calibrated cost model is used only when named (``cost_model=``, ``--cost-model``): one in
  $GRAMOPT_MODELS or ~/.config/gramopt/models changes nothing; the model used is in the
  report and in the batch cache key.
"""

from __future__ import annotations

import itertools
import json
import shutil

import pytest

import gramopt.egraph.runner as runner_mod
import gramopt.verify.enumeration as enum_mod
from gramopt.cli.batch import Item, item_key
from gramopt.costmodels.calibration import MODELS_DIR
from gramopt.egraph import GrammarEGraph, Limits, Runner, StopReason
from gramopt.formats import parse, write
from gramopt.grammar import GrammarError
from gramopt.passes import cost_model_used, optimize
from gramopt.targets import TARGETS
from gramopt.verify import check_equivalence
from gramopt.verify.result import Bounds
from gramopt.rewrites import rules

GRAMMARS = [
    'root ::= s\ns ::= s s | "a" | "b"\n',
    'root ::= e\ne ::= e "+" e | e "*" e | "(" e ")" | [0-9]+\n',
    'root ::= "{" ws (pair ("," ws pair)*)? "}"\npair ::= "\\"" [a-z]* "\\"" ws ":" ws [0-9]+ ws\nws ::= [ \\t]*\n',
]


def _fast_clock(monkeypatch, module, step: float):
    """``module``'s clock advances ``step`` seconds per reading: a machine ``step``/ε slower."""
    ticks = itertools.count()
    monkeypatch.setattr(module.time, "perf_counter", lambda: next(ticks) * step)


@pytest.mark.parametrize("src", GRAMMARS)
def test_saturation_does_not_read_the_clock(src, monkeypatch):
    g = parse(src, "gbnf")
    calm = Runner(rules(), Limits()).run(GrammarEGraph(g))
    _fast_clock(monkeypatch, runner_mod, 0.2)  # the old 1 s budget would stop after ~5 readings
    busy = Runner(rules(), Limits()).run(GrammarEGraph(g))
    assert (busy.stop_reason, busy.iterations, busy.nodes_after) == \
        (calm.stop_reason, calm.iterations, calm.nodes_after)
    assert busy.stop_reason is not StopReason.SAFETY_LIMIT


def test_saturation_safety_limit_refuses():
    """Keeping the input when time runs out would give other bytes under load: refuse instead."""
    g = parse(GRAMMARS[1], "gbnf")
    with pytest.raises(GrammarError, match="safety time limit"):
        optimize(g, passes=["saturate"], limits=Limits(safety_seconds=0.0), verify=False)


def test_no_wall_clock_limit_by_default():
    """Work units bound saturation and verification; time is only what a caller asks for."""
    assert Limits().safety_seconds == float("inf") and Bounds().safety_seconds == float("inf")


def test_verifier_budgets_do_not_read_the_clock(monkeypatch):
    g = parse(GRAMMARS[2], "gbnf")
    calm = check_equivalence(g, g, methods=("enumeration",)).stats["enumeration"]
    _fast_clock(monkeypatch, enum_mod, 0.01)  # the old 0.6 s budget: ~60 readings
    busy = check_equivalence(g, g, methods=("enumeration",)).stats["enumeration"]
    assert (busy["prefixes"], busy["complete_len"]) == (calm["prefixes"], calm["complete_len"])
    assert not busy["safety_limit"]


def test_verifier_safety_limit_refuses():
    g = parse(GRAMMARS[1], "gbnf")
    assert check_equivalence(g, g, Bounds(safety_seconds=0.0)).stats["safety_limit"]
    with pytest.raises(GrammarError, match="safety time limit"):
        optimize(g, bounds=Bounds(safety_seconds=0.0))


def _other_model(folder, engine="xgrammar"):
    """A valid model for ``engine`` with other node weights, as ``gramopt calibrate`` writes it."""
    with open(f"{MODELS_DIR}/{engine}.json", encoding="utf-8") as f:
        data = json.load(f)
    data["node_weights"] = {k: v + 7.0 for k, v in data["node_weights"].items()}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{engine}.json").write_text(json.dumps(data), encoding="utf-8")
    return data["node_weights"]


@pytest.mark.parametrize("src", GRAMMARS)
def test_a_model_in_the_environment_changes_nothing(src, tmp_path, monkeypatch):
    g = parse(src, "gbnf")
    before = {t: write(optimize(g, target=t, verify=False).grammar, "ebnf") for t in ("xgrammar", "llguidance")}
    for engine in ("xgrammar", "llguidance"):
        _other_model(tmp_path / "env", engine)
        _other_model(tmp_path / "xdg" / "gramopt" / "models", engine)
    monkeypatch.setenv("GRAMOPT_MODELS", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for t, text in before.items():
        r = optimize(g, target=t, verify=False)
        assert write(r.grammar, "ebnf") == text
        assert r.report.cost_model.startswith(f"shipped {t}.json")


def test_a_named_model_is_used_and_named(tmp_path):
    weights = _other_model(tmp_path / "models")
    t = TARGETS["xgrammar"]
    used, source = cost_model_used(t, str(tmp_path / "models"))
    assert used == weights and str(tmp_path / "models" / "xgrammar.json") in source and "sha256" in source
    r = optimize(parse(GRAMMARS[0], "gbnf"), target="xgrammar", verify=False, cost_model=str(tmp_path / "models"))
    assert r.report.cost_model == source
    assert "cost model" in r.report.format() and r.report.to_json()["cost_model"] == source
    assert cost_model_used(TARGETS["generic"], None) == (None, None)  # κ + SAC only


def test_the_cache_key_names_the_model(tmp_path):
    item = Item("a.gbnf", "gbnf", GRAMMARS[0], "a.gbnf", 0, "out/a.ebnf")
    shipped = item_key(item, {"target": "xgrammar"})
    _other_model(tmp_path / "m1")
    named = item_key(item, {"target": "xgrammar", "cost_model": str(tmp_path / "m1")})
    shutil.copytree(tmp_path / "m1", tmp_path / "m2")
    data = json.loads((tmp_path / "m2" / "xgrammar.json").read_text())
    data["node_weights"]["concat"] += 1.0
    (tmp_path / "m2" / "xgrammar.json").write_text(json.dumps(data))
    edited = item_key(item, {"target": "xgrammar", "cost_model": str(tmp_path / "m2")})
    assert len({shipped, named, edited}) == 3


def test_factoring_memo_keeps_each_grammars_own_comments():
    """An equal rule seen earlier in another grammar (a batch worker's previous item) must not
    lend its comment: batch output then depended on which worker took which grammar first."""
    from gramopt.transforms.registry import PASSES
    factor = PASSES["cleanup-factoring"]
    plain = parse('root ::= ws a\nws ::= [ \\t]*\na ::= "xyz" ws "p" | "xyz" ws "q" | "xyz" ws "r"\n', "gbnf")
    noted = parse('root ::= ws a\n# optional space\nws ::= [ \\t]*\na ::= "yes" ws "p" | "yes" ws "q" | "yes" ws "r"\n', "gbnf")
    assert noted.rule_map["ws"].comment and factor(noted) != noted  # `a` is factored: rules are rebuilt
    factor(plain)
    assert factor(noted).rule_map["ws"].comment == noted.rule_map["ws"].comment
    factor(noted)
    assert not factor(plain).rule_map["ws"].comment


# ---------------------------------------------------------------- the shipped llama.cpp model


def test_the_llamacpp_target_reads_its_shipped_model(tmp_path):
    """``--target llama.cpp`` extracts and guards under ``models/llama.cpp.json`` (not the
    generic weights): the report, its JSON, the CLI's report and the cache key name it by the
    SHA-256 of its bytes."""
    import hashlib
    import subprocess
    import sys

    path = f"{MODELS_DIR}/llama.cpp.json"
    with open(path, "rb") as f:
        raw = f.read()
    shipped = json.loads(raw)
    assert shipped["engine"] == "llama.cpp" and shipped["n_steps"] > 0
    used, source = cost_model_used(TARGETS["llama.cpp"], None)
    assert used == shipped["node_weights"]
    assert source == f"shipped llama.cpp.json (sha256 {hashlib.sha256(raw).hexdigest()[:16]})"
    r = optimize(parse(GRAMMARS[2], "gbnf"), target="llama.cpp", verify=False)
    assert r.report.cost_model == source and r.report.to_json()["cost_model"] == source
    assert f"cost model {source}" in r.report.format()
    src = tmp_path / "a.gbnf"
    src.write_text(GRAMMARS[2], encoding="utf-8")
    cli = subprocess.run([sys.executable, "-m", "gramopt.cli", "optimize", str(src), "--target", "llama.cpp",
                          "--json", "--no-verify"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["cost_model"] == source


def test_the_llamacpp_cache_key_names_its_model(tmp_path):
    item = Item("a.gbnf", "gbnf", GRAMMARS[2], "a.gbnf", 0, "out/a.gbnf")
    shipped = item_key(item, {"target": "llama.cpp"})
    assert shipped == item_key(item, {"target": "llama.cpp"})
    _other_model(tmp_path / "m", "llama.cpp")
    assert item_key(item, {"target": "llama.cpp", "cost_model": str(tmp_path / "m")}) != shipped


def test_a_model_in_the_environment_changes_nothing_for_llamacpp(tmp_path, monkeypatch):
    g = parse(GRAMMARS[2], "gbnf")
    before = write(optimize(g, target="llama.cpp", verify=False).grammar, "gbnf")
    _other_model(tmp_path / "env", "llama.cpp")
    monkeypatch.setenv("GRAMOPT_MODELS", str(tmp_path / "env"))
    r = optimize(g, target="llama.cpp", verify=False)
    assert write(r.grammar, "gbnf") == before and r.report.cost_model.startswith("shipped llama.cpp.json")


def test_the_cache_key_names_gramopts_sources(tmp_path, monkeypatch):
    """An output-changing commit keeps the version string: the key holds the sources' digest,
    which moves with any source file's bytes or name."""
    from gramopt.optimizer import cache
    item = Item("a.gbnf", "gbnf", GRAMMARS[0], "a.gbnf", 0, "out/a.ebnf")
    before = item_key(item, {"target": "portable"})
    monkeypatch.setattr(cache, "code_digest", lambda: "another")
    assert item_key(item, {"target": "portable"}) != before
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "b.txt").write_text("not a source\n")
    one = cache.sources_digest(str(tmp_path / "pkg"))
    (tmp_path / "pkg" / "b.txt").write_text("still not a source\n")
    assert cache.sources_digest(str(tmp_path / "pkg")) == one
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert cache.sources_digest(str(tmp_path / "pkg")) != one
    (tmp_path / "pkg" / "a.py").rename(tmp_path / "pkg" / "c.py")
    assert len({one, cache.sources_digest(str(tmp_path / "pkg"))}) == 2
