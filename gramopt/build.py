"""gramopt as a build step: optimize one file (a grammar or a JSON Schema), or a batch.

Guarantees a pipeline relies on: the input is never modified; every output is written
atomically (temp file + rename), so an interrupted run leaves either the old file or the
new one; nothing is written when verification finds a difference (exit 3, the
counterexample printed); in a batch (a folder, or a JSONL file of schemas: ``gramopt.batch``)
an input whose content and options are in the content-addressed cache is not optimized
again.
"""

from __future__ import annotations

import difflib
import json
import os
import sys

from .formats import output_dialect, read, write, write_file
from .batch import unsound_message
from .grammar import GrammarError

EXIT_OK, EXIT_CHANGED, EXIT_USAGE, EXIT_UNSOUND = 0, 1, 2, 3


SCHEMA_EXTENSIONS = (".json", ".jsonl")
SCHEMA = "jsonschema"


def is_schema(path: str, dialect: str | None) -> bool:
    """A JSON Schema input: ``--dialect jsonschema``, or a .json / .jsonl file."""
    return dialect == SCHEMA or (dialect is None and path.lower().endswith(SCHEMA_EXTENSIONS))


def schema_grammar(path: str, target: str):
    """(grammar, converter with version) of the one schema in ``path``
    (``engines.jsonschema.for_target``); a JSONL file of several schemas is a batch."""
    from .engines.jsonschema import for_target, load_schemas
    schemas = load_schemas(path)
    if len(schemas) != 1:
        raise GrammarError(f"{len(schemas)} schemas in one input: optimize them into a folder with -o OUTDIR",
                           path=path)
    return for_target(schemas[0], target)


def optimize_text(path: str, dialect: str | None, to: str | None, output: str | None = None,
                  start: str | None = None, **options):
    """Read ``path``, optimize, and return (input text, output text, result, converter). A
    JSON Schema is first converted by the target engine's converter (named, with its
    version, as ``converter``; None for a grammar); its "input text" is the converter's
    grammar."""
    from .passes import optimize
    converter = None
    if is_schema(path, dialect):
        grammar, converter = schema_grammar(path, options.get("target", "generic"))
        original = write(grammar)
    else:
        grammar = read(path, dialect, start)  # checks encoding: a file it accepts is valid UTF-8
        with open(path, encoding="utf-8") as f:
            original = f.read()
    try:
        result = optimize(grammar, **options)
    except ValueError as e:  # an unknown pass or target name
        raise GrammarError(str(e), path=path) from None
    return original, write(result.grammar, output_dialect(result.grammar, output, to, path)), result, converter


def optimize_file(path: str, output: str | None, *, dialect=None, to=None, start=None, target="generic",
                  passes=None, verify=True, report=False, as_json=False, check=False,
                  diff=False) -> int:
    from .passes import OptimizationError
    if output and output != "-" and os.path.exists(output) and os.path.samefile(output, path):
        raise GrammarError("refusing to overwrite the input file: write to another path", path=path)
    if not output and not (check or diff or report or as_json):
        raise GrammarError("no output: pass -o OUT (or '-' for stdout), --check, --diff or --report",
                           path=path)
    try:
        original, text, result, converter = optimize_text(path, dialect, to, output, start, target=target,
                                               passes=passes, verify=verify)
    except OptimizationError as e:
        print(unsound_message(path, e), file=sys.stderr)
        return EXIT_UNSOUND
    info = sys.stderr if output == "-" else sys.stdout
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
        write_file(output, text)
    if check and text != original:
        print(f"{path}: would change", file=sys.stderr)
        return EXIT_CHANGED
    return EXIT_OK


# ---------------------------------------------------------------- folders and JSONL files


def optimize_batch(path: str, outdir: str, *, jobs: int = 0, scheduler: str | None = None,
                   cache: str | None = None, progress: bool = True, report: bool = False,
                   **options) -> int:
    """A folder of grammars and schemas, or a JSONL file of schemas, into ``outdir``
    (``gramopt.batch``: local worker processes or a Dask cluster, a content-addressed cache
    in ``cache``, default ``OUTDIR/.gramopt-cache``)."""
    from .batch import CACHE_FOLDER, batch_items, run_batch
    items = batch_items(path, outdir, to=options.get("to"), target=options.get("target", "generic"),
                        dialect=options.get("dialect"))
    os.makedirs(outdir, exist_ok=True)
    return run_batch(items, options, workers=jobs, scheduler=scheduler,
                     cache_dir=cache or os.path.join(outdir, CACHE_FOLDER), progress=progress)


optimize_folder = optimize_batch  # the folder form's older name
