"""JSON Schema in: schemas converted by the target engine's own converter, then optimized and
verified; outputs agree with the converter's grammar on every test instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gramopt.cli import main
from gramopt.engines.jsonschema import CONVERTERS, Schema, convert, converter_version, load_schemas
from gramopt.formats import read
from gramopt.grammar import GrammarError
from gramopt.targets import TARGETS
from gramopt.verify.reference import Recognizer

DATA = Path(__file__).resolve().parent / "data" / "jsonschema"
TOOL_CALL = DATA / "tool_call.json"
CONVERTER_OF = {name: t.schema_converter for name, t in TARGETS.items()}
HAVE = {"xgrammar": __import__("importlib").util.find_spec("xgrammar") is not None,
        "llama.cpp": __import__("importlib").util.find_spec("llama_cpp") is not None}


def needs(converter):
    return pytest.mark.skipif(not HAVE[converter], reason=f"{converter} is not installed")


def instances(schema: Schema):
    return [(json.dumps(d, ensure_ascii=False).encode(), valid) for d, valid in schema.tests]


def test_load_a_test_file_and_a_jsonl_file():
    [s] = load_schemas(str(TOOL_CALL))
    assert s.name == "tool_call" and len(s.tests) == 6 and sum(v for _, v in s.tests) == 2
    assert json.loads(s.text)["required"] == ["name", "id", "arguments"]
    lines = load_schemas(str(DATA / "schemas.jsonl"))
    assert [(x.name, x.line) for x in lines] == [("schemas.1", 1), ("schemas.3", 3), ("schemas.4", 4)]
    assert len(load_schemas(str(DATA))) == 1  # a folder: its .json files


@pytest.mark.parametrize("text, where, what", [
    ('{"type": "object",\n "properties": {]}', (2, 17), "bad JSON"),
    ('[1, 2]', (1, 1), "is an object"),
])
def test_bad_schemas_are_located(tmp_path, text, where, what):
    p = tmp_path / "s.json"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(GrammarError) as e:
        load_schemas(str(p))
    assert (e.value.pos.line, e.value.pos.col) == where and what in e.value.message


def test_jsonl_errors_name_the_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"type": "integer"}\n{"type": \n', encoding="utf-8")
    with pytest.raises(GrammarError) as e:
        load_schemas(str(p))
    assert e.value.pos.line == 2


@pytest.mark.parametrize("converter", [pytest.param(c, marks=needs(c)) for c in ("xgrammar", "llama.cpp")])
def test_converted_grammar_decides_the_test_instances(converter):
    [s] = load_schemas(str(TOOL_CALL))
    g = convert(s, converter)
    assert g.dialect == ("ebnf" if converter == "xgrammar" else "gbnf")
    r = Recognizer(g)
    assert [r.accepts(text) for text, _ in instances(s)] == [v for _, v in s.tests]
    assert converter_version(converter).startswith({"xgrammar": "xgrammar 0.", "llama.cpp": "llama-cpp-python 0."}[converter])


@needs("llama.cpp")
def test_a_grammar_the_converter_writes_but_its_engine_refuses(tmp_path):
    """llama-cpp-python's converter copies a pattern's '\\.' into a GBNF string, where
    llama.cpp (and gramopt) refuse the escape: a located error naming the converter."""
    p = tmp_path / "s.json"
    p.write_text('{"type": "string", "pattern": "^a\\\\.b$"}', encoding="utf-8")
    with pytest.raises(GrammarError, match="cannot read llama.cpp's grammar for the schema: bad escape"):
        convert(load_schemas(str(p))[0], "llama.cpp")


def test_every_target_has_a_converter():
    assert set(CONVERTER_OF.values()) <= set(CONVERTERS)


@pytest.mark.parametrize("target", [pytest.param(t, marks=needs(CONVERTER_OF[t]))
                                    for t in ("generic", "xgrammar", "llguidance", "llama.cpp")])
def test_cli_optimizes_a_schema(tmp_path, capsys, target):
    out = tmp_path / "out.txt"
    assert main(["optimize", str(TOOL_CALL), "-o", str(out), "--target", target, "--report"]) == 0
    report = capsys.readouterr().out
    assert f"converted by {converter_version(CONVERTER_OF[target])}" in report
    assert "verification ok" in report
    text = out.read_text(encoding="utf-8")
    assert text.startswith(f"# JSON Schema tool_call converted by {converter_version(CONVERTER_OF[target])}")
    dialect = "ebnf" if (CONVERTER_OF[target] == "xgrammar" or target == "xgrammar") else "gbnf"
    r = Recognizer(read(str(out), dialect))
    [s] = load_schemas(str(TOOL_CALL))
    assert [r.accepts(t) for t, _ in instances(s)] == [v for _, v in s.tests]


@pytest.mark.parametrize("converter", [pytest.param(c, marks=needs(c)) for c in CONVERTERS])
def test_analyze_and_convert_read_a_schema_through_its_converter(tmp_path, capsys, converter):
    """``analyze`` and ``convert`` read a .json schema through the same converter as
    ``optimize``: the converted grammar, written in the converter's dialect, decides the
    schema's test instances as the converter's grammar does."""
    [s] = load_schemas(str(TOOL_CALL))
    expected = convert(s, converter)
    assert main(["analyze", str(TOOL_CALL), "--converter", converter, "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["rules"] == len(expected.rules)
    out = tmp_path / "converted.txt"
    assert main(["convert", str(TOOL_CALL), "--converter", converter, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith(f"# JSON Schema tool_call converted by {converter_version(converter)}")
    r = Recognizer(read(str(out), "ebnf" if converter == "xgrammar" else "gbnf"))
    assert [r.accepts(t) for t, _ in instances(s)] == [v for _, v in s.tests]


def test_analyze_locates_bad_schema_json(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "type": "object",,\n}', encoding="utf-8")
    assert main(["analyze", str(bad)]) == 2
    assert main(["convert", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{bad}:2:") and "error: bad JSON" in err[0]


def test_cli_refuses_a_jsonl_file_of_many_schemas_to_one_output(tmp_path, capsys):
    assert main(["optimize", str(DATA / "schemas.jsonl"), "-o", str(tmp_path / "x.ebnf")]) == 2
    assert "3 schemas" in capsys.readouterr().err


# ---------------------------------------------------------------- the corpus

def _corpus_schemas():
    from corpus_location import CORPUS
    folder = CORPUS / "jsonschema"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("target", ["xgrammar", "llguidance", "llama.cpp"])
@pytest.mark.parametrize("path", _corpus_schemas() or [pytest.param(None, marks=pytest.mark.skip("no corpus"))],
                         ids=lambda p: p.stem if p else "none")
def test_corpus_schema_optimizes_and_keeps_the_converters_verdicts(path, target):
    """Optimized (and verified), the output accepts exactly the test instances the
    converter's grammar accepts — every valid one the converter accepts, and none of the
    invalid ones the converter rejects."""
    from gramopt.passes import optimize
    converter = CONVERTER_OF[target]
    if not HAVE[converter]:
        pytest.skip(f"{converter} is not installed")
    [s] = load_schemas(str(path))
    try:
        g = convert(s, converter)
    except GrammarError as e:
        pytest.skip(f"the converter's grammar: {e.message}")
    r = optimize(g, target=target, verify=True)
    assert r.report.verified == "ok"
    before, after = Recognizer(g), Recognizer(r.grammar)
    for text, _ in instances(s):
        assert after.accepts(text) == before.accepts(text), text[:80]
