"""``gramopt convert FILE``: read a grammar and write it in another dialect (or round-trip it).
A JSON Schema (``.json``, or ``--dialect jsonschema``) is converted by its engine's converter
(``--converter``, default the default target's, as ``gramopt optimize`` does) and written in
the dialect asked for (default: the converter's)."""

from __future__ import annotations

from ..formats import (DIALECTS, WRITABLE, check_output, check_writable, output_dialect, read, read_text, write,
                       write_file)
from ..grammar import GrammarError
from . import guard
from .exits import EXIT_OK
from ..formats import SCHEMA
from ..optimizer.job import is_schema, schema_grammar
from .optimize import add_converter_argument

HELP = "read a grammar and write it in another dialect"


def add_arguments(p) -> None:
    p.add_argument("file")
    guard.add_arguments(p)
    p.add_argument("-o", "--output", default="-", help="output file ('-' = stdout, the default)")
    p.add_argument("--dialect", choices=DIALECTS + (SCHEMA,), help="input dialect (default: from the extension)")
    p.add_argument("--to", choices=WRITABLE, help="output dialect (default: the input's)")
    p.add_argument("--start", help="start rule (default: the dialect's)")
    add_converter_argument(p)


def run(args) -> int:
    check_output(args.output, args.file)  # convert X -o X refuses, as optimize does
    if is_schema(args.file, args.dialect):
        grammar = schema_grammar(args.file, converter=args.converter)[0]
        source = None  # the converter's dialect, not the .json file's
    else:
        grammar = read(args.file, args.dialect, args.start)
        source = args.file
    dialect = output_dialect(grammar, args.output, args.to, source)
    if source is None:  # a schema: never a left-recursive GBNF ($ref loops)
        from ..engines.jsonschema import check_gbnf_loads
        check_gbnf_loads(grammar, dialect, args.file)
    try:  # a Lark lexer as GBNF / EBNF: the first terminal's place (formats.check_writable)
        check_writable(grammar, dialect)
    except GrammarError as e:
        raise e.located(args.file, read_text(args.file, args.dialect) if source else None) from None
    write_file(args.output, write(grammar, dialect))
    return EXIT_OK
