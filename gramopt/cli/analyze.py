"""``gramopt analyze FILE``: sizes, κ, structural findings and ambiguity warnings
(``gramopt.analyze``), as a table or JSON. A JSON Schema (``.json``, or ``--dialect
jsonschema``) is analyzed as the grammar its converter makes of it (``--converter``, default
the default target's: the same conversion ``gramopt optimize`` runs)."""

from __future__ import annotations

from ..formats import DIALECTS, read
from ..grammar import GrammarError
from . import guard
from .exits import EXIT_OK
from ..formats import SCHEMA
from ..optimizer.job import is_schema, schema_grammar
from .optimize import add_converter_argument

HELP = "sizes, kappa, structural findings and ambiguity warnings"


def add_arguments(p) -> None:
    p.add_argument("file")
    guard.add_arguments(p)
    p.add_argument("--dialect", choices=DIALECTS + (SCHEMA,), help="override the dialect from the extension")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--start", help="start rule (default: the dialect's; a Lark file without one is "
                                   "analyzed as a rule library)")
    add_converter_argument(p)


def run(args) -> int:
    from ..summary import analyze
    if is_schema(args.file, args.dialect):
        from dataclasses import replace
        grammar = schema_grammar(args.file, converter=args.converter)[0]
        # its rules' lines are the converted grammar's, not the .json's: findings cite the file
        result = replace(analyze(grammar), lines={})
        print(result.to_json() if args.json else result.format(args.file))
        return EXIT_OK
    try:
        grammar = read(args.file, args.dialect, args.start)
    except GrammarError as e:
        # A Lark rule library (common.lark, a grammar started from another name): analyze its rules.
        if args.start is not None or not e.message.startswith("missing start rule"):
            raise
        grammar = read(args.file, args.dialect, "")
    result = analyze(grammar)
    print(result.to_json() if args.json else result.format(args.file))
    return EXIT_OK
