"""Nesting of any depth (issue 24): the GBNF/EBNF reader reads it without recursion and lifts
what would nest a rule body deeper than ``MAX_BODY_DEPTH`` into rules of its own (the same
language, and a body no deeper reads back as written); Lark refuses more than 100 levels
with the place, exit 2. llama.cpp's JSON-schema converter writes ``maxLength: 160`` as 155
nested optional groups (JSONSchemaBench o21459)."""

from __future__ import annotations

import os

import pytest

from gramopt import inputs
from gramopt.cli import main
from gramopt.formats import parse, read, write
from gramopt.formats.ebnf import MAX_BODY_DEPTH, MAX_NESTING
from gramopt.grammar import MAX_PASS_DEPTH, GrammarError, Repeat, depth, walk
from gramopt.verify import check_equivalence

DEEP = 10_000
SCHEMAS = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "data", "jsonschemabench")


def counted(n: int) -> str:
    """``root ::= "a" ("a" ("a" ...)?)?`` with ``n`` nested groups: a{1,n+1}, the shape
    llama.cpp's converter gives a bounded repetition."""
    return 'root ::= "a" ' + '("a" ' * n + ")?" * n + "\n"


def run(*argv) -> int:
    return main([str(a) for a in argv])


@pytest.mark.parametrize("dialect", ["gbnf", "ebnf"])
def test_deep_groups_read_into_bounded_rules_of_the_same_language(dialect):
    n = 2000  # the language check's cost grows with n; the reading is checked at DEEP below
    g = parse(counted(n), dialect)
    assert max(depth(r.body) for r in g.rules) <= MAX_BODY_DEPTH == MAX_PASS_DEPTH
    assert len(g.rules) > n // MAX_BODY_DEPTH
    assert check_equivalence(g, parse(f'root ::= "a"{{1,{n + 1}}}\n', dialect)).ok
    assert not check_equivalence(g, parse(f'root ::= "a"{{1,{n}}}\n', dialect)).ok


@pytest.mark.parametrize("dialect", ["gbnf", "ebnf"])
@pytest.mark.parametrize("text", [
    counted(DEEP),
    "root ::= " + "(" * DEEP + '"a" | "b"' + ")" * DEEP + "\n",
    'root ::= "a"' + "*" * DEEP + "\n",
    'root ::= "x" ' + '("y" | ' * DEEP + '"z"' + ")+" * DEEP + "\n",
], ids=["optional-chain", "parentheses", "stacked-stars", "alternation-chain"])
def test_deep_nesting_round_trips(text, dialect):
    g = parse(text, dialect)
    out = write(g, dialect)
    if dialect == "gbnf" and text.startswith('root ::= "a"**'):
        # GBNF writes a repetition of a repetition merged where its counts allow
        # (``formats.ebnf._unnested_repeat``: llguidance's reader fails on the nest), in each
        # of the rules the reader lifted the deep nest into: the same language, no nest left
        back = parse(out, dialect)
        assert not any(isinstance(x, Repeat) and isinstance(x.item, Repeat) for r in back.rules for x in walk(r.body))
        assert check_equivalence(back, parse('root ::= "a"*\n', dialect)).ok
    else:
        assert parse(out, dialect) == g
    assert write(parse(out, dialect), dialect) == out


def test_a_body_at_the_bound_reads_as_written():
    n = (MAX_BODY_DEPTH - 1) // 2  # each level nests a sequence and an optional
    g = parse(counted(n), "gbnf")
    assert [r.name for r in g.rules] == ["root"]
    assert len(parse(counted(n + 1), "gbnf").rules) == 2


def test_lifted_rules_take_free_names_after_their_rule():
    g = parse(counted(200) + 'root-1 ::= "taken"\n', "gbnf")
    names = [r.name for r in g.rules]
    assert names[0] == "root" and names[-1] == "root-1" and "root-2" in names
    assert names.index("root-2") < names.index("root-1")


def test_parentheses_that_collapse_are_not_lifted():
    g = parse("root ::= " + "(" * DEEP + '"a"' + ")" * DEEP + "\n", "gbnf")
    assert write(g, "gbnf") == 'root ::= "a"\n'


def test_an_error_deep_inside_is_located():
    text = "root ::= " + "(" * DEEP + '"a" | ::=' + ")" * DEEP + "\n"
    with pytest.raises(GrammarError) as info:
        parse(text, "gbnf")
    assert (info.value.pos.line, info.value.pos.col) == (1, DEEP + 16)


