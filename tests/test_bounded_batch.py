"""A batch never loses an item: an item's failure, whatever its cause (an unexpected exception
in gramopt included), fails that item alone with its message, every other item is written,
and the exit status is the worst item's; an output location that cannot be written is exit 2
with one line, before any work."""

from __future__ import annotations

import os
from dataclasses import asdict
import shutil
from pathlib import Path

import pytest

from gramopt.cli import batch
from gramopt.cli.batch import Item, optimize_item
from gramopt.cli import main
from gramopt.cli.exits import EXIT_INTERNAL, EXIT_USAGE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FAULT = "# gramopt-test: raise here\n"
# how the batch fails an item alone is the point, not the target: the generic target's spawned
# workers load no judge engines (~5 CPU s each for the default target's three over Qwen's vocabulary)
GENERIC = ["--target", "generic"]

# Loaded by every worker process the batch spawns (PYTHONPATH): the item whose text holds
# FAULT raises an exception gramopt does not expect, deep in the item's optimization.
SITECUSTOMIZE = f'''
import gramopt.cli.batch as _batch
_real = _batch._optimize
def _optimize(it, options):
    if {FAULT!r} in it.text:
        raise RuntimeError("planted fault")
    return _real(it, options)
_batch._optimize = _optimize
'''


@pytest.fixture
def three(tmp_path) -> Path:
    """Two good grammars and one that a planted fault makes raise."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(EXAMPLES / "anbn_g1.ebnf", src / "a.ebnf")
    shutil.copy(EXAMPLES / "anbn_g2.ebnf", src / "c.ebnf")
    (src / "b.ebnf").write_text(FAULT + (EXAMPLES / "anbn_g2.ebnf").read_text(encoding="utf-8"), encoding="utf-8")
    return src


def test_an_internal_error_fails_its_item_alone(three, tmp_path, monkeypatch, capsys):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hook), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    assert main(["optimize", str(three), "-o", str(out), "-j", "2", "-q", *GENERIC]) == EXIT_INTERNAL
    assert sorted(p.name for p in out.glob("*.ebnf")) == ["a.ebnf", "c.ebnf"]
    err = capsys.readouterr().err
    assert "b.ebnf: internal error: RuntimeError: planted fault" in err


def test_optimize_item_returns_an_unexpected_exception(monkeypatch):
    def boom(it, options):
        raise KeyError("no such thing")
    monkeypatch.setattr(batch, "_optimize", boom)
    it = Item("x.gbnf", "gbnf", 'root ::= "a"\n', "x.gbnf", 0, "out/x.gbnf")
    r = optimize_item(asdict(it), {}, None)
    assert r["code"] == EXIT_INTERNAL and r["text"] is None
    assert r["message"] == "x.gbnf: internal error: KeyError: 'no such thing'"


def test_an_output_that_cannot_be_written_fails_its_item_alone(three, tmp_path, capsys):
    (three / "b.ebnf").write_text((EXAMPLES / "anbn_g2.ebnf").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    (out / "b.ebnf").mkdir(parents=True)  # where b's output goes, a folder
    assert main(["optimize", str(three), "-o", str(out), "-j", "1", "-q", *GENERIC]) == EXIT_USAGE
    assert (out / "a.ebnf").is_file() and (out / "c.ebnf").is_file()
    assert "b.ebnf: error: cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("make", ["file", "under_a_file"])
def test_an_output_location_that_is_not_a_folder_is_exit_2_before_any_work(three, tmp_path, capsys, make):
    target = tmp_path / "taken"
    target.write_text("keep me", encoding="utf-8")
    out = target if make == "file" else target / "out"
    assert main(["optimize", str(three), "-o", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{out}: error:")
    assert target.read_text(encoding="utf-8") == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_is_exit_2_before_any_work(three, tmp_path, capsys):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    try:
        assert main(["optimize", str(three), "-o", str(out)]) == EXIT_USAGE
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "permission denied" in err[0]
    finally:
        out.chmod(0o755)


def test_check_outdir_accepts_new_and_existing_folders(tmp_path):
    batch.check_outdir(str(tmp_path))
    batch.check_outdir(str(tmp_path / "new" / "deeper"))
