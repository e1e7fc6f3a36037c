"""The ``gramopt`` command line: parses arguments and calls the Python API.

Exit status: 0 success; 1 ``--check`` found a change; 2 bad input or usage (one line
``file:line:col: error: …`` with the source line and a caret); 3 verification found a
difference (nothing written); 130 interrupted. Never a traceback unless GRAMOPT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys

from .formats import DIALECTS, WRITABLE, output_dialect, read, write, write_file
from .grammar import GrammarError

EXIT_OK, EXIT_CHANGED, EXIT_USAGE, EXIT_UNSOUND, EXIT_INTERRUPTED, EXIT_INTERNAL = 0, 1, 2, 3, 130, 70
TARGETS = ("generic", "xgrammar", "llguidance", "llama.cpp", "earley")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gramopt", description="Optimize grammars for constrained decoding.")
    p.add_argument("--version", action="version", version=f"gramopt {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    a = sub.add_parser("analyze", help="sizes, kappa, structural findings and ambiguity warnings")
    a.add_argument("file")
    a.add_argument("--dialect", choices=DIALECTS, help="override the dialect from the extension")
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a.add_argument("--start", help="start rule (default: the dialect's; a Lark file without one is "
                                   "analyzed as a rule library)")
    a.set_defaults(run=cmd_analyze)

    c = sub.add_parser("convert", help="read a grammar and write it in another dialect")
    c.add_argument("file")
    c.add_argument("-o", "--output", default="-", help="output file ('-' = stdout, the default)")
    c.add_argument("--dialect", choices=DIALECTS, help="input dialect (default: from the extension)")
    c.add_argument("--to", choices=WRITABLE, help="output dialect (default: the input's)")
    c.add_argument("--start", help="start rule (default: the dialect's)")
    c.set_defaults(run=cmd_convert)

    o = sub.add_parser("optimize", help="optimize a grammar (or a folder of grammars)")
    o.add_argument("input", help="grammar file or folder")
    o.add_argument("-o", "--output", help="output file or folder ('-' = stdout)")
    o.add_argument("--dialect", choices=DIALECTS + ("jsonschema",),
                   help="input dialect (default: from the extension; .json / .jsonl: jsonschema, "
                        "converted by the target engine's own converter)")
    o.add_argument("--to", choices=WRITABLE, help="output dialect (default: the input's)")
    o.add_argument("--start", help="start rule (default: the dialect's)")
    o.add_argument("--target", choices=TARGETS, default="generic", help="engine to optimize for")
    o.add_argument("--passes", help="comma-separated pass names to run (default: the full pipeline)")
    o.add_argument("--report", action="store_true", help="print the per-pass report")
    o.add_argument("--json", action="store_true", help="print the report as JSON")
    o.add_argument("--check", action="store_true", help="exit 1 if the output would differ from the input")
    o.add_argument("--diff", action="store_true", help="print a unified diff of input and output")
    o.add_argument("--no-verify", action="store_true",
                   help="skip the language-equivalence check of the output (not recommended)")
    o.add_argument("-j", "--jobs", type=int, default=0, help="worker processes for a batch (0 = cores)")
    o.add_argument("--scheduler", metavar="ADDRESS",
                   help="run a batch on the Dask cluster at ADDRESS (tcp://host:port) instead of local processes")
    o.add_argument("--cache", metavar="DIR",
                   help="content-addressed cache of a batch (default OUTDIR/.gramopt-cache; a shared "
                        "folder serves every worker and rerun)")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress bar for a batch")
    o.set_defaults(run=cmd_optimize)

    for name, module in _command_modules():
        sp = sub.add_parser(name, help=module.HELP, description=module.__doc__)
        module.add_arguments(sp)
        sp.set_defaults(run=module.run)
    return p


def _command_modules():
    """Further subcommands live one per module in ``gramopt/commands/`` (``verify``,
    ``bench``, ``calibrate``): each has ``HELP``, ``add_arguments(parser)`` and
    ``run(args) -> exit code``, and imports its heavy dependencies inside ``run``."""
    import importlib
    import pkgutil
    from . import commands
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            yield info.name, importlib.import_module(f"{commands.__name__}.{info.name}")


def _version() -> str:
    from ._version import __version__
    return __version__


def cmd_analyze(args) -> int:
    from .summary import analyze
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


def cmd_convert(args) -> int:
    grammar = read(args.file, args.dialect, args.start)
    write_file(args.output, write(grammar, output_dialect(grammar, args.output, args.to, args.file)))
    return EXIT_OK


def cmd_optimize(args) -> int:
    from .build import is_schema, optimize_batch, optimize_file  # imports egglog: only when optimizing
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None
    options = dict(target=args.target, passes=passes, verify=not args.no_verify, to=args.to,
                   dialect=args.dialect, start=args.start)
    jsonl = os.path.isfile(args.input) and args.input.endswith(".jsonl") and is_schema(args.input, args.dialect)
    if os.path.isdir(args.input) or (jsonl and args.output and os.path.isdir(args.output)) or \
            (jsonl and args.output and not os.path.splitext(args.output)[1]):
        if not args.output or args.output == "-":
            raise GrammarError("optimizing a batch (a folder, a JSONL file) needs -o OUTDIR", path=args.input)
        return optimize_batch(args.input, args.output, jobs=args.jobs, scheduler=args.scheduler,
                              cache=args.cache, progress=not args.quiet, **options)
    if args.scheduler:
        raise GrammarError("--scheduler runs a batch: give a folder or a JSONL file", path=args.input)
    return optimize_file(args.input, args.output, report=args.report, as_json=args.json,
                         check=args.check, diff=args.diff, **options)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    debug = bool(os.environ.get("GRAMOPT_DEBUG"))
    try:
        return args.run(args)
    except GrammarError as e:
        print(e.format(), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gramopt: interrupted; no output was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug in gramopt: one line, the traceback only on request
        if debug:
            raise
        print(f"gramopt: internal error: {type(e).__name__}: {e} (set GRAMOPT_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