# ---------------------------------------------------------------- Lark


def lark_counted(n: int) -> str:
    return 'start: "a" ' + '("a" ' * n + ")?" * n + "\n"


def test_lark_reads_the_bound_and_refuses_deeper_with_the_place():
    g = parse(lark_counted(MAX_NESTING - 1), "lark")
    assert parse(write(g, "lark"), "lark") == g
    with pytest.raises(GrammarError) as info:
        parse(lark_counted(DEEP), "lark")
    assert "nested more than 100 levels" in info.value.message
    assert (info.value.pos.line, info.value.pos.col) == (1, 13 + 5 * MAX_NESTING)  # the "a" 101 groups in


@pytest.mark.parametrize("command", ["analyze", "convert"])
def test_lark_10000_levels_is_one_located_line_and_exit_2(tmp_path, capsys, command):
    src = tmp_path / "deep.lark"
    src.write_text("start: " + "(" * DEEP + '"a"' + ")" * DEEP + "\n", encoding="utf-8")
    argv = [command, src] + (["-o", tmp_path / "out.lark"] if command == "convert" else [])
    assert run(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{src}:1:{8 + DEEP}: error: parentheses nested more than 100 levels deep")
    assert "Traceback" not in err and max(len(line) for line in err.splitlines()) < 200


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize("suffix", ["gbnf", "ebnf"])
def test_convert_and_analyze_take_10000_levels(tmp_path, capsys, suffix):
    src, out = tmp_path / f"deep.{suffix}", tmp_path / f"out.{suffix}"
    src.write_text(counted(DEEP), encoding="utf-8")
    assert run("convert", src, "-o", out) == 0
    assert read(str(out)) == read(str(src))
    assert run("analyze", src) == 0


def _schema(name: str) -> str:
    path = os.path.join(SCHEMAS, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not vendored here")
    return path


@pytest.mark.slow  # 175 s CPU-bound at load 12 (the optimizer on a 155-group chain)
def test_schema_o21459_through_llamacpps_converter_optimizes(tmp_path, capsys):
    pytest.importorskip("llama_cpp")
    src, out = _schema("Github_easy---o21459.json"), tmp_path / "out.gbnf"
    assert run("optimize", src, "--converter", "llama.cpp", "--target", "portable", "--fast", "-o", out) == 0
    got = read(str(out))
    assert max(depth(r.body) for r in got.rules) <= MAX_PASS_DEPTH
    converted = inputs.read(src, converter="llama.cpp")
    assert check_equivalence(converted, got).ok


def test_schema_o70295_is_refused_in_one_line_for_llamacpps_escape(tmp_path, capsys):
    """llama.cpp's Python converter writes ``"\\.\\d"`` into a GBNF string, an escape
    llama.cpp's own grammar parser refuses too."""
    pytest.importorskip("llama_cpp")
    src = _schema("Github_hard---o70295.json")
    assert run("optimize", src, "--converter", "llama.cpp", "--target", "portable", "--fast",
               "-o", tmp_path / "out.gbnf") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"{src}:1:1: error:") and "bad escape" in err[0]


# ---------------------------------------------------------------- engines


def starred_chain(n: int) -> str:
    """``r_i ::= ("a" r_{i+1})*``, n rules: llguidance 1.9.1's stack overflows (a segmentation
    fault) at 2,000 of them, an inlined depth of 6,001."""
    return ("".join(f'r{i} ::= ("a" r{i + 1})*\n' for i in range(n)) + f'r{n} ::= "b"\n').replace("r0 ::=", "root ::=")


def test_llguidance_is_not_given_a_grammar_past_its_stack():
    pytest.importorskip("llguidance")
    from gramopt.engines import llguidance
    from gramopt.judge.masks import EngineCheck, NotChecked
    deep = parse(starred_chain(3000), "gbnf")
    assert "9,001 levels deep" in llguidance.too_deep(deep)
    assert llguidance.too_deep(parse(starred_chain(900), "gbnf")) is None  # 2,701: given
    assert llguidance.engine_difference(deep, parse(starred_chain(2999), "gbnf")) is None
    with pytest.raises(NotChecked, match="llguidance refuses the input .llguidance: not given a grammar nested"):
        EngineCheck("llguidance", deep, steps=50)
