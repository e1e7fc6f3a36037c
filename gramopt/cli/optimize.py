"""``gramopt optimize IN -o OUT``: gramopt as a build step, one grammar (or JSON Schema) or a batch.

Guarantees a pipeline relies on: the input is never modified; every output is written
atomically (temp file + rename), so an interrupted run leaves either the old file or the
new one; nothing is written when verification finds a difference (exit 3, the
counterexample printed); in a batch (a folder, or a JSONL file of schemas: ``gramopt.cli.batch``)
an input whose content and options are in the content-addressed cache is not optimized
again.

The output dialect follows from the target (``Target.output_form``: xgrammar's lookahead
assertions are written as xgrammar EBNF) unless one is asked for (``--to``, or the output's
extension); a dialect asked for that cannot carry what the optimized grammar holds gets a
warning naming what was dropped, or exit 2 with ``--strict``. The report names the dialect.
"""

from __future__ import annotations

import difflib
import json
import os
import sys

from .. import targets
from ..formats import DIALECTS, SCHEMA, WRITABLE, check_output, write_file
from ..grammar import GrammarError
from ..optimizer import Job, Options, limits, run_job
from ..optimizer.job import is_schema
from ..stage import stage
from . import guard
from .exits import EXIT_CHANGED, EXIT_OK, EXIT_UNSOUND

HELP = "optimize a grammar (or a folder of grammars)"


def add_arguments(o) -> None:
    o.add_argument("input", help="grammar file or folder")
    o.add_argument("-o", "--output", help="output file or folder ('-' = stdout)")
    o.add_argument("--dialect", choices=DIALECTS + (SCHEMA,),
                   help="input dialect (default: from the extension; .json / .jsonl: jsonschema, "
                        "converted by the target engine's own converter)")
    o.add_argument("--to", choices=WRITABLE, help="output dialect (default: the target's, else the input's)")
    o.add_argument("--start", help="start rule (default: the dialect's)")
    o.add_argument("--keep", action="append", metavar="RULE",
                   help="keep RULE as an entry point: never removed, renamed or inlined away (repeatable; "
                        "e.g. a rule an engine also starts from)")
    o.add_argument("--target", choices=targets.NAMES, default=targets.DEFAULT, help="engine to optimize for")
    add_converter_argument(o, "the target's")
    o.add_argument("--passes", help="comma-separated pass names to run (default: the full pipeline)")
    o.add_argument("--report", action="store_true", help="print the per-pass report")
    o.add_argument("--json", action="store_true", help="print the report as JSON")
    o.add_argument("--check", action="store_true", help="exit 1 if the output would differ from the input")
    o.add_argument("--diff", action="store_true", help="print a unified diff of input and output")
    o.add_argument("--cost-model", metavar="PATH",
                   help="a calibrated cost model (file, or folder of ENGINE.json as 'gramopt calibrate' writes) "
                        "for --target xgrammar/llguidance (default: the one shipped; never read from the environment)")
    o.add_argument("--strict", action="store_true",
                   help="exit 2 on a warning: the output dialect cannot carry what the target added, "
                        "or the input's language is empty")
    o.add_argument("--fast", action="store_true",
                   help="per-request mode: clean-ups, inlining and the target's fix-ups once (no e-graph), "
                        "verified by random derivations proportional to the rules that changed")
    o.add_argument("--no-verify", action="store_true",
                   help="skip the language-equivalence check of the output (not recommended)")
    o.add_argument("-j", "--jobs", type=int, default=0, help="worker processes for a batch (0 = cores)")
    o.add_argument("--scheduler", metavar="ADDRESS",
                   help="run a batch on the Dask cluster at ADDRESS (tcp://host:port) instead of local processes")
    o.add_argument("--cache", metavar="DIR",
                   help="content-addressed cache of a batch (default OUTDIR/.gramopt-cache; a shared "
                        "folder serves every worker and rerun)")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress bar for a batch")
    guard.add_arguments(o)
    limits.add_arguments(o)  # one --max-… flag per work limit (optimizer.limits.WorkLimits)


def run(args) -> int:
    options = options_of(args)  # bad values (a negative limit, a missing cost model): exit 2 before any work
    jsonl = os.path.isfile(args.input) and args.input.endswith(".jsonl") and is_schema(args.input, args.dialect)
    if os.path.isdir(args.input) or (jsonl and args.output and os.path.isdir(args.output)) or \
            (jsonl and args.output and not os.path.splitext(args.output)[1]):
        if not args.output or args.output == "-":
            raise GrammarError("optimizing a batch (a folder, a JSONL file) needs -o OUTDIR", path=args.input)
        return optimize_batch(args.input, args.output, options, jobs=args.jobs, scheduler=args.scheduler,
                              cache=args.cache, progress=not args.quiet, max_memory=args.max_memory)
    if args.scheduler:
        raise GrammarError("--scheduler runs a batch: give a folder or a JSONL file", path=args.input)
    return optimize_file(args.input, args.output, options, report=args.report, as_json=args.json,
                         check=args.check, diff=args.diff)


