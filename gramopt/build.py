"""gramopt as a build step: optimize one file, or a folder of grammars in parallel.

Guarantees a pipeline relies on: the input is never modified; every output is written
atomically (temp file + rename), so an interrupted run leaves either the old file or the
new one; nothing is written when verification finds a difference (exit 3, the
counterexample printed); in a folder, a file whose content and options have not changed
since the last run (recorded in ``OUTDIR/.gramopt-cache.json`` by content hash) is skipped.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from .formats import output_dialect, read, write, write_file
from .grammar import GrammarError

GRAMMAR_EXTENSIONS = (".gbnf", ".ebnf", ".lark", ".goebnf", ".cfg")
CACHE_NAME = ".gramopt-cache.json"
EXIT_OK, EXIT_CHANGED, EXIT_USAGE, EXIT_UNSOUND = 0, 1, 2, 3


SCHEMA_EXTENSIONS = (".json", ".jsonl")
SCHEMA = "jsonschema"


def is_schema(path: str, dialect: str | None) -> bool:
    """A JSON Schema input: ``--dialect jsonschema``, or a .json / .jsonl file."""
    return dialect == SCHEMA or (dialect is None and path.lower().endswith(SCHEMA_EXTENSIONS))


def schema_grammar(path: str, target: str):
    """The grammar the target's engine converter makes of the one schema in ``path``, with
    a header naming the converter (``gramopt.engines.jsonschema``); returns (grammar,
    converter with version)."""
    from dataclasses import replace
    from .engines.jsonschema import CONVERTER_OF, convert, converter_version, load_schemas
    schemas = load_schemas(path)
    if len(schemas) != 1:
        raise GrammarError(f"{len(schemas)} schemas in one input: optimize them into a folder with -o OUTDIR",
                           path=path)
    converter = CONVERTER_OF.get(target, CONVERTER_OF["generic"])
    grammar = convert(schemas[0], converter)
    version = converter_version(converter)
    return replace(grammar, header=f"JSON Schema {schemas[0].name} converted by {version}"), version


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


def unsound_message(path: str, e) -> str:
    """What a user sees when the optimized grammar's language differs: the counterexample
    and the pass that introduced it (a bug in gramopt — please report it with the input)."""
    lines = [f"{path}: error: the optimized grammar's language differs from the input's; nothing written"]
    if e.counterexample is not None:
        lines.append(f"  counterexample: {e.counterexample}")
    if e.pass_name:
        lines.append(f"  first changed by pass: {e.pass_name}")
    return "\n".join(lines)


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


# ---------------------------------------------------------------- folders


def _grammar_files(folder: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(GRAMMAR_EXTENSIONS):
                out.append(os.path.relpath(os.path.join(root, name), folder))
    return out


def _key(path: str, options: dict) -> str:
    from . import __version__
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    h.update(json.dumps({**options, "version": __version__}, sort_keys=True).encode())
    return h.hexdigest()


def _job(src: str, dst: str, options: dict) -> tuple[str, int, str, float]:
    """Optimize one file in a worker; returns (src, exit code, message, seconds)."""
    from .passes import OptimizationError
    t0 = time.perf_counter()
    try:
        dialect, to, start = options.get("dialect"), options.get("to"), options.get("start")
        rest = {k: v for k, v in options.items() if k not in ("dialect", "to", "start")}
        _, text, result, _ = optimize_text(src, dialect, to, dst, start, **rest)
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        write_file(dst, text)
        before, after = result.report.kappa_before, result.report.kappa_after
        return src, EXIT_OK, f"κ {before} → {after}", time.perf_counter() - t0
    except GrammarError as e:
        return src, EXIT_USAGE, e.format().splitlines()[0], time.perf_counter() - t0
    except OptimizationError as e:
        return src, EXIT_UNSOUND, unsound_message(src, e).replace("\n", "; "), time.perf_counter() - t0


def optimize_folder(indir: str, outdir: str, *, jobs: int = 0, report: bool = False,
                    **options) -> int:
    files = _grammar_files(indir)
    if not files:
        raise GrammarError("no grammar files (.gbnf .ebnf .lark .goebnf .cfg) in folder", path=indir)
    os.makedirs(outdir, exist_ok=True)
    cache_path = os.path.join(outdir, CACHE_NAME)
    try:
        with open(cache_path, encoding="utf-8") as f:
            cache = json.load(f)
    except (OSError, ValueError):
        cache = {}

    def dst_of(rel: str) -> str:
        root, ext = os.path.splitext(rel)
        return os.path.join(outdir, root + ("." + options["to"] if options.get("to") else
                                            (".ebnf" if ext == ".goebnf" else ext)))

    todo, skipped = [], 0
    keys = {}
    for rel in files:
        keys[rel] = _key(os.path.join(indir, rel), options)
        if cache.get(rel) == keys[rel] and os.path.exists(dst_of(rel)):
            skipped += 1
        else:
            todo.append(rel)
    worst = EXIT_OK
    done = 0
    workers = jobs or os.cpu_count() or 1
    print(f"gramopt: {len(files)} grammars, {skipped} unchanged since the last run, "
          f"{len(todo)} to optimize with {workers} workers", file=sys.stderr)
    # spawn, not fork: egglog and numba start threads, and a forked child can deadlock on their locks
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(todo))), mp_context=ctx) as pool:
        futures = {pool.submit(_job, os.path.join(indir, rel), dst_of(rel), options): rel for rel in todo}
        for fut in as_completed(futures):
            rel = futures[fut]
            src, code, msg, secs = fut.result()
            done += 1
            worst = max(worst, code)
            if code == EXIT_OK:
                cache[rel] = keys[rel]
            else:
                cache.pop(rel, None)
            status = "ok" if code == EXIT_OK else "FAILED"
            print(f"[{done}/{len(todo)}] {rel}: {status} {msg} ({secs:.2f} s)", file=sys.stderr)
            write_file(cache_path, json.dumps(cache, indent=1, sort_keys=True))
    return worst
