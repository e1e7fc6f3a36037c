"""Readers and writers per dialect, dialect detection, atomic output.

    read(path, dialect=None, start=None, converter=None) -> Grammar   dialect from the extension unless given
    read_text(path, dialect=None) -> str      the file's text (UTF-8, BOM dropped; Latin-1 .cfg)
    parse(text, dialect, path=None, start=None, converter=None) -> Grammar

Dialects are records (``Dialect``, ``DIALECT[name]``): what differs between them is a field,
never a comparison of names outside this package. A JSON Schema (``.json``, or dialect
``"jsonschema"``) reads as the grammar an engine's converter makes of it (``converter``: "xgrammar" or "llama.cpp"; default the default
target's, as ``gramopt optimize`` does; ``engines.jsonschema``), its header naming the
converter.
    write(grammar, dialect=None) -> str       the grammar's own dialect unless given
    check_writable(grammar, dialect)          up front: GrammarError when no output could be written

Every reader raises ``GrammarError`` (with a position) on bad input, never anything else.
"""

from __future__ import annotations

import os
import tempfile

from ..grammar import Grammar, GrammarError
# the records live on the IR's floor (grammar/ reads them too); this is their public home
from ..grammar.dialects import (CFG, DIALECT, EBNF, GBNF, GOEBNF, LARK, RECORDS, SCHEMA, UNKNOWN, Dialect,
                                dialect_record, token_atoms, written_as)

DIALECTS = tuple(d.name for d in RECORDS)
WRITABLE = tuple(d.name for d in RECORDS if d.writable)
EXTENSIONS = {d.extension: d.name for d in RECORDS}
_EXTENSIONS = EXTENSIONS
CARRIES_LOOKAHEAD = tuple(d.name for d in RECORDS if d.carries_lookahead)  # write a rule's lookahead assertion


def display_name(name: str) -> str:
    """A dialect's name in a report (the name itself for one gramopt does not know)."""
    return DIALECT[name].display if name in DIALECT else name


def unwritable(grammar: Grammar, dialect: str) -> tuple[Grammar, list[str]]:
    """(``grammar`` without what ``dialect`` cannot carry, the names of what was dropped).
    Lookahead assertions are hints (the language is the rules'), so dropping them keeps the
    language; only xgrammar EBNF writes them."""
    hinted = [r for r in grammar.rules if r.lookahead is not None]
    if not hinted or dialect in CARRIES_LOOKAHEAD:
        return grammar, []
    from dataclasses import replace
    kept = grammar.replace_rules(replace(r, lookahead=None) if r.lookahead is not None else r
                                 for r in grammar.rules)
    return kept, [f"lookahead assertions ({len(hinted)} rules)"]


def check_writable(grammar: Grammar, dialect: str) -> None:
    """Raise GrammarError, with the position of the first definition in the way, when no
    optimization of ``grammar`` can be written as ``dialect``: a Lark grammar's lexer
    (terminal definitions, regexps, ``%ignore`` / ``%import``) as GBNF or xgrammar EBNF.
    Every pass keeps terminals and directives, so this is known before any work.

    gramopt does not lower Lark's lexer to byte-level rules: Lark tokenizes by its regexps
    (Python ``re``: lookarounds, backreferences) with longest match and priorities, and an
    ``%ignore`` may sit between any two tokens — a concatenation of the token languages
    is not the language Lark accepts, so an exact lowering is not a rewrite of rules."""
    if grammar.dialect != "lark" or dialect not in ("gbnf", "ebnf"):
        return
    what = {"gbnf": "GBNF (llama.cpp)", "ebnf": "xgrammar EBNF"}[dialect]
    why = (f"cannot be written as {what}: gramopt does not lower Lark's lexer (terminals, regexps, "
           f"%ignore) to byte-level rules; write Lark (--to lark, or a .lark output)")
    found = _first_lexer_item(grammar)
    if found is not None:
        label, pos = found
        raise GrammarError(f"{label} {why}", pos)


ENGINE_DIALECTS = {"xgrammar": EBNF, "llama.cpp": GBNF}
"""The dialect gramopt hands each engine a grammar in (llguidance: any, Lark as Lark)."""


def engine_reads(engine: str, grammar: Grammar) -> bool:
    """Whether gramopt can hand ``grammar`` to ``engine`` at all: llguidance reads a Lark
    grammar as Lark and any other as GBNF; xgrammar and llama.cpp read no Lark grammar whose
    lexer (terminals, regexps, directives) gramopt cannot write in their dialect
    (:func:`check_writable`). Known before any work (every pass keeps terminals and
    directives), so a target leaves such an engine out of its decisions: its fix-ups, its
    cost predictions and its engine check serve the engines that can load the output."""
    dialect = ENGINE_DIALECTS.get(engine)
    if dialect is None:
        return True
    try:
        check_writable(grammar, dialect)
    except GrammarError:
        return False
    return True


