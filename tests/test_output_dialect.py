"""The output dialect follows from the target: every target × output extension.

A grammar the xgrammar target gives lookahead assertions: written where the dialect asked
for carries them (.ebnf, or no extension: the target's dialect), else written without them
with a warning that names what was dropped, or refused (exit 2, nothing written) under
``--strict``. The report names the dialect written. Other targets add nothing a dialect
could lose.
"""

from __future__ import annotations

import pytest

from gramopt.cli import main
from gramopt.formats import parse, read
from gramopt.targets import TARGETS

SMALL_JSON = r'''root ::= value
value ::= object | array | "true" ws | string
object ::= "{" ws (string ":" ws value ("," ws string ":" ws value)*)? "}" ws
array ::= "[" ws (value ("," ws value)*)? "]" ws
string ::= "\"" [a-z]* "\"" ws
ws ::= [ \t\n]*
'''
EXTENSIONS = (".gbnf", ".ebnf", ".lark")  # .cfg: a GBNF grammar never converts to NLTK's token CFG

# The output forms are the point here, not the optimize: each target optimizes SMALL_JSON once in
# this module and every extension, --strict run and -o - writes that result (conftest's
# optimize_once_per_module; in-process runs only: the folder test's batch worker optimizes itself,
# on one worker for both its batches)
pytestmark = pytest.mark.usefixtures("optimize_once_per_module")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    p = tmp_path_factory.mktemp("dialect") / "small_json.gbnf"
    p.write_text(SMALL_JSON, encoding="utf-8")
    return p


def _carries(target) -> bool:
    return target.output_dialect is not None


@pytest.mark.parametrize("ext", EXTENSIONS)
@pytest.mark.parametrize("name", list(TARGETS))
def test_target_by_extension(src, tmp_path, capsys, name, ext):
    target = TARGETS[name]
    out = tmp_path / f"out{ext}"
    assert main(["optimize", str(src), "-o", str(out), "--target", name, "--report"]) == 0
    text, err = out.read_text(encoding="utf-8"), capsys.readouterr()
    dialect = ext[1:]
    assert "written as" in err.out
    read(str(out))  # what was written reads back in the dialect of its extension
    if _carries(target) and dialect != target.output_dialect:
        assert "(=" not in text
        assert "warning:" in err.err and "lookahead assertions" in err.err and "--to ebnf" in err.err
        strict = tmp_path / f"strict{ext}"
        assert main(["optimize", str(src), "-o", str(strict), "--target", name, "--strict"]) == 2
        assert not strict.exists()
        err = capsys.readouterr().err
        assert "nothing was written (--strict)" in err and "written without them" not in err
    else:
        assert "warning:" not in err.err
        assert ("(=" in text) == _carries(target)
        assert main(["optimize", str(src), "-o", str(tmp_path / f"s{ext}"), "--target", name, "--strict"]) == 0


@pytest.mark.parametrize("name", list(TARGETS))
def test_target_dialect_without_extension(src, capsys, name):
    """``-o -``: the target's dialect (xgrammar: xgrammar EBNF with its assertions), else the input's."""
    assert main(["optimize", str(src), "-o", "-", "--target", name]) == 0
    text = capsys.readouterr().out
    target = TARGETS[name]
    dialect = target.output_dialect or "gbnf"
    parse(text, dialect)
    assert ("(=" in text) == _carries(target)


def test_folder_output_follows_the_target(src, tmp_path, capsys, one_batch_worker):
    """(Both batches run on one spawned worker, conftest's ``one_batch_worker``.)"""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.gbnf").write_text(SMALL_JSON, encoding="utf-8")
    assert main(["optimize", str(folder), "-o", str(tmp_path / "out"), "--target", "xgrammar", "-j", "1"]) == 0
    assert "(=" in (tmp_path / "out" / "a.ebnf").read_text(encoding="utf-8")
    assert main(["optimize", str(folder), "-o", str(tmp_path / "gen"), "-j", "1"]) == 0
    assert (tmp_path / "gen" / "a.gbnf").exists()


LARK_INPUT = 'start: item+\nitem: "a" | "b" "c"\n'


@pytest.mark.parametrize("target,warned", [("xgrammar", True), ("llama.cpp", True), ("llguidance", False),
                                           ("generic", False)])
def test_a_lark_input_for_an_engine_without_lark_is_written_as_lark_with_a_warning(tmp_path, target, warned):
    """xgrammar and llama.cpp load no Lark: the output stays Lark (converting would change the
    bytes of every Lark corpus output for them) and one warning line says so; a target whose
    engine loads Lark (or no engine) writes it silently, and so does a Lark output asked for
    (``--to lark``; a .lark output of a GBNF input: test_target_by_extension)."""
    from gramopt.optimizer import Job, Options, run_job
    src = tmp_path / "in.lark"
    src.write_text(LARK_INPUT, encoding="utf-8")
    out = run_job(Job(str(src), Options(target=target, fast=True), output=str(tmp_path / "out.lark")))
    said = [w for w in out.result.report.warnings if "does not load" in w and "written as Lark" in w]
    assert out.result.report.written_as == "lark"
    assert len(said) == (1 if warned else 0)
    if warned:
        assert f"which {target} does not load" in said[0] and "\n" not in said[0]
        asked = run_job(Job(str(src), Options(target=target, fast=True, to="lark"), output=str(tmp_path / "o.lark")))
        assert not [w for w in asked.result.report.warnings if "does not load" in w]  # asked for: not warned
