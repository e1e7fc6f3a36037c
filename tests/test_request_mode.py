"""The per-request mode (``optimize(..., fast=True)``, ``gramopt optimize --fast``): the
request passes once, a check proportional to what changed, the same bytes every time."""

from __future__ import annotations

from pathlib import Path

import pytest

from gramopt.cli import main
from gramopt.formats import parse, write
from gramopt.passes import REQUEST_PASSES, changed_rules, optimize, request_bounds
from gramopt.verify import check_equivalence

DATA = Path(__file__).resolve().parent / "data"
JSONISH = r'''
root ::= "{" ws pair (ws "," ws pair)* ws "}"
pair ::= string ws ":" ws value
value ::= string | number | "true" | "false" | "null"
string ::= "\"" char* "\""
char ::= [^"\\] | "\\" ["\\/bfnrt]
number ::= "-"? digit+
digit ::= [0-9]
ws ::= [ \t\n]*
'''


@pytest.mark.parametrize("target", ["generic", "xgrammar", "llama.cpp"])
def test_request_mode_keeps_the_language_and_says_how_it_checked(target):
    g = parse(JSONISH, "gbnf")
    r = optimize(g, target=target, fast=True)
    # the request passes once, then a target's judges (llama.cpp: its guard)
    assert [p.name for p in r.report.passes if p.name not in ("guard", "engine-check")] == list(REQUEST_PASSES)
    assert r.report.verified == "ok"
    assert r.report.verify_stats["mode"].startswith("per-request: ")
    assert check_equivalence(g, r.grammar).ok  # the full check agrees
    again = optimize(g, target=target, fast=True)
    assert write(again.grammar, "gbnf") == write(r.grammar, "gbnf")


def test_request_check_grows_with_what_changed():
    g = parse(JSONISH, "gbnf")
    same = request_bounds(g, g)[0]
    out = optimize(g, target="generic", fast=True, verify=False).grammar
    assert changed_rules(g, g) == 0 and changed_rules(g, out) > 1
    assert same.derivations < request_bounds(g, out)[0].derivations


def test_request_check_finds_a_changed_language():
    a = parse('root ::= "a" x\nx ::= "b" | "c"', "gbnf")
    b = parse('root ::= "a" x\nx ::= "b"', "gbnf")
    bounds, methods = request_bounds(a, b)
    assert not check_equivalence(a, b, bounds, methods).ok


def test_cli_fast(tmp_path, capsys):
    src = tmp_path / "j.gbnf"
    src.write_text(JSONISH, encoding="utf-8")
    out = tmp_path / "o.gbnf"
    assert main(["optimize", str(src), "-o", str(out), "--fast", "--report"]) == 0
    report = capsys.readouterr().out
    assert "saturate" not in report and "verification ok" in report
    assert check_equivalence(parse(JSONISH, "gbnf"), parse(out.read_text(encoding="utf-8"), "gbnf")).ok