def _first_lexer_item(grammar: Grammar):
    """(label, position) of the first Lark lexer construct of ``grammar`` in source order:
    a terminal definition, a directive, or a terminal / regexp used in a rule; None."""
    from ..grammar import Regex, Terminal, walk
    items = []
    for t in grammar.terminals:
        items.append((f"Lark terminal '{t.name}'", t.pos))
    for d in grammar.directives:
        items.append((f"Lark directive %{d.name}", d.pos))
    for r in grammar.rules:
        for node in walk(r.body):
            if isinstance(node, Terminal):
                items.append((f"Lark terminal '{node.name}' (used in rule '{r.name}')", r.pos))
                break
            if isinstance(node, Regex):
                items.append((f"Lark regexp /{node.pattern}/ (in rule '{r.name}')", r.pos))
                break
    if not items:
        return None
    return min(items, key=lambda it: (it[1].line, it[1].col) if it[1] is not None else (1 << 30, 0))


def output_dialect(grammar: Grammar, output: str | None, to: str | None = None,
                   source: str | None = None) -> str:
    """The dialect to write: ``to`` if given, else the output file's extension when it
    names a writable dialect (``-o out.lark`` converts), else the source file's (an NLTK
    ``.cfg`` reads as a Lark-semantics grammar but writes back as ``.cfg``), else the
    grammar's own; Go-EBNF is written as xgrammar EBNF, and so is a GBNF source whose
    optimized grammar carries lookahead assertions (``--target xgrammar``)."""
    if to:
        return to
    hinted = any(r.lookahead is not None for r in grammar.rules)
    for path in (output if output != "-" else None, source):
        ext_dialect = _EXTENSIONS.get(os.path.splitext(path or "")[1].lower())
        if ext_dialect in WRITABLE:
            # lookahead assertions (--target xgrammar) need xgrammar EBNF, unless GBNF was asked for
            return "ebnf" if ext_dialect == "gbnf" and hinted and path is source else ext_dialect
    return "ebnf" if grammar.dialect == "goebnf" or (grammar.dialect == "gbnf" and hinted) else grammar.dialect


