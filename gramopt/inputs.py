"""What ``gramopt.read`` and ``gramopt.parse`` read: a grammar in any dialect, or a JSON Schema.

    read(path, dialect=None, start=None, converter=None) -> Grammar
    parse(text, dialect, path=None, start=None, converter=None) -> Grammar

A grammar goes to ``gramopt.formats``. A JSON Schema (a ``.json`` file, or dialect
``"jsonschema"``) is read as the grammar an engine's converter makes of it — the default
target's converter, or ``converter`` — with a header naming the converter
(``gramopt.engines.jsonschema``). This module sits above ``formats`` and ``engines``: the
readers never import an engine.
"""

from __future__ import annotations

from . import formats
from .grammar import Grammar, GrammarError

SCHEMA = formats.SCHEMA


def parse(text: str, dialect: str, path: str | None = None, start: str | None = None,
          converter: str | None = None) -> Grammar:
    """``formats.parse``, and a JSON Schema's text (dialect ``"jsonschema"``) converted."""
    if dialect != SCHEMA:
        return formats.parse(text, dialect, path, start, converter)
    from .engines.jsonschema import parse_schema
    return _schema_grammar(parse_schema(text, path or "<schema>"), converter, start)


def read(path: str, dialect: str | None = None, start: str | None = None,
         converter: str | None = None) -> Grammar:
    """``formats.read``, and a ``.json`` file (or dialect ``"jsonschema"``) as one schema's
    converted grammar."""
    if not (dialect == SCHEMA or (dialect is None and path.lower().endswith(".json"))):
        return formats.read(path, dialect, start, converter)
    from .engines.jsonschema import load_schemas
    schemas = load_schemas(path)
    if len(schemas) != 1:
        raise GrammarError(f"{len(schemas)} schemas in one file: read them with "
                           f"gramopt.engines.jsonschema.load_schemas", path=path)
    return _schema_grammar(schemas[0], converter, start)


def _schema_grammar(schema, converter: str | None, start: str | None) -> Grammar:
    """The default target's conversion of ``schema`` (or ``converter``'s)."""
    from . import targets
    from .engines.jsonschema import convert_for_target
    grammar = convert_for_target(schema, targets.get(targets.DEFAULT), converter)[0]
    return formats.with_start(grammar, start)


__all__ = ["parse", "read"]
