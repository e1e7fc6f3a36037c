"""JSON Schema at the front door: --converter, llguidance without llama.cpp, gramopt.read,
one warning for what a converter ignores, no C++ chatter, no left-recursive GBNF."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

import gramopt
from gramopt.cli import main
from gramopt.grammar import GrammarError
from gramopt.engines.jsonschema import (conversion_warning, ignored_keywords, keywords_used, parse_schema,
                                        said_ignored, without_keyword)

IGNORED = {"type": "object", "properties": {
    "c": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "number"}},
    "n": {"type": "number", "multipleOf": 2}}, "required": ["n"]}
PLAIN = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}
LOOP = {"$defs": {"e": {"anyOf": [{"allOf": [{"$ref": "#/$defs/e"}]}, {"type": "integer"}]}},
        "$ref": "#/$defs/e"}
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None


def _schema(tmp_path, obj, name="s.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def _run(*argv):
    return main(["optimize", *map(str, argv)])


# ---------------------------------------------------------------- keywords a converter ignores


def test_keywords_are_found_in_schema_positions_only():
    obj = {"type": "object", "properties": {"format": {"type": "string", "pattern": "a+"}},
           "allOf": [{"not": {"type": "null"}}]}
    assert keywords_used(obj) == ["not", "pattern"]  # the property named format is no keyword
    assert without_keyword(obj, "pattern")["properties"] == {"format": {"type": "string"}}


def test_ignored_keywords_are_measured_against_the_converter():
    schema = parse_schema(json.dumps(IGNORED), "s.json")
    import xgrammar as xgr
    text = str(xgr.Grammar.from_json_schema(schema.text))
    found = ignored_keywords(schema, "xgrammar", text)
    assert {"if", "then", "else"} <= set(found)  # removing them changes no byte of the grammar
    assert ignored_keywords(parse_schema(json.dumps(PLAIN), "p.json"), "xgrammar",
                            str(xgr.Grammar.from_json_schema(json.dumps(PLAIN)))) == []


def test_one_warning_and_no_cpp_chatter_on_stderr(tmp_path, capfd):
    src = _schema(tmp_path, IGNORED)
    assert _run(src, "--target", "xgrammar", "-o", tmp_path / "o.ebnf") == 0
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "ignores" in line]
    assert len(warnings) == 1 and "multipleOf" in warnings[0] and "if, then, else" in warnings[0]
    assert "json_schema_converter.cc" not in err  # xgrammar's own line, captured and counted
    assert "1 diagnostic" in warnings[0]


@pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None, reason="needs xgrammar's converter")
def test_a_refusal_is_one_line_without_the_converters_log_stamp(tmp_path, capsys):
    """An unsatisfiable schema (JSONSchemaBench Github_easy---o74185): xgrammar's converter
    refuses it with "[HH:MM:SS] /project/cpp/json_schema_converter.cc:N: …"; the user gets
    exit 2 and one line, the same at any hour, without the stamp or xgrammar's source line."""
    src = _schema(tmp_path, {"type": "object", "minProperties": 1, "additionalProperties": False})
    assert _run(src, "--target", "xgrammar", "-o", tmp_path / "o.ebnf") == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and "refused the schema: minProperties" in lines[0], lines
    assert not re.search(r"\[\d\d:\d\d:\d\d\]|\.cc:\d+", lines[0]), lines[0]


@pytest.mark.skipif(not HAVE_LLAMA, reason="needs llama.cpp's converter")
def test_a_ref_the_converter_cannot_resolve_is_named_with_the_other_converter(tmp_path, capsys):
    """llama.cpp's converter raises a bare KeyError on a $ref it does not resolve (JSONSchemaBench
    MCPspec---JSONRPCRequest: a root $ref into definitions that do exist); the line names the
    $ref and the converter that reads the schema."""
    src = _schema(tmp_path, {"$ref": "#/definitions/A", "definitions": {
        "A": {"type": "object", "properties": {"id": {"$ref": "#/definitions/B"}}},
        "B": {"type": "string"}}})
    code = _run(src, "--target", "llama.cpp", "--converter", "llama.cpp", "-o", tmp_path / "o.gbnf")
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    if code == 0:
        pytest.skip("this llama.cpp converter resolves the reference")
    assert code == 2 and len(lines) == 1, lines
    assert "could not resolve the $ref '#/definitions/B' (--converter xgrammar may read it)" in lines[0]
    assert _run(src, "--target", "llama.cpp", "--converter", "xgrammar", "-o", tmp_path / "o.gbnf") == 0


def test_what_the_converter_says_it_ignores():
    said = ["[09:40:17] /project/cpp/json_schema_converter.cc:1056: Warning: multipleOf is not supported "
            "for type:number; ignoring multipleOf"]
    assert said_ignored(said) == ["multipleOf"]


def test_conversion_warning_wording():
    assert conversion_warning("xgrammar", [], []) is None
    line = conversion_warning("xgrammar", ["format"], ["[t] x.cc:1: Warning: format x ignored"])
    assert line.startswith("xgrammar's converter ignores format") and "first: format x ignored" in line


# ---------------------------------------------------------------- --converter and the fallback


@pytest.mark.parametrize("converter, dialect", [("xgrammar", "ebnf"),
                                                pytest.param("llama.cpp", "gbnf", marks=pytest.mark.skipif(
                                                    not HAVE_LLAMA, reason="llama-cpp-python not installed"))])
