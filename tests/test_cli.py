"""The command line as a user and a build pipeline drive it: exit codes, located errors,
atomic outputs that never touch the input, --check/--diff, folders with a cache, and the
refusal to write an output whose language differs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gramopt import passes as passes_mod
from gramopt.cli import main
from gramopt.formats import read
from gramopt.grammar import Literal, alt

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

DELEGATED = """# a^n b^n through a delegate
root ::= "a" inner "b" | ""
inner ::= "a" inner "b" | ""
"""


def run(*argv) -> int:
    return main([str(a) for a in argv])


@pytest.fixture
def g2(tmp_path) -> Path:
    p = tmp_path / "g2.ebnf"
    p.write_text(DELEGATED, encoding="utf-8")
    return p


def test_console_script_runs_on_the_bundled_example():
    out = subprocess.run([sys.executable, "-m", "gramopt.cli", "analyze", str(EXAMPLES / "anbn_g2.ebnf")],
                         capture_output=True, text=True, check=True).stdout
    assert "kappa                             15" in out


@pytest.mark.parametrize("name,k", [("anbn_g1.ebnf", 8), ("anbn_g2.ebnf", 15)])
def test_analyze_reports_kappa(name, k, capsys):
    assert run("analyze", EXAMPLES / name, "--json") == 0
    assert json.loads(capsys.readouterr().out)["kappa"] == k


def test_bad_input_is_one_located_line_with_a_caret(tmp_path, capsys):
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= "a" | b\nb ::= "x" [z-a]\n', encoding="utf-8")
    assert run("optimize", bad, "-o", tmp_path / "out.gbnf") == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{bad}:2:12: error: ")
    assert err[1].strip() == 'b ::= "x" [z-a]' and err[2].strip() == "^"
    assert "Traceback" not in "\n".join(err)
    assert not (tmp_path / "out.gbnf").exists()


def test_missing_file_and_unknown_pass_are_usage_errors(g2, tmp_path, capsys):
    assert run("analyze", tmp_path / "nope.ebnf") == 2
    assert run("optimize", g2, "-o", "-", "--passes", "cleanup,nosuchpass") == 2
    err = capsys.readouterr().err
    assert "nosuchpass" in err and "Traceback" not in err


def test_optimize_writes_the_smaller_equivalent_grammar(g2, tmp_path, capsys):
    before = g2.read_bytes()
    out = tmp_path / "out.ebnf"
    assert run("optimize", g2, "-o", out, "--report", "--target", "generic") == 0  # the paper's G2 → G1
    assert g2.read_bytes() == before  # the input is never touched
    text = out.read_text(encoding="utf-8")
    assert "inner" not in text and "root ::=" in text
    optimized = read(str(out))
    from gramopt.costmodels import kappa
    assert kappa(optimized) == 8
    report = capsys.readouterr().out
    assert "verification ok" in report and "total" in report
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]


def test_optimize_to_stdout_and_json_report(g2, capsys):
    assert run("optimize", g2, "-o", "-", "--json", "--target", "generic") == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("# a^n b^n") and "root ::=" in cap.out
    rep = json.loads(cap.err)
    assert rep["kappa_before"] == 15 and rep["kappa_after"] == 8 and rep["verified"] == "ok"


def test_check_and_diff(g2, tmp_path, capsys):
    # the default target rewrites G2 as G1 too (no engine is predicted slower)
    assert run("optimize", g2, "--check") == 1
    assert run("optimize", g2, "--check", "--target", "generic") == 1
    assert "would change" in capsys.readouterr().err
    assert run("optimize", g2, "--diff", "--target", "generic") == 0
    diff = capsys.readouterr().out
    assert diff.startswith("---") and "-inner ::=" in diff
    done = tmp_path / "done.ebnf"
    assert run("optimize", g2, "-o", done, "--target", "generic") == 0
    assert run("optimize", done, "--check", "--target", "generic") == 0  # optimizing the output changes nothing


def test_refuses_to_overwrite_the_input(g2, capsys):
    before = g2.read_bytes()
    assert run("optimize", g2, "-o", g2) == 2
    assert g2.read_bytes() == before


def test_convert_between_dialects(tmp_path, capsys):
    assert run("convert", EXAMPLES / "anbn_g1.ebnf", "--to", "lark", "-o", tmp_path / "g1.lark") == 0
    g = read(str(tmp_path / "g1.lark"))
    assert g.dialect == "lark"


def test_unsound_output_is_refused_with_a_counterexample(g2, tmp_path, monkeypatch, capsys):
    """A planted wrong pass: the check must catch it, name it, and write nothing."""
    def broken(g, ctx, rep):
        r = g.rule(g.start)
        return g.replace_rules([r.__class__(r.name, alt(r.body, Literal("zz"))) if x.name == g.start else x
                                for x in g.rules])
    monkeypatch.setitem(passes_mod.PASSES, "target", broken)
    out = tmp_path / "out.ebnf"
    # generic: the portable target's guard would fall back to the input before verification
    assert run("optimize", g2, "-o", out, "--target", "generic") == 3
    err = capsys.readouterr().err
    assert "nothing written" in err and "first changed by pass: target" in err
    shown = err.split("counterexample: ")[1]
    assert shown.startswith(("z", '"z', "'z")) and "not of the original" in shown
    assert not out.exists()


def test_folder_build_step_uses_the_cache(tmp_path, capsys, one_batch_worker):
    """(This module's batches lease their workers from conftest's ``one_batch_worker``: a pool of
    one worker serves this test's last run and the next test's batch.)"""
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    shutil.copy(EXAMPLES / "anbn_g1.ebnf", src / "g1.ebnf")
    (src / "sub" / "g2.ebnf").write_text(DELEGATED, encoding="utf-8")
    (src / "notes.txt").write_text("not a grammar", encoding="utf-8")
    dst = tmp_path / "out"
    assert run("optimize", src, "-o", dst, "-j", "2", "--target", "generic") == 0
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*.ebnf")) == ["g1.ebnf", "sub/g2.ebnf"]
    assert "inner" not in (dst / "sub" / "g2.ebnf").read_text(encoding="utf-8")
    capsys.readouterr()
    assert run("optimize", src, "-o", dst, "-j", "2", "--target", "generic") == 0
    assert "2 items, 2 served from the cache, 0 to optimize" in capsys.readouterr().err
    os.utime(src / "g1.ebnf")  # a touch is not a change: the cache is by content
    (src / "sub" / "g2.ebnf").write_text(DELEGATED + "extra ::= \"q\"\n", encoding="utf-8")
    assert run("optimize", src, "-o", dst, "-j", "2", "--target", "generic") == 0
    assert "2 items, 1 served from the cache, 1 to optimize" in capsys.readouterr().err


def test_folder_with_a_bad_file_fails_but_writes_the_others(tmp_path, capsys, one_batch_worker):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(EXAMPLES / "anbn_g1.ebnf", src / "good.ebnf")
    (src / "bad.gbnf").write_text("root ::= (\n", encoding="utf-8")
    dst = tmp_path / "out"
    assert run("optimize", src, "-o", dst, "-j", "1", "--target", "generic") == 2  # the batch, not the target, is the point
    assert (dst / "good.ebnf").exists() and not (dst / "bad.gbnf").exists()
    assert "bad.gbnf:" in capsys.readouterr().err
