"""Optimize one input: ``run_job(job) -> Outcome``, the one implementation behind
``gramopt optimize FILE`` and every batch worker (``gramopt.cli.batch``).

A job is a grammar or a JSON Schema (a path, or the text a batch client read for its
worker), the ``Options`` that shape the output and where the output will go (its extension
picks the dialect unless ``--to`` does). ``run_job`` reads the input (a schema through the
target engine's converter), refuses before any work what cannot be written, optimizes under
the work limits, refuses an empty language under ``--strict``, chooses the output dialect
(``Target.output_form``), collects the warnings (what the schema's converter ignored, what
the dialect cannot carry, what the target's Lark engine would refuse) and refuses a schema
grammar that llama.cpp cannot load. It returns the output text; the caller writes it
atomically (``formats.write_file``): the command line after its report, a batch's client
for its workers. Errors are ``GrammarError`` (exit 2, located in the input) and
``OptimizationError`` (exit 3).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import targets
from ..formats import (EXTENSIONS, SCHEMA, WRITABLE, check_writable, clean_text, parse, read, read_text,
                       token_atoms, unwritable, write)
from ..grammar import GrammarError
from ..stage import stage
from .options import Options

SCHEMA_EXTENSIONS = (".json", ".jsonl")


@dataclass(frozen=True)
class Job:
    """One input: ``source`` (its path: read when ``text`` is None, and named in messages),
    ``text`` (the input as a batch client read it), ``kind`` (a dialect or ``jsonschema``;
    None: ``options.dialect``, else from the extension), ``line`` (a JSONL file's line), the
    ``output`` path (None, or '-' for stdout) and the ``options``."""

    source: str
    options: Options = Options()
    output: str | None = None
    text: str | None = None
    kind: str | None = None
    line: int = 0


@dataclass
class Outcome:
    """``original`` (the input's text; for a schema, its converter's grammar), ``text`` (the
    output), ``result`` (``passes.Result``: the grammar and its report) and ``converter`` (the
    schema converter with its version; None for a grammar)."""

    original: str
    text: str
    result: object
    converter: str | None


def is_schema(path: str, dialect: str | None) -> bool:
    """A JSON Schema input: ``--dialect jsonschema``, or a .json / .jsonl file."""
    return dialect == SCHEMA or (dialect is None and path.lower().endswith(SCHEMA_EXTENSIONS))


def dialect_of_extension(path: str | None) -> str | None:
    """The writable dialect an output path's extension names, else None."""
    d = EXTENSIONS.get(os.path.splitext(path or "")[1].lower())
    return d if d in WRITABLE else None


def asked_dialect(output: str | None, to: str | None) -> str | None:
    """The dialect the user asked for: ``--to``, else the output path's extension (None: none)."""
    return to or dialect_of_extension(output if output != "-" else None)


def written_form(grammar, target, output: str | None, to: str | None, source: str | None,
                 strict: bool = False):
    """(dialect, grammar to write, warning): ``Target.output_form`` with the dialect asked
    for (``asked_dialect``); a warning when something was dropped."""
    t = targets.get(target)
    dialect, kept, dropped = t.output_form(grammar, asked_dialect(output, to), source)
    return dialect, kept, t.dropped_warning(dialect, dropped, strict)


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


def check_kept(grammar, keep) -> None:
    """Every ``--keep RULE`` names a rule of ``grammar`` (GrammarError otherwise)."""
    missing = [k for k in keep or () if k not in grammar]
    if missing:
        raise GrammarError(f"--keep {missing[0]}: no rule named '{missing[0]}'")


def read_job(job: Job, converted: list[str]):
    """(grammar, original text, converter) of the job's input; ``converted`` collects what a
    schema's converter ignored or said."""
    o = job.options
    kind = job.kind or o.dialect
    if is_schema(job.source, kind):
        if job.text is None:
            grammar, converter = schema_grammar(job.source, o.target, o.converter, converted)
        else:
            from ..engines.jsonschema import convert_for_target, parse_schema
            grammar, converter = convert_for_target(parse_schema(job.text, job.source, job.line),
                                                    targets.get(o.target), o.converter, converted)
        return grammar, write(grammar), converter
    if job.text:  # as formats.read_text decodes a file (a batch client read its bytes as UTF-8)
        text = clean_text(job.text, job.source)
        return parse(text, kind, job.source, o.start), text, None
    return read(job.source, kind, o.start), read_text(job.source, kind), None


def schema_form(grammar, target: str, output: str | None, to: str | None):
    """(grammar, dialect to write) of a converted schema: the dialect asked for (``to``, or the
    output's extension), else the target's ``schema_dialect``, with what that dialect cannot
    carry left out *before* optimizing (``formats.unwritable``: lookahead assertions are hints,
    the language is the rules'), so the optimizer and the judge see what will be written."""
    dialect = asked_dialect(output, to) or targets.get(target).schema_dialect
    if dialect is None:
        return grammar, to
    return unwritable(grammar, dialect)[0], dialect


def run_job(job: Job) -> Outcome:
    """Optimize one input (module docstring)."""
    from ..passes import optimize
    o = job.options
    source = job.source
    converted: list[str] = []  # what the schema's converter ignored or said
    with stage("reading"):
        grammar, original, converter = read_job(job, converted)
    src = None if converter else source
    to = o.to
    if converter:
        grammar, to = schema_form(grammar, o.target, job.output, to)
    try:  # before any work: a Lark lexer asked for as GBNF / EBNF (formats.check_writable)
        check_writable(grammar, written_form(grammar, o.target, job.output, to, src)[0])
        check_kept(grammar, o.keep)
    except GrammarError as e:
        raise _located(e, source, original, converter) from None
    try:
        result = optimize(grammar, target=o.target, passes=list(o.passes) if o.passes is not None else None,
                          verify=o.verify, cost_model=o.cost_model, fast=o.fast, keep=o.keep,
                          limits=o.limits.engine_limits(), bounds=o.limits.bounds())
    except ValueError as e:  # an unknown pass or target name
        raise GrammarError(str(e), path=source) from None
    except GrammarError as e:  # e.g. repetitions too large to expand
        raise _located(e, source, original, converter) from None
    if o.strict and result.report.warnings:  # about the input: an empty language
        raise GrammarError(result.report.warnings[0] + " (--strict)", path=source)
    result.report.warnings[:0] = converted  # about the conversion: said, never fatal
    out_dialect, out_grammar, warning = written_form(result.grammar, o.target, job.output, to, src, o.strict)
    if warning and o.strict:
        raise GrammarError(warning, path=source)
    if converter:  # llama.cpp refuses left recursion ($ref loops)
        from ..engines.jsonschema import check_gbnf_loads
        check_gbnf_loads(out_grammar, out_dialect, source)
    result.report.written_as = out_dialect
    if warning:
        result.report.warnings.append(warning)
    # the input's dialect kept (no --to, no output extension naming another: e.g. a Lark input, or a
    # batch's x.lark, for xgrammar), which the target's engine does not load
    converting = to or dialect_of_extension(job.output) not in (None, dialect_of_extension(src))
    unread = None if converting else targets.get(o.target).unread_warning(out_dialect)
    if unread:
        result.report.warnings.append(unread)
    text = write(out_grammar, out_dialect)
    subset = targets.get(o.target).lark_subset
    if token_atoms(out_dialect) and subset is not None:  # asked of the engine itself, when installed
        refused = subset.error(text)
        if refused:
            result.report.warnings.append(f"{subset.engine} does not load the written grammar: {refused}")
    return Outcome(original, text, result, converter)


def _located(e: GrammarError, path: str, original: str, converter: str | None) -> GrammarError:
    """``e`` at its place in the input; for a schema, the place is in the converted grammar,
    which is not the .json: the line is named as the converted grammar's."""
    if not converter or e.pos is None:
        return e.located(path, original if not converter else None)
    return GrammarError(f"{e.message} (converted grammar line {e.pos.line})", None, path)


__all__ = ["Job", "Outcome", "check_kept", "dialect_of_extension", "is_schema", "run_job", "schema_grammar",
           "written_form"]
