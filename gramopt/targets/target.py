"""What a target engine is to the optimizer: one record, read by the passes.

Every difference between targets is a field here, so nothing outside ``gramopt.targets``
compares target names: the pass manager asks the record (which clean-ups to skip, how to
inline, how the extractor charges recursion, which fix-ups to run, which engine to check
against, which dialect carries the result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from ..formats import DIALECT, output_dialect, token_atoms, unwritable
from ..grammar import Grammar
from ..transforms.inline import INLINE_BY_KAPPA, INLINE_LEAVES, INLINE_LEXICAL, INLINE_NONE

Fixup = Callable[[Grammar, list, dict], Grammar]
"""``fixup(grammar, notes, fired) -> grammar``: a language-preserving reshaping that records
what it did in the pass report's ``notes`` and ``fired`` counts."""


class Guard(Protocol):
    """Judges a candidate output against the input before it is kept (the portable target:
    no engine's static cost may grow; llama.cpp: its model cost must be lower than the
    input's with the fix-ups; ``targets/guard.py``)."""

    name: str

    def accepted(self, original: Grammar) -> str:
        """The pass report's note when a candidate of ``original`` is kept."""

    def worse(self, original: Grammar, candidate: Grammar) -> str | None:
        """Why ``candidate`` may cost an engine more than ``original`` (None: keep it)."""


@dataclass(frozen=True)
class Target:
    """One engine the optimizer can aim at.

    ``recursion_penalty``: the extractor's cost (κ units) per forward reference, i.e. per
    recursion it would emit; the objective that judges an e-graph pass adds the same
    penalty per recursive reference (``objective``). ``left_recursion=False``: the extractor
    emits a forward reference only after a non-nullable item (llama.cpp rejects left
    recursion), and an e-graph pass is never reverted for a κ that grew (removing left
    recursion may cost states). ``guard``: judges the pipeline's output against the input;
    a rejected output gives way to the passes without the e-graph ones, then to the input
    with only the fix-ups (``passes.optimize``). ``checked_in``: the engines the target
    promises its output is safe in; the judge compares the output's token masks with the
    input's in each of them that is installed (``gramopt.judge``). ``calibrated_engine``: the engine whose fitted node
    weights (``gramopt calibrate``) the extractor may use. ``names_nullable``: whether the
    extractor may give a nullable expression used in several places a rule of its own
    (``Extractor(name_nullable=...)``). ``names_lexemes``: whether it may give one a rule of
    its own when that rule would be a leaf in llguidance's sense (only atoms and such rules:
    ``Extractor(name_lexemes=...)``); llguidance lexes a leaf rule as one greedy lexeme and the
    inline copies as several, so the name changes what it accepts (False wherever
    ``checked_in`` names llguidance). ``keeps_derived_lookaheads``: a rule the input used at
    one place stays used at one place, so xgrammar still derives its lookahead assertion
    (``transforms.reshape.derived_lookaheads``). ``output_dialect``: the dialect
    that carries what the fix-ups add (xgrammar's lookahead assertions need xgrammar EBNF);
    None when every dialect does.
    """

    name: str
    summary: str
    skips_cleanups: tuple[str, ...] = ()
    inlining: str = INLINE_BY_KAPPA
    recursion_penalty: float = 0.0
    left_recursion: bool = True
    calibrated_engine: str | None = None
    names_nullable: bool = True
    names_lexemes: bool = True
    keeps_derived_lookaheads: bool = False
    fixups: tuple[tuple[str, Fixup], ...] = ()
    checked_in: tuple[str, ...] = ()
    guard: Guard | None = None
    output_dialect: str | None = None
    schema_converter: str = "xgrammar"  # whose JSON Schema converter makes its grammar (engines/jsonschema.py)
    schema_fallback: str | None = None  # the converter used when schema_converter's package is missing
    # the dialect a converted JSON Schema is written in when none is asked for (None: the
    # converter's); what that dialect cannot carry is left out before optimizing, so the judge
    # checks what is written (the default target: GBNF, which every engine it names reads)
    schema_dialect: str | None = None
    lark_subset: object | None = None  # the Lark its engine loads, when it writes .lark (formats/lark_llguidance)
    # the dialects its engine loads (empty: any gramopt writes); an output in another dialect is
    # written as asked (or as the input's), with a warning (``unread_warning``)
    reads: tuple[str, ...] = ()
    # the input without its redundancy (``transforms.registry.remove_redundancy``): a fallback
    # tried before the bare input when the passes' output is rejected (None: no such step)
    reduce: Callable[[Grammar], Grammar] | None = None

    @property
    def reverts_costlier_passes(self) -> bool:
        """Whether an e-graph pass whose objective grew is reverted (not where κ may have to
        grow to remove left recursion)."""
        return self.left_recursion

    def output_form(self, grammar: Grammar, asked: str | None = None,
                    source: str | None = None) -> tuple[str, Grammar, list[str]]:
        """(dialect, grammar to write, what was dropped): the dialect ``asked`` for, else this
        target's ``output_dialect`` for a grammar of the EBNF family, else the ``source``
        file's (``formats.output_dialect``); what that dialect cannot carry is dropped from
        the grammar and named (lookahead assertions keep the language: they are hints)."""
        if asked:
            dialect = asked
        elif self.output_dialect and grammar.dialect in DIALECT and DIALECT[grammar.dialect].ebnf_family:
            dialect = self.output_dialect
        else:
            dialect = output_dialect(grammar, None, None, source)
        kept, dropped = unwritable(grammar, dialect)
        if token_atoms(dialect) and self.lark_subset is not None:  # the Lark its engine loads
            kept, more = self.lark_subset.convert(kept)
            dropped = dropped + more
        return dialect, kept, dropped

    def dropped_warning(self, dialect: str, dropped: list[str], strict: bool = False) -> str | None:
        """What a user reads when ``output_form`` dropped something (None when nothing); under
        ``strict`` nothing is written, and the message says so."""
        if not dropped:
            return None
        keep = self.output_dialect or "ebnf"
        outcome = "nothing was written (--strict)" if strict else "written without them"
        hint = (f"; write .{keep} or pass --to {keep} to keep them"
                if any(d.startswith("lookahead") for d in dropped) else "")
        return (f"{dialect} cannot carry the {', '.join(dropped)} of the optimized grammar (target "
                f"{self.name}): {outcome}{hint}")

    def unread_warning(self, dialect: str) -> str | None:
        """What a user reads when the output is written, unasked, in a dialect this target's
        engine does not load (a Lark input for xgrammar or llama.cpp: its lexer's terminals have
        no form there, so gramopt keeps the input's dialect); None when it loads it."""
        if not self.reads or dialect in self.reads:
            return None
        asked = " or ".join(DIALECT[d].display for d in self.reads)
        return (f"written as {DIALECT[dialect].display if dialect in DIALECT else dialect}, which {self.name} does "
                f"not load (it reads {asked}): convert it where its terminals allow (--to {self.reads[0]})")

    def apply_fixups(self, grammar: Grammar, notes: list | None = None, fired: dict | None = None) -> Grammar:
        """``grammar`` after this target's fix-ups, in order."""
        notes = [] if notes is None else notes
        fired = {} if fired is None else fired
        for _, fix in self.fixups:
            grammar = fix(grammar, notes, fired)
        return grammar


__all__ = ["Fixup", "Guard", "INLINE_BY_KAPPA", "INLINE_LEAVES", "INLINE_LEXICAL", "INLINE_NONE", "Target"]