def options_of(args) -> Options:
    """The ``Options`` the command line gives (GrammarError on a negative limit or a cost
    model path that does not exist)."""
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None
    work = limits.from_args(args)
    cost_model = None
    if args.cost_model:
        if not os.path.exists(args.cost_model):
            raise GrammarError("no such cost model file or folder", path=args.cost_model)
        cost_model = os.path.abspath(args.cost_model)
    return Options(target=args.target, passes=passes, verify=not args.no_verify, to=args.to,
                   dialect=args.dialect, start=args.start, strict=args.strict, cost_model=cost_model,
                   keep=tuple(args.keep or ()), converter=args.converter, fast=args.fast, limits=work)


def add_converter_argument(p, default: str | None = None) -> None:
    """``--converter``: the JSON Schema converter of a .json input (``default`` words what is
    used without it: analyze and convert take the default target's)."""
    from ..engines.jsonschema import CONVERTERS
    default = default or f"the default target's, {targets.get(targets.DEFAULT).schema_converter}"
    p.add_argument("--converter", choices=CONVERTERS, default=None,
                   help=f"JSON Schema converter for a .json input (default: {default})")


def optimize_file(path: str, output: str | None, options: Options = Options(), *, report=False, as_json=False,
                  check=False, diff=False) -> int:
    """One grammar or schema (``optimizer.run_job``), its warnings and report printed, its
    output written atomically; the exit status."""
    from ..passes import OptimizationError
    if output:
        check_output(output, path)  # before the work: a missing or read-only folder, the input itself
    if not output and not (check or diff or report or as_json):
        raise GrammarError("no output: pass -o OUT (or '-' for stdout), --check, --diff or --report",
                           path=path)
    try:
        outcome = run_job(Job(path, options, output))
    except OptimizationError as e:
        print(e.user_message(path), file=sys.stderr)
        return EXIT_UNSOUND
    original, text, result, converter = outcome.original, outcome.text, outcome.result, outcome.converter
    info = sys.stderr if output == "-" else sys.stdout
    for w in result.report.warnings:
        print(f"{path}: warning: {w}", file=sys.stderr)
    for w in result.report.stops:  # a work limit cut a stage short: always said, with its fallback
        print(f"{path}: note: {w}", file=sys.stderr)
    if report or as_json:  # after optimization: does the grammar stay ambiguous? (gramopt.summary)
        from ..summary import ambiguity_note, sac_growth
        result.report.sac_growth = sac_growth(result.grammar)
        note = ambiguity_note(result.report.sac_growth)
        if note:
            result.report.notes.append(note)
    if report:
        if converter:
            print(f"schema converted by {converter}", file=info)
        print(result.report.format(), file=info)
    if as_json:
        report_json = result.report.to_json()
        if converter:
            report_json["converter"] = converter
        print(json.dumps(report_json, indent=2, ensure_ascii=False, default=str), file=info)
    if diff:
        out_name = output if output and output != "-" else path + " (optimized)"
        sys.stdout.writelines(difflib.unified_diff(original.splitlines(True), text.splitlines(True),
                                                   path, out_name))
    if output:
        with stage("writing"):
            write_file(output, text)
    if check and text != original:
        print(f"{path}: would change", file=sys.stderr)
        return EXIT_CHANGED
    return EXIT_OK


def optimize_batch(path: str, outdir: str, options: Options = Options(), *, jobs: int = 0,
                   scheduler: str | None = None, cache: str | None = None, progress: bool = True,
                   max_memory: str | None = None) -> int:
    """A folder of grammars and schemas, or a JSONL file of schemas, into ``outdir``
    (``gramopt.cli.batch``: local worker processes or a Dask cluster, a content-addressed cache
    in ``cache``, default ``OUTDIR/.gramopt-cache``); ``max_memory`` holds in each worker."""
    from .batch import CACHE_FOLDER, batch_items, check_outdir, run_batch
    check_outdir(outdir)  # a file, a read-only folder: exit 2 before any work
    if os.path.isdir(path):
        src, dst = os.path.realpath(path), os.path.realpath(outdir)
        if dst == src or dst.startswith(src.rstrip(os.sep) + os.sep):
            # -o DIR would overwrite every input; -o DIR/out would optimize its own outputs
            # on the next run (out/out/out…)
            raise GrammarError("the output folder is the input folder or inside it: write outside "
                               f"'{path}'", path=outdir)
    items = batch_items(path, outdir, to=options.to, target=options.target, dialect=options.dialect)
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        raise GrammarError(f"cannot make the output folder: {e.strerror or e}", path=outdir) from None
    return run_batch(items, options, workers=jobs, scheduler=scheduler,
                     cache_dir=cache or os.path.join(outdir, CACHE_FOLDER), progress=progress,
                     max_memory=max_memory)
