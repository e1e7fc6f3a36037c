"""JSON Schema in: a schema becomes a grammar through the target engine's own converter.

    load_schemas(path) -> list[Schema]       a .json schema, a folder of them, or a .jsonl file
    convert(schema, converter) -> Grammar    the converter's grammar, read by gramopt's reader
    convert_for(schema, converter) -> (Grammar, converter)   with a header naming the converter
    convert_for_target(schema, target, converter=None, warnings=None)   the target's, or its fallback
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
GBNF is the grammar text llguidance reads — and when llama-cpp-python (a source build) is
not installed, xgrammar's converter written as GBNF (``schema_fallback``); the header names
the converter used. ``--converter`` names one outright.

What a converter drops is measured, not assumed (``ignored_keywords``: a constraint keyword
whose removal leaves the converter's grammar byte-identical; and what its own diagnostics
say it ignores, ``said_ignored``), and named in one warning with
a count of the converter's own diagnostics (xgrammar's C++ warnings, captured from fd 2).

Inputs: a ``.json`` file holds one schema, or a JSONSchemaBench test file
(``{"schema": ..., "tests": [...]}``), whose ``schema`` member is the schema; a ``.jsonl``
file holds one schema (or test record) per non-blank line; a folder holds ``.json`` files.
Bad JSON is a GrammarError at its line and column; a schema the converter refuses is a
GrammarError naming the converter.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ..formats import dialect_record, parse
from ..grammar import Grammar, GrammarError, SourcePos
from .base import first_line

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
    text, dialect, _ = _convert_with_diagnostics(schema, converter)
    return text, dialect


def _convert_with_diagnostics(schema: Schema, converter: str) -> tuple[str, str, list[str]]:
    """(grammar text, its dialect, the converter's own diagnostics)."""
    if converter not in CONVERTERS:
        raise GrammarError(f"unknown JSON Schema converter '{converter}' (known: {', '.join(CONVERTERS)})")
    where = SourcePos(schema.line, 1)
    if not converter_installed(converter):
        raise GrammarError(f"converting a JSON Schema for this target needs {converter}'s converter: "
                           f"pip install {_PACKAGE[converter]}", where, schema.path)
    try:
        text, said = _converted(schema.text, converter)
    except Exception as e:  # noqa: BLE001 - each converter raises its own error types
        msg = first_line(e, 200)
        if isinstance(e, KeyError):  # llama.cpp's converter looks a $ref up and says only the key
            msg = (f"it could not resolve the $ref {msg}" if msg.startswith(("'#", '"#')) else f"KeyError: {msg}")
        other = [c for c in CONVERTERS if c != converter]
        hint = f" (--converter {other[0]} may read it)" if other else ""
        raise GrammarError(f"{converter}'s JSON Schema converter refused the schema: {msg}{hint}",
                           where, schema.path) from None
    return text, WRITES[converter], said


def _converted(text: str, converter: str) -> tuple[str, list[str]]:
    """(grammar text, the converter's own diagnostics) for the schema ``text``. xgrammar's
    C++ side writes its warnings to file descriptor 2 itself; they are captured there (a
    temporary file in place of fd 2 for the call) and returned, not streamed."""
    with _captured_fd2() as diagnostics:
        if converter == "xgrammar":
            import xgrammar as xgr
            out = str(xgr.Grammar.from_json_schema(text))
        else:
            from llama_cpp.llama_grammar import json_schema_to_gbnf
            out = json_schema_to_gbnf(text)
    return out, diagnostics


class _captured_fd2:
    """``with _captured_fd2() as lines:`` — what is written to file descriptor 2 inside the
    block (by Python or by C++) is kept in ``lines`` (non-blank lines) instead of shown."""

    def __enter__(self) -> list[str]:
        import sys
        import tempfile
        self.lines: list[str] = []
        try:
            sys.stderr.flush()
            self.saved = os.dup(2)
        except (OSError, ValueError):  # no fd 2 (an embedding host): nothing to capture
            self.saved = None
            return self.lines
        self.tmp = tempfile.TemporaryFile()
        os.dup2(self.tmp.fileno(), 2)
        return self.lines

    def __exit__(self, *exc) -> None:
        if self.saved is None:
            return
        import sys
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        text = self.tmp.read().decode("utf-8", "replace")
        self.tmp.close()
        self.lines.extend(line.strip() for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------- what a converter ignores

# keywords that constrain a JSON value beyond its structure: a converter may drop them
# (measured per schema by ``ignored_keywords``, not assumed)
CONSTRAINTS = ("format", "multipleOf", "if", "then", "else", "not", "unevaluatedProperties",
               "unevaluatedItems", "dependentSchemas", "dependentRequired", "dependencies", "contains",
               "minContains", "maxContains", "uniqueItems", "propertyNames", "patternProperties",
               "minProperties", "maxProperties", "minimum", "maximum", "exclusiveMinimum",
               "exclusiveMaximum", "pattern", "minLength", "maxLength", "minItems", "maxItems",
               "contentEncoding", "contentMediaType", "contentSchema")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
               "unevaluatedProperties", "unevaluatedItems", "additionalItems", "contentSchema")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
MAX_PROBES = len(CONSTRAINTS)  # conversions spent finding what was ignored: one per keyword present


def keywords_used(schema) -> list[str]:
    """The ``CONSTRAINTS`` keywords ``schema`` uses, in the order of ``CONSTRAINTS`` (a
    property *named* ``format`` is no keyword: only schema positions are walked)."""
    found: set[str] = set()

    def walk(node) -> None:
        if not isinstance(node, dict):
            return
        found.update(k for k in node if k in CONSTRAINTS)
        for k, v in node.items():
            if k in _SCHEMA_MAPS and isinstance(v, dict):
                for sub in v.values():
                    walk(sub)
            elif k in _SCHEMA_ONE:
                walk(v)
            if k in _SCHEMA_LISTS and isinstance(v, list):
                for sub in v:
                    walk(sub)

    walk(schema)
    return [k for k in CONSTRAINTS if k in found]


def without_keyword(schema, keyword: str):
    """``schema`` with ``keyword`` removed wherever it is a keyword (schema positions)."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k == keyword:
            continue
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            v = {name: without_keyword(sub, keyword) for name, sub in v.items()}
        elif k in _SCHEMA_LISTS and isinstance(v, list):
            v = [without_keyword(sub, keyword) for sub in v]
        elif k in _SCHEMA_ONE:
            v = without_keyword(v, keyword)
        out[k] = v
    return out


_SAYS_IGNORED = re.compile(r"ignoring (\$?\w+)")


def said_ignored(said: list[str]) -> list[str]:
    """The keywords a converter's own diagnostics say it ignores (xgrammar: "multipleOf is not
    supported for type:number; ignoring multipleOf"), in order, once each."""
    return list(dict.fromkeys(m.group(1) for line in said for m in _SAYS_IGNORED.finditer(line)))


def ignored_keywords(schema: Schema, converter: str, text: str) -> list[str]:
    """The keywords of ``schema`` that ``converter`` ignores: those whose removal leaves the
    converter's grammar ``text`` byte-identical (one conversion per keyword present, at most
    ``MAX_PROBES``; deterministic)."""
    obj = json.loads(schema.text)
    out = []
    for k in keywords_used(obj)[:MAX_PROBES]:
        try:
            probe, _ = _converted(json.dumps(without_keyword(obj, k), ensure_ascii=False), converter)
        except Exception:  # noqa: BLE001 - a schema that needs the keyword to convert: not ignored
            continue
        if probe == text:
            out.append(k)
    return out


def convert(schema: Schema, converter: str, warnings: list[str] | None = None) -> Grammar:
    """The grammar ``converter`` makes of ``schema``, as gramopt reads it; ``warnings``
    collects one line on what the converter dropped or said (``conversion_warning``)."""
    if warnings is None:
        text, dialect = convert_text(schema, converter)
    else:
        text, dialect, said = _convert_with_diagnostics(schema, converter)
        ignored = ignored_keywords(schema, converter, text)
        ignored += [k for k in said_ignored(said) if k not in ignored]
        line = conversion_warning(converter, ignored, said)
        if line:
            warnings.append(line)
    try:
        return parse(text, dialect)
    except GrammarError as e:
        raise GrammarError(f"cannot read {converter}'s grammar for the schema: {e.message} "
                           f"(grammar line {e.pos.line if e.pos else '?'})",
                           SourcePos(schema.line, 1), schema.path) from None


def conversion_warning(converter: str, ignored: list[str], said: list[str]) -> str | None:
    """One line: the keywords ``converter`` ignored and a count of its own diagnostics (the
    first quoted), or None when there is neither."""
    parts = []
    if ignored:
        parts.append(f"{converter}'s converter ignores {', '.join(ignored)}: the grammar accepts values "
                     f"the schema rejects")
    if said:
        first = said[0].split("Warning: ", 1)[-1]
        parts.append(f"it printed {len(said)} diagnostic{'s' if len(said) != 1 else ''} "
                     f"(first: {first[:160]})")
    return "; ".join(parts) or None


def converter_installed(converter: str) -> bool:
    """Whether ``converter``'s package can be imported (found, not imported: xgrammar's import
    costs seconds)."""
    import importlib.util
    return importlib.util.find_spec(_MODULE[converter]) is not None


def installed_converter(preferred: str, fallback: str | None) -> str:
    """``preferred`` when its package is installed, else ``fallback`` when that one is (a
    target whose engine reads either grammar: ``Target.schema_fallback``), else
    ``preferred`` (whose absence ``convert_text`` then names)."""
    if fallback and not converter_installed(preferred) and converter_installed(fallback):
        return fallback
    return preferred


def convert_for(schema: Schema, converter: str, warnings: list[str] | None = None,
                instead_of: str | None = None) -> tuple[Grammar, str]:
    """(grammar, converter with version): ``schema`` converted by ``converter`` (a target's
    ``schema_converter``), with a header comment naming the converter (and the one it
    stands in for, ``instead_of``, when that was not installed); ``warnings`` as ``convert``."""
    from dataclasses import replace
    version = converter_version(converter)
    if instead_of and instead_of != converter:
        version += f", in place of {_PACKAGE[instead_of]} (not installed)"
    grammar = convert(schema, converter, warnings)
    return replace(grammar, header=f"JSON Schema {schema.name} converted by {version}"), version


def convert_for_target(schema: Schema, target, converter: str | None = None,
                       warnings: list[str] | None = None) -> tuple[Grammar, str]:
    """(grammar, converter with version) for a target record: ``converter`` if named, else
    the target's ``schema_converter`` — or, when that one is not installed or refuses the
    schema (and no converter was named), its ``schema_fallback`` (llguidance: xgrammar's
    converter, which reads prefixItems and unanchored patterns; the refusal is a warning).
    A fallback's grammar is written in the dialect the target's own converter writes (GBNF
    for llguidance, which reads it), its lookahead assertions dropped: they are hints, the
    language is the rules'."""
    from dataclasses import replace
    preferred = converter or target.schema_converter
    fallback = None if converter else getattr(target, "schema_fallback", None)
    used = installed_converter(preferred, fallback)
    before = len(warnings) if warnings is not None else 0
    try:
        grammar, version = convert_for(schema, used, warnings, instead_of=preferred)
    except GrammarError as e:  # the target's own converter refuses it: the fallback, said
        if not fallback or used == fallback or not converter_installed(fallback):
            raise
        if warnings is not None:
            del warnings[before:]  # what the refusing converter said is not about the grammar written
        grammar, version = convert_for(schema, fallback, warnings)
        if warnings is not None:
            said = re.sub(r" \(--converter \S+ may read it\)$", "", e.message.rstrip("."))
            warnings.append(f"{said}; converted by {version} instead")
        used = fallback
    if used != preferred and WRITES[used] != WRITES[preferred]:
        rules = tuple(replace(r, lookahead=None) for r in grammar.rules)
        grammar = replace(grammar, rules=rules, dialect=WRITES[preferred])
    return grammar, version


def check_gbnf_loads(grammar: Grammar, dialect: str, path: str) -> None:
    """GrammarError when a schema's grammar is to be written as GBNF but stays left-recursive
    (a ``$ref`` loop such as ``e: anyOf [allOf [$ref e], integer]``): llama.cpp refuses left
    recursion, so such a file is never written."""
    if dialect_record(dialect).left_recursion:
        return
    from ..grammar.analysis import structure
    left = structure(grammar).left_recursive
    if left:
        raise GrammarError(f"the schema's grammar stays left-recursive (rules {', '.join(left[:4])}: a $ref "
                           f"loop), which llama.cpp refuses: nothing written", path=path)
