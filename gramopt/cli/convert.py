"""``gramopt convert FILE``: read a grammar and write it in another dialect (or round-trip it)."""

from __future__ import annotations

from ..formats import DIALECTS, WRITABLE, check_output, output_dialect, read, write, write_file
from .exits import EXIT_OK

HELP = "read a grammar and write it in another dialect"


def add_arguments(p) -> None:
    p.add_argument("file")
    p.add_argument("-o", "--output", default="-", help="output file ('-' = stdout, the default)")
    p.add_argument("--dialect", choices=DIALECTS, help="input dialect (default: from the extension)")
    p.add_argument("--to", choices=WRITABLE, help="output dialect (default: the input's)")
    p.add_argument("--start", help="start rule (default: the dialect's)")


def run(args) -> int:
    check_output(args.output, args.file)  # convert X -o X refuses, as optimize does
    grammar = read(args.file, args.dialect, args.start)
    write_file(args.output, write(grammar, output_dialect(grammar, args.output, args.to, args.file)))
    return EXIT_OK
