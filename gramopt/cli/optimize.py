"""``gramopt optimize IN -o OUT``: gramopt as a build step, one grammar (or JSON Schema) or a batch.

Guarantees a pipeline relies on: the input is never modified; every output is written
atomically (temp file + rename), so an interrupted run leaves either the old file or the
new one; nothing is written when verification finds a difference (exit 3, the
counterexample printed); in a batch (a folder, or a JSONL file of schemas: ``gramopt.batch``)
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
from ..formats import (DIALECTS, EXTENSIONS, WRITABLE, check_output, check_writable, read, read_text, write,
                       write_file)
from ..grammar import GrammarError
from ..stage import stage
from . import guard
from .exits import EXIT_CHANGED, EXIT_OK, EXIT_UNSOUND

HELP = "optimize a grammar (or a folder of grammars)"
SCHEMA_EXTENSIONS = (".json", ".jsonl")
SCHEMA = "jsonschema"


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
    o.add_argument("--max-nodes", type=int, metavar="N",
                   help="work limit: e-nodes of one saturation (default: egraph.Limits.nodes); a larger "
                        "grammar is not lowered into the e-graph, and saturation stops at it")
    o.add_argument("--max-iterations", type=int, metavar="N",
                   help="work limit: saturation iterations (default: egraph.Limits.iterations)")
    o.add_argument("--max-verify-work", type=int, metavar="N",
                   help="work limit of the language check, in Earley steps (default: verify.Bounds.max_work); "
                        "when spent, the input is written unchanged and the stop reason printed")
    o.add_argument("--max-cleanup-work", type=int, metavar="N",
                   help="work limit of the clean-ups, in expression nodes and code points over their runs "
                        "(default: egraph.Limits.cleanup_work); when spent they stop, the stop reason printed")
    o.add_argument("--max-inline-work", type=int, metavar="N",
                   help="work limit of the inliner, in κ of the bodies it rewrites (default: "
                        "egraph.Limits.inline_work); when spent it stops, the stop reason printed")
    o.add_argument("--max-engine-check-steps", type=int, metavar="N",
                   help="work limit of the engine check, in token-mask comparisons per engine (default: "
                        "egraph.Limits.engine_check_steps; 0 turns it off): the output's masks against the "
                        "input's in every engine the target promises (gramopt.judge)")


def run(args) -> int:
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None
    options = dict(target=args.target, passes=passes, verify=not args.no_verify, to=args.to,
                   dialect=args.dialect, start=args.start, strict=args.strict)
    if args.fast:  # only when asked: the batch cache key of a default run stays what it was
        options["fast"] = True
    if args.keep:  # only when asked, like --fast: a default run's cache key stays what it was
        options["keep"] = sorted(set(args.keep))
    if args.converter:
        options["converter"] = args.converter
    from ..passes import WORK_LIMITS, work_limits
    for name in WORK_LIMITS:
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    work_limits(**{k: options.get(k) for k in WORK_LIMITS})  # bad values: exit 2 before any work
    if args.cost_model:
        if not os.path.exists(args.cost_model):
            raise GrammarError("no such cost model file or folder", path=args.cost_model)
        options["cost_model"] = os.path.abspath(args.cost_model)
    jsonl = os.path.isfile(args.input) and args.input.endswith(".jsonl") and is_schema(args.input, args.dialect)
    if os.path.isdir(args.input) or (jsonl and args.output and os.path.isdir(args.output)) or \
            (jsonl and args.output and not os.path.splitext(args.output)[1]):
        if not args.output or args.output == "-":
            raise GrammarError("optimizing a batch (a folder, a JSONL file) needs -o OUTDIR", path=args.input)
        if args.max_memory:  # each worker holds itself to it (not in the cache key: shapes nothing)
            options["max_memory"] = args.max_memory
        return optimize_batch(args.input, args.output, jobs=args.jobs, scheduler=args.scheduler,
                              cache=args.cache, progress=not args.quiet, **options)
    if args.scheduler:
        raise GrammarError("--scheduler runs a batch: give a folder or a JSONL file", path=args.input)
    return optimize_file(args.input, args.output, report=args.report, as_json=args.json,
                         check=args.check, diff=args.diff, **options)


def is_schema(path: str, dialect: str | None) -> bool:
    """A JSON Schema input: ``--dialect jsonschema``, or a .json / .jsonl file."""
    return dialect == SCHEMA or (dialect is None and path.lower().endswith(SCHEMA_EXTENSIONS))


def schema_grammar(path: str, target: str = targets.DEFAULT, converter: str | None = None,
                   warnings: list[str] | None = None):
    """(grammar, converter with version) of the one schema in ``path``, converted by
    ``converter``, else by the target's (``engines.jsonschema.convert_for_target``: its
    ``schema_converter``, or its fallback when that is not installed); ``warnings`` collects
    what the converter ignored or said. A JSONL file of several schemas is a batch."""
    from ..engines.jsonschema import convert_for_target, load_schemas
    schemas = load_schemas(path)
    if len(schemas) != 1:
        raise GrammarError(f"{len(schemas)} schemas in one input: optimize them into a folder with -o OUTDIR",
                           path=path)
    return convert_for_target(schemas[0], targets.get(target), converter, warnings)


def add_converter_argument(p, default: str | None = None) -> None:
    """``--converter``: the JSON Schema converter of a .json input (``default`` words what is
    used without it: analyze and convert take the default target's)."""
    from ..engines.jsonschema import CONVERTERS
    default = default or f"the default target's, {targets.get(targets.DEFAULT).schema_converter}"
    p.add_argument("--converter", choices=CONVERTERS, default=None,
                   help=f"JSON Schema converter for a .json input (default: {default})")


def written_form(grammar, target, output: str | None, to: str | None, source: str | None,
                 strict: bool = False):
    """(dialect, grammar to write, warning): ``Target.output_form`` with the dialect asked
    for (``to``, or the output's extension); a warning when something was dropped."""
    t = targets.get(target)
    asked = to or dialect_of_extension(output if output != "-" else None)
    dialect, kept, dropped = t.output_form(grammar, asked, source)
    return dialect, kept, t.dropped_warning(dialect, dropped, strict)


def dialect_of_extension(path: str | None) -> str | None:
    d = EXTENSIONS.get(os.path.splitext(path or "")[1].lower())
    return d if d in WRITABLE else None


def optimize_text(path: str, dialect: str | None, to: str | None, output: str | None = None,
                  start: str | None = None, strict: bool = False, **options):
    """Read ``path``, optimize, and return (input text, output text, result, converter). A
    JSON Schema is first converted by the target engine's converter (named, with its
    version, as ``converter``; None for a grammar); its "input text" is the converter's
    grammar. The report names the dialect written and any warning (an error with ``strict``)."""
    from ..passes import WORK_LIMITS, optimize, work_limits
    converter = None
    converted: list[str] = []  # what the schema's converter ignored or said
    target = options.get("target", targets.DEFAULT)
    limits = work_limits(**{k: options.pop(k, None) for k in WORK_LIMITS})
    with stage("reading"):
        if is_schema(path, dialect):
            grammar, converter = schema_grammar(path, target, options.pop("converter", None), converted)
            original = write(grammar)
        else:
            options.pop("converter", None)  # a grammar has no converter
            grammar = read(path, dialect, start)
            original = read_text(path, dialect)
    try:  # before any work: a Lark lexer asked for as GBNF / EBNF (formats.check_writable)
        check_writable(grammar, written_form(grammar, target, output, to, None if converter else path)[0])
        check_kept(grammar, options.get("keep"))
    except GrammarError as e:
        raise _located(e, path, original, converter) from None
    try:
        result = optimize(grammar, **options, **limits)
    except ValueError as e:  # an unknown pass or target name
        raise GrammarError(str(e), path=path) from None
    except GrammarError as e:  # e.g. repetitions too large to expand
        raise _located(e, path, original, converter) from None
    if strict and result.report.warnings:  # about the input: an empty language
        raise GrammarError(result.report.warnings[0] + " (--strict)", path=path)
    result.report.warnings[:0] = converted  # about the conversion: said, never fatal
    out_dialect, out_grammar, warning = written_form(result.grammar, target, output, to,
                                                     None if converter else path, strict)
    if warning and strict:
        raise GrammarError(warning, path=path)
    if converter:  # llama.cpp refuses left recursion ($ref loops)
        from ..engines.jsonschema import check_gbnf_loads
        check_gbnf_loads(out_grammar, out_dialect, path)
    result.report.written_as = out_dialect
    if warning:
        result.report.warnings.append(warning)
    text = write(out_grammar, out_dialect)
    subset = targets.get(target).lark_subset
    if out_dialect == "lark" and subset is not None:  # asked of the engine itself, when installed
        refused = subset.error(text)
        if refused:
            result.report.warnings.append(f"{subset.engine} does not load the written grammar: {refused}")
    return original, text, result, converter


def _located(e: GrammarError, path: str, original: str, converter: str | None) -> GrammarError:
    """``e`` at its place in the input; for a schema, the place is in the converted grammar,
    which is not the .json: the line is named as the converted grammar's."""
    if not converter or e.pos is None:
        return e.located(path, original if not converter else None)
    return GrammarError(f"{e.message} (converted grammar line {e.pos.line})", None, path)


def check_kept(grammar, keep) -> None:
    """Every ``--keep RULE`` names a rule of ``grammar`` (GrammarError otherwise)."""
    missing = [k for k in keep or () if k not in grammar]
    if missing:
        raise GrammarError(f"--keep {missing[0]}: no rule named '{missing[0]}'")



def optimize_file(path: str, output: str | None, *, dialect=None, to=None, start=None, target=targets.DEFAULT,
                  passes=None, verify=True, report=False, as_json=False, check=False,
                  diff=False, strict=False, cost_model=None, fast=False, keep=None, converter=None,
                  **work) -> int:
    from ..passes import OptimizationError
    if output:
        check_output(output, path)  # before the work: a missing or read-only folder, the input itself
    if not output and not (check or diff or report or as_json):
        raise GrammarError("no output: pass -o OUT (or '-' for stdout), --check, --diff or --report",
                           path=path)
    try:
        original, text, result, converter = optimize_text(path, dialect, to, output, start, strict,
                                                          target=target, passes=passes, verify=verify,
                                                          cost_model=cost_model, fast=fast, converter=converter,
                                                          **({"keep": keep} if keep else {}), **work)
    except OptimizationError as e:
        print(e.user_message(path), file=sys.stderr)
        return EXIT_UNSOUND
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


def optimize_batch(path: str, outdir: str, *, jobs: int = 0, scheduler: str | None = None,
                   cache: str | None = None, progress: bool = True, report: bool = False,
                   **options) -> int:
    """A folder of grammars and schemas, or a JSONL file of schemas, into ``outdir``
    (``gramopt.batch``: local worker processes or a Dask cluster, a content-addressed cache
    in ``cache``, default ``OUTDIR/.gramopt-cache``)."""
    from ..batch import CACHE_FOLDER, batch_items, check_outdir, run_batch
    check_outdir(outdir)  # a file, a read-only folder: exit 2 before any work
    if os.path.isdir(path):
        src, dst = os.path.realpath(path), os.path.realpath(outdir)
        if dst == src or dst.startswith(src.rstrip(os.sep) + os.sep):
            # -o DIR would overwrite every input; -o DIR/out would optimize its own outputs
            # on the next run (out/out/out…)
            raise GrammarError("the output folder is the input folder or inside it: write outside "
                               f"'{path}'", path=outdir)
    items = batch_items(path, outdir, to=options.get("to"), target=options.get("target", targets.DEFAULT),
                        dialect=options.get("dialect"))
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        raise GrammarError(f"cannot make the output folder: {e.strerror or e}", path=outdir) from None
    return run_batch(items, options, workers=jobs, scheduler=scheduler,
                     cache_dir=cache or os.path.join(outdir, CACHE_FOLDER), progress=progress)


optimize_folder = optimize_batch  # the folder form's older name
