"""JSON Schema in: a schema becomes a grammar through the target engine's own converter.

    load_schemas(path) -> list[Schema]       a .json schema, a folder of them, or a .jsonl file
    convert(schema, converter) -> Grammar    the converter's grammar, read by gramopt's reader
    convert_for(schema, converter) -> (Grammar, converter)   with a header naming the converter
    CONVERTERS                               the converters by name
    converter_version(name) -> str           e.g. "xgrammar 0.2.8"

gramopt has no JSON Schema converter of its own: what a schema means as a grammar is what
the serving engine makes of it, so the grammar to optimize is the engine's. The converters:

    name        call                                                    writes
    ---------   ------------------------------------------------------  ------------------
    xgrammar    xgrammar.Grammar.from_json_schema(text) (defaults:       xgrammar EBNF
                any_whitespace=True, strict_mode=True), printed
    llama.cpp   llama_cpp.llama_grammar.json_schema_to_gbnf(text):       GBNF
                llama-cpp-python's Python port of llama.cpp's
                json_schema_to_grammar.py

Which converter a target uses is its record's ``schema_converter`` (``gramopt.targets``):
targets ``xgrammar``, ``generic`` and ``earley`` use xgrammar's converter; ``llama.cpp`` uses
llama.cpp's; ``llguidance`` uses llama.cpp's too, because llguidance's own ``JsonCompiler``
prints no grammar (it hands the schema to its Rust side as ``{"json_schema": ...}``), and
GBNF is the grammar text llguidance reads.

Inputs: a ``.json`` file holds one schema, or a JSONSchemaBench test file
(``{"schema": ..., "tests": [...]}``), whose ``schema`` member is the schema; a ``.jsonl``
file holds one schema (or test record) per non-blank line; a folder holds ``.json`` files.
Bad JSON is a GrammarError at its line and column; a schema the converter refuses is a
GrammarError naming the converter.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..formats import parse
from ..grammar import Grammar, GrammarError, SourcePos

CONVERTERS = ("xgrammar", "llama.cpp")
WRITES = {"xgrammar": "ebnf", "llama.cpp": "gbnf"}  # the dialect each converter writes
_MODULE = {"xgrammar": "xgrammar", "llama.cpp": "llama_cpp"}
_PACKAGE = {"xgrammar": "xgrammar", "llama.cpp": "llama-cpp-python"}


@dataclass
class Schema:
    """One schema: its JSON text (as the converters take it), where it came from, and the
    test instances a JSONSchemaBench file carries ([(instance, valid)])."""

    text: str
    path: str
    name: str
    line: int = 1
    tests: list = field(default_factory=list)


def load_schemas(path: str) -> list[Schema]:
    """Every schema of ``path`` (a .json file, a .jsonl file, or a folder of .json files)."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".json") and not n.startswith("."))
        if not names:
            raise GrammarError("no .json schema files in folder", path=path)
        return [s for n in names for s in load_schemas(os.path.join(path, n))]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise GrammarError(f"cannot read: {e.strerror}", path=path) from None
    except UnicodeDecodeError:
        raise GrammarError("file is not valid UTF-8 text", path=path) from None
    if path.endswith(".jsonl"):
        out = [parse_schema(line, path, k) for k, line in enumerate(text.splitlines(), 1) if line.strip()]
        if not out:
            raise GrammarError("no schema in the JSONL file", path=path)
        return out
    return [parse_schema(text, path)]


def parse_schema(text: str, path: str, line: int = 0) -> Schema:
    """One schema from its JSON ``text``: a whole file (``line`` 0) or line ``line`` of a
    JSONL file, named after the file (and the line)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    name = f"{stem}.{line}" if line else stem
    return _schema(_loads(text, path, line), path, name, line or 1)


def _loads(text: str, path: str, line: int = 0):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        pos = SourcePos(line or e.lineno, e.colno)
        raise GrammarError(f"bad JSON: {e.msg}", pos, path,
                           text.splitlines()[e.lineno - 1] if text.splitlines() else None) from None


def _schema(obj, path: str, name: str, line: int) -> Schema:
    tests = []
    if isinstance(obj, dict) and "schema" in obj and "tests" in obj and "type" not in obj:
        tests = [(t.get("data"), bool(t.get("valid"))) for t in obj.get("tests") or []
                 if isinstance(t, dict) and "data" in t]
        obj = obj["schema"]
    if not isinstance(obj, (dict, bool)):
        raise GrammarError("a JSON Schema is an object (or true/false)", SourcePos(line, 1), path)
    return Schema(json.dumps(obj, ensure_ascii=False), path, name, line, tests)


_CALL = {"xgrammar": "xgrammar.Grammar.from_json_schema",
         "llama.cpp": "llama_cpp.llama_grammar.json_schema_to_gbnf"}


def converter_version(name: str) -> str:
    """The converter as a report names it: package, version and the call, e.g.
    ``xgrammar 0.2.8 (xgrammar.Grammar.from_json_schema)``."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"{_PACKAGE[name]} {version(_PACKAGE[name])} ({_CALL[name]})"
    except PackageNotFoundError:
        return f"{_PACKAGE[name]} (not installed)"


def convert_text(schema: Schema, converter: str) -> tuple[str, str]:
    """(grammar text, its dialect) from ``converter`` for ``schema``."""
    if converter not in CONVERTERS:
        raise GrammarError(f"unknown JSON Schema converter '{converter}' (known: {', '.join(CONVERTERS)})")
    import importlib.util
    where = SourcePos(schema.line, 1)
    if importlib.util.find_spec(_MODULE[converter]) is None:
        raise GrammarError(f"converting a JSON Schema for this target needs {converter}'s converter: "
                           f"pip install {_PACKAGE[converter]}", where, schema.path)
    try:
        if converter == "xgrammar":
            import xgrammar as xgr
            return str(xgr.Grammar.from_json_schema(schema.text)), "ebnf"
        from llama_cpp.llama_grammar import json_schema_to_gbnf
        return json_schema_to_gbnf(schema.text), "gbnf"
    except Exception as e:  # noqa: BLE001 - each converter raises its own error types
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise GrammarError(f"{converter}'s JSON Schema converter refused the schema: {msg}",
                           where, schema.path) from None


def convert(schema: Schema, converter: str) -> Grammar:
    """The grammar ``converter`` makes of ``schema``, as gramopt reads it."""
    text, dialect = convert_text(schema, converter)
    try:
        return parse(text, dialect)
    except GrammarError as e:
        raise GrammarError(f"cannot read {converter}'s grammar for the schema: {e.message} "
                           f"(grammar line {e.pos.line if e.pos else '?'})",
                           SourcePos(schema.line, 1), schema.path) from None


def convert_for(schema: Schema, converter: str) -> tuple[Grammar, str]:
    """(grammar, converter with version): ``schema`` converted by ``converter`` (a target's
    ``schema_converter``), with a header comment naming the converter."""
    from dataclasses import replace
    version = converter_version(converter)
    grammar = convert(schema, converter)
    return replace(grammar, header=f"JSON Schema {schema.name} converted by {version}"), version
