"""Grammar dialects as records (``Dialect``, ``DIALECT[name]``), on the IR's floor so that the
analyses, the verifier and the runtime read them too; their public home is ``gramopt.formats``
(which re-exports every name here, and owns the readers and writers).

Every difference between dialects that gramopt reads is a field of the record, so nothing
outside ``gramopt.formats`` compares dialect names (tests/test_dialect_names.py). A name
gramopt does not know (``Grammar.dialect`` of a grammar built in code, a JSON Schema) reads
as ``UNKNOWN``: code-point literals, '_' in rule names, left recursion allowed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """A grammar dialect, as a record (like ``targets.Target``). ``display``: its name in a
    report; ``writable``: gramopt writes it; ``carries_lookahead``: it writes a rule's
    lookahead assertion (the others drop them: hints, the language is the rules');
    ``token_atoms``: literals, terminals and regexps are tokens of a lexer, not code points
    (Lark; an NLTK ``.cfg`` reads as a Lark-semantics grammar); ``ebnf_family``: read by the
    EBNF readers (a target's own output dialect replaces it); ``name_separator``: what joins
    the parts of a rule name the fix-ups make (llama.cpp's rule names have no '_');
    ``underscore_names``: its readers take '_' in a rule name (llama.cpp's GBNF reader does
    not: the extractor's helper rules join with '-' there); ``left_recursion``: its engine
    loads a left-recursive grammar (llama.cpp's GBNF does not); ``written_as``: the dialect
    gramopt writes it as when it is not writable (Go EBNF as xgrammar EBNF)."""

    name: str
    extension: str
    display: str
    writable: bool
    carries_lookahead: bool = False
    token_atoms: bool = False
    ebnf_family: bool = False
    name_separator: str = "-"
    underscore_names: bool = True
    left_recursion: bool = True
    written_as: str | None = None


GBNF, EBNF, LARK, GOEBNF, CFG = "gbnf", "ebnf", "lark", "goebnf", "cfg"
SCHEMA = "jsonschema"  # a JSON Schema: read as its converter's grammar
RECORDS = (
    Dialect(GBNF, ".gbnf", "GBNF (llama.cpp)", True, ebnf_family=True, underscore_names=False, left_recursion=False),
    Dialect(EBNF, ".ebnf", "xgrammar EBNF", True, carries_lookahead=True, ebnf_family=True),
    Dialect(LARK, ".lark", "Lark", True, token_atoms=True, name_separator="_"),
    Dialect(GOEBNF, ".goebnf", "Go EBNF", False, ebnf_family=True, written_as=EBNF),
    Dialect(CFG, ".cfg", "NLTK CFG", True, name_separator="_"),
)
DIALECT = {d.name: d for d in RECORDS}
UNKNOWN = Dialect("", "", "", False)
"""The record of a name gramopt does not know (module docstring)."""


def dialect_record(name: str | None) -> Dialect:
    """The record of dialect ``name`` (``UNKNOWN`` for a name gramopt does not know)."""
    return DIALECT.get(name, UNKNOWN) if name is not None else UNKNOWN


def token_atoms(name: str | None) -> bool:
    """Whether a grammar of dialect ``name`` has lexer tokens for atoms (Lark): its literals are
    then never fused, split or merged at code-point granularity."""
    return dialect_record(name).token_atoms


def written_as(name: str) -> str:
    """The dialect gramopt writes a grammar of dialect ``name`` as (its own when writable)."""
    return dialect_record(name).written_as or name


__all__ = ["CFG", "DIALECT", "Dialect", "EBNF", "GBNF", "GOEBNF", "LARK", "RECORDS", "SCHEMA", "UNKNOWN", "dialect_record",
           "token_atoms", "written_as"]