def detect_dialect(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in _EXTENSIONS:
        raise GrammarError(f"unknown dialect for '{path}': use an extension among "
                           f"{', '.join(sorted(_EXTENSIONS))} or pass --dialect", path=path)
    return _EXTENSIONS[ext]


def parse(text: str, dialect: str, path: str | None = None, start: str | None = None,
          converter: str | None = None) -> Grammar:
    """Parse grammar ``text`` written in ``dialect``; errors carry ``path`` and the line.
    ``start`` names the start rule (default: the dialect's — ``root``, Lark's ``start``,
    the first rule); for Lark, ``start=""`` reads a rule library with no start rule. A JSON
    Schema (dialect ``"jsonschema"``) is converted by ``converter`` (module docstring)."""
    if dialect == SCHEMA:  # its converter is an engine's: gramopt.inputs, a floor above
        raise GrammarError("a JSON Schema is read by gramopt.parse / gramopt.read (gramopt.inputs), "
                           "which convert it with an engine's converter", path=path)
    if converter is not None:
        raise GrammarError(f"a converter reads JSON Schema, not {dialect}", path=path)
    if dialect not in DIALECTS:
        raise GrammarError(f"unknown dialect '{dialect}' (known: {', '.join(DIALECTS + (SCHEMA,))})", path=path)
    try:
        if dialect == "lark":
            from .lark import parse_lark
            return parse_lark(text, path=path, start=start)
        if dialect in ("gbnf", "ebnf"):
            from .ebnf import parse_ebnf
            grammar = parse_ebnf(text, dialect)
        elif dialect == "goebnf":
            from .goebnf import parse_goebnf
            grammar = parse_goebnf(text)
        else:
            from .cfg import parse_cfg
            grammar = parse_cfg(text)
        return with_start(grammar, start)
    except GrammarError as e:
        raise e.located(path, text) from None
    except RecursionError:
        raise GrammarError("grammar nested too deeply", path=path) from None


def with_start(grammar: Grammar, start: str | None) -> Grammar:
    """``grammar`` starting at rule ``start`` (None or its own start: as it is)."""
    if not start or start == grammar.start:
        return grammar
    if start not in grammar.rule_map:
        raise GrammarError(f"no rule named '{start}' to start from")
    from dataclasses import replace
    return replace(grammar, start=start)


def read_text(path: str, dialect: str | None = None) -> str:
    """The text of grammar file ``path`` under gramopt's encoding rule: UTF-8, with a
    leading byte-order mark (U+FEFF) dropped; an NLTK ``.cfg`` file that is not valid
    UTF-8 is read as Latin-1 (NLTK's grammar files predate UTF-8, and ``nltk.data`` reads
    them so). Any other file that is not UTF-8, or that holds a NUL byte, is a
    ``GrammarError`` with the position of the first bad byte."""
    from ..grammar import SourcePos
    dialect = dialect or detect_dialect(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise GrammarError(f"cannot read: {e.strerror}", path=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if dialect != "cfg":
            line = raw[:e.start].count(b"\n") + 1
            col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
            raise GrammarError("file is not valid UTF-8 text", SourcePos(line, col), path) from None
        text = raw.decode("latin-1")
    return clean_text(text, path)


def clean_text(text: str, path: str | None = None) -> str:
    """Decoded grammar text under gramopt's encoding rule (``read_text``): a leading
    byte-order mark dropped, a NUL byte a ``GrammarError`` at its position."""
    from ..grammar import SourcePos
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        i = text.index("\x00")
        raise GrammarError("file contains a NUL byte: not a grammar",
                           SourcePos(text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1), path)
    return text


def read(path: str, dialect: str | None = None, start: str | None = None,
         converter: str | None = None) -> Grammar:
    """Read and parse grammar file ``path`` (its text as :func:`read_text` decodes it); a
    ``.json`` file (or dialect ``"jsonschema"``) holds one JSON Schema (module docstring)."""
    if dialect == SCHEMA or (dialect is None and path.lower().endswith(".json")):
        raise GrammarError("a JSON Schema is read by gramopt.read (gramopt.inputs), which converts it "
                           "with an engine's converter", path=path)
    dialect = dialect or detect_dialect(path)
    return parse(read_text(path, dialect), dialect, path, start, converter)


def write(grammar: Grammar, dialect: str | None = None) -> str:
    """Print ``grammar`` in ``dialect`` (default: its own). Raises GrammarError when the
    target dialect cannot express something the grammar uses (GBNF drops lookahead
    assertions instead: they do not change the language)."""
    dialect = dialect or grammar.dialect
    if dialect in ("gbnf", "ebnf"):
        from .ebnf import write_ebnf
        # GBNF has no lookahead assertions; they are hints (the language is the rules'), so a
        # GBNF file asked for by name gets the grammar without them
        return write_ebnf(grammar, dialect, drop_lookahead=dialect == "gbnf")
    if dialect == "lark":
        from .lark import write_lark
        return write_lark(grammar)
    if dialect == "cfg":
        from .cfg import write_cfg
        return write_cfg(grammar)
    if dialect == "goebnf":
        raise GrammarError("gramopt reads Go-EBNF but writes it as xgrammar EBNF: use --to ebnf")
    raise GrammarError(f"unknown dialect '{dialect}'")


def check_output(path: str, source: str | None = None) -> None:
    """Raise GrammarError now, before any work, when ``path`` cannot be written: its folder
    is missing or not writable, it is a folder, or it is the input file ``source``."""
    if path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise GrammarError(f"output folder '{folder}' does not exist", path=path)
    if os.path.isdir(path):
        raise GrammarError("the output is a folder: give a file name", path=path)
    if source is not None and os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
        raise GrammarError("refusing to overwrite the input file: write to another path", path=path)
    if os.path.exists(path) and not os.path.isfile(path):
        if not os.access(path, os.W_OK):
            raise GrammarError("cannot write to the output: permission denied", path=path)
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise GrammarError(f"cannot write to output folder '{folder}': permission denied", path=path)


def write_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + rename), so a
    reader never sees half a file and an interrupted run leaves the old file intact. A new
    file gets the permissions the umask gives (as ``open`` would), an existing one keeps
    its own; an existing file that is not a regular file (a device such as /dev/full, a
    pipe) is written in place, never replaced. ``-`` writes to standard output. A failure
    is a GrammarError naming the path."""
    if path == "-":
        import sys
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        if os.path.exists(path) and not os.path.isfile(path):
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            return
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".gramopt-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise GrammarError(f"cannot write: {e.strerror or e}", path=path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise GrammarError(f"cannot write: {e.strerror or e}", path=path) from None
        raise