def test_optimize_converter_flag(tmp_path, capsys, converter, dialect):
    out = tmp_path / "o.txt"
    # the generic target: the converter is the point, not the judge's three engines (~24 CPU s on
    # llama.cpp's form)
    assert _run(_schema(tmp_path, PLAIN), "--converter", converter, "--to", dialect, "--target", "generic",
                "-o", out) == 0
    assert f"converted by {'xgrammar' if converter == 'xgrammar' else 'llama-cpp-python'}" in out.read_text()


def test_llguidance_target_without_llama_cpp(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llama_cpp" else real(n, *a))
    out = tmp_path / "o.gbnf"
    assert _run(_schema(tmp_path, PLAIN), "--target", "llguidance", "-o", out) == 0, capsys.readouterr().err
    text = out.read_text()
    assert "converted by xgrammar" in text and "in place of llama-cpp-python (not installed)" in text
    assert "(=" not in text  # xgrammar's lookaheads are not GBNF
    import llguidance as llg
    from gramopt.engines.llguidance import _byte_tokenizer
    m = llg.LLMatcher(_byte_tokenizer(), llg.grammar_from("gbnf", text), log_level=0)
    assert not m.is_error(), m.get_error()


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python not installed")
def test_llguidance_target_falls_back_where_llama_cpps_converter_refuses(tmp_path, capsys):
    # llama.cpp's converter refuses a pattern without ^…$ anchors; xgrammar's reads it
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "[a-z]+"}}, "required": ["id"]}
    out = tmp_path / "o.gbnf"
    assert _run(_schema(tmp_path, schema), "--target", "llguidance", "-o", out) == 0
    err = capsys.readouterr().err
    assert "llama.cpp's JSON Schema converter refused the schema: Pattern must start with" in err
    assert re.search(r"\(xgrammar\.Grammar\.from_json_schema\) instead$", err.rstrip())
    assert "may read it" not in err  # the hint is spent: the fallback was taken
    text = out.read_text()
    assert "converted by xgrammar" in text and "(=" not in text
    # a converter the user names is never replaced: its refusal is the answer (exit 2)
    assert _run(_schema(tmp_path, schema), "--target", "llguidance", "--converter", "llama.cpp", "-o", out) == 2
    assert "(--converter xgrammar may read it)" in capsys.readouterr().err
    # the llama.cpp target has no fallback: its own converter's refusal stands
    assert _run(_schema(tmp_path, schema), "--target", "llama.cpp", "-o", out) == 2


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python not installed")
def test_without_the_fallback_converter_the_refusal_stands(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "xgrammar" else real(n, *a))
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "[a-z]+"}}, "required": ["id"]}
    assert _run(_schema(tmp_path, schema), "--target", "llguidance", "-o", tmp_path / "o.gbnf") == 2
    err = capsys.readouterr().err
    assert "llama.cpp's JSON Schema converter refused the schema: Pattern must start with" in err
    assert "instead" not in err and "pip install" not in err


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python not installed")
def test_the_fallback_drops_what_the_refusing_converter_said():
    # llama.cpp's converter writes `[\\d]`, which llama.cpp itself refuses, and ignores multipleOf:
    # its ignored-keyword line would describe a grammar that is not the one written
    from gramopt.engines.jsonschema import convert, convert_for_target, parse_schema
    from gramopt.targets import get
    text = json.dumps({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[\\d]+$"},
                                                        "n": {"type": "integer", "multipleOf": 3}},
                       "required": ["id", "n"]})
    schema = parse_schema(text, "s.json")
    said: list[str] = []
    with pytest.raises(GrammarError, match="cannot read llama.cpp's grammar"):
        convert(schema, "llama.cpp", said)
    assert said == ["llama.cpp's converter ignores multipleOf: the grammar accepts values the schema rejects"]
    warnings: list[str] = []
    grammar, version = convert_for_target(schema, get("llguidance"), None, warnings)
    assert version.startswith("xgrammar") and grammar.dialect == "gbnf"
    assert len(warnings) == 1 and warnings[0].startswith("cannot read llama.cpp's grammar for the schema")


# ---------------------------------------------------------------- gramopt.read / parse


def test_read_and_parse_take_schemas(tmp_path):
    g = gramopt.read(str(_schema(tmp_path, PLAIN)))
    assert g.dialect == "ebnf" and "converted by xgrammar" in g.header
    h = gramopt.parse(json.dumps(PLAIN), "jsonschema")
    assert h == g
    with pytest.raises(gramopt.GrammarError, match=r"bad JSON"):
        gramopt.parse("{", "jsonschema", path="x.json")
    with pytest.raises(gramopt.GrammarError, match="converter reads JSON Schema"):
        gramopt.parse("root ::= \"a\"", "gbnf", converter="xgrammar")


# ---------------------------------------------------------------- where findings point


def test_left_recursive_schema_grammar_is_not_written_as_gbnf(tmp_path, capsys):
    out = tmp_path / "o.gbnf"
    code = _run(_schema(tmp_path, LOOP), "--converter", "xgrammar", "--target", "llama.cpp", "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "left-recursive" in err and "llama.cpp refuses" in err


def test_analyze_cites_the_schema_without_grammar_lines(tmp_path, capsys):
    src = _schema(tmp_path, LOOP)
    assert main(["analyze", str(src), "--converter", "xgrammar"]) == 0
    out = capsys.readouterr().out
    assert "s.json: warning: unguarded cycle" in out
    assert not re.search(r"s\.json:\d+", out)


def test_convert_never_writes_a_left_recursive_gbnf(tmp_path, capsys):
    out = tmp_path / "o.gbnf"
    assert main(["convert", str(_schema(tmp_path, LOOP)), "--converter", "xgrammar", "-o", str(out)]) == 2
    assert "left-recursive" in capsys.readouterr().err and not out.exists()
