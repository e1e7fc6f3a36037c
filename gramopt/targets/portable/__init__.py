"""The portable target's fix-ups: the safety steps every engine needs.

    fixup(grammar, notes, fired) -> grammar     no left recursion, counted groups written out,
                                                repetitions and character rules flat,
                                                a root no rule references, GBNF rule names
                                                llama.cpp reads
    no_left_recursion(grammar, notes, fired)    the first step alone (the llama.cpp target's fix-up)
    reduce(grammar)                             without its redundancy: the fallback the guard
                                                judges against (``targets.guard``)

Why each (``../shared/ENGINES.md`` and ``gramopt/targets/xgrammar``):

* **no left recursion**: llama.cpp refuses a left-recursive grammar ("unsupported grammar");
  ``A ::= A α | β`` becomes ``A ::= β α*`` (``transforms.reshape.left_recursion``: L(A) = β·α*). The
  extractor emits none for this target (``left_recursion=False``), so the step only finds
  what an input or a skipped e-graph pass left. Also in a Lark grammar with a lexer of its
  own, which llama.cpp never gets (``formats.engine_reads``): llguidance is faster on the star
  too (held-out ligurio__lua, p95 35.0 against 40.3 ms a Qwen mask, A/A 41.7).
* **any character as every engine reads it**: xgrammar refuses GBNF's ``.``, llguidance the
  ``[^]`` xgrammar's EBNF writes; all three read ``[^\\n] | "\\n"``
  (``transforms.reshape.any_char``).
* **repetitions with flat bodies**: xgrammar 0.2.8 lowers a repetition whose body holds a
  rule reference or a nested group (``"\"" ([^"\\] | "\\" e)* "\""``, a JSON string as the
  e-graph or llama.cpp's converter writes it) into helper rules, ~62-89 ms a Qwen mask inside
  the string against 0.10 ms with the body flat; llguidance decides both alike, llama.cpp the
  flat one as fast with its wide class written last (``transforms.reshape.flat_stars``: leaf
  rules read through, groups distributed; ``benchmarks/star_forms.py``).
* **counted repetitions of a group written out**: ``c{8,}`` (the clean-ups merge ``c c … c*``)
  took xgrammar 325-362 ms a mask inside the string, ``c c … c c*`` with ``c`` flat 0.12 ms
  (``transforms.reshape.counted``).
* **character rules written flat**: the same cliff where a string's length is bounded
  (``"\"" char char (char (char …)?)? "\""``, llama.cpp's converter's ``maxLength``): 68 ms an
  xgrammar mask, 0.12 ms with ``char`` written flat in place, llama.cpp 29 ms against 36, in the
  rules llguidance reads as one lexeme only, so its lexemes stay (``transforms.reshape.flat_stars.
  flatten_character_rules``).
* **groups nested too deep lifted into rules**: the flat characters nest llama.cpp's converter's
  ``char (char (char …)?)?`` two levels deeper than the reader's bound, and a pass whose output
  is deeper is thrown away whole (``passes._too_big``); lifted as the reader lifts them
  (``transforms.reshape.deep_groups``), xgrammar's p95 inside o13272's string went from 89 to
  1.3 ms a mask (``benchmarks/results/deep-groups-2026-11-28``).
* **a root that delegates**: xgrammar 0.2.8 computes wrong masks for a start rule that a rule
  references (``root ::= "a" root "b" | ""`` misses ``bb`` after ``aaaaaaaa``); such a root
  becomes ``root ::= root-rec`` with ``root-rec`` holding the body (``transforms.reshape.root_wrapper``). A root no rule
  references (``root ::= item+``) is left as it is, and so is the root of a Lark grammar with a
  lexer of its own, which xgrammar never gets (``formats.engine_reads``).
* **rule names llama.cpp reads**: its parser takes ``[A-Za-z0-9-]`` only and refuses
  ``select_statement``; a GBNF grammar's other characters become ``-``
  (``transforms.reshape.rule_names``, a renaming).

Both are language-preserving (each step's module states its argument) and idempotent.
"""

from __future__ import annotations

from ...formats import dialect_record, engine_reads
from ...grammar.dialects import token_atoms
from ...grammar import Grammar
from ...transforms.fixpoint import fixpoint
from ...transforms.registry import remove_redundancy, reshaping


def no_left_recursion(g: Grammar, notes: list[str] | None = None, fired: dict | None = None) -> Grammar:
    """``g`` with no direct left recursion (``A ::= A α | β`` as ``A ::= β α*``); ``notes`` /
    ``fired`` collect what was done."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired

    def round_(g: Grammar) -> Grammar:
        g, names = reshaping("left-recursion")(g)  # no names: the same grammar
        if names:
            fired["left-recursion"] = fired.get("left-recursion", 0) + len(names)
            notes.append(f"left recursion as a star in {', '.join(names[:6])}{' …' if len(names) > 6 else ''}")
        return g
    return fixpoint(round_, g, 16)  # one round removes every direct left recursion; bounded all the same


def reduce(g: Grammar) -> Grammar:
    """``g`` without its redundancy (``transforms.registry.remove_redundancy``: pass-through
    and duplicated rules, unreachable rules, split literals), before and after left recursion
    is written as stars (the first fix-up, which the target applies anyway): a helper
    ``H ::= H x | ""`` is a copy of ``x*`` written elsewhere, a duplicate only once it reads so.
    Language-preserving: each step is (its module's argument)."""
    return remove_redundancy(no_left_recursion(remove_redundancy(g)))


def _step(g: Grammar, name: str, what: str, notes: list[str], fired: dict, *args) -> Grammar:
    """``g`` after the registry's reshaping ``name`` (with ``args``); what it changed is
    counted as ``portable-<name>`` and said in a note."""
    g, changed = reshaping(name)(g, *args)
    if changed:
        fired[f"portable-{name}"] = fired.get(f"portable-{name}", 0) + len(changed)
        notes.append(f"portable: {what} {', '.join(changed[:6])}{' …' if len(changed) > 6 else ''}")
    return g


def fixup(g: Grammar, notes: list[str] | None = None, fired: dict | None = None) -> Grammar:
    """``g`` with no direct left recursion, repetitions with flat bodies, no referenced root and
    (GBNF) llama.cpp's rule names (module docstring);
    ``notes`` / ``fired`` collect what was done, for the pass report."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired
    g = no_left_recursion(g, notes, fired)
    if not token_atoms(g.dialect):  # bytes and code points: a Lark grammar's lexer is its own
        g = _step(g, "any-char", "any character written as every engine reads it in", notes, fired)
        g = _step(g, "counted-groups", "counted repetitions written out in", notes, fired)
        g = _step(g, "flat-stars", "repetitions written flat in", notes, fired)
        # in the rules llguidance reads as one lexeme only: its lexemes stay as they were
        g = _step(g, "flat-characters", "character rules written flat in", notes, fired, True)
        # ... where that nests a string's maxLength chain past the passes' bound: lifted into rules
        g = _step(g, "deep-groups", "groups nested too deep lifted into rules in", notes, fired)
    # '-' where GBNF and xgrammar EBNF are written: llama.cpp's rule names have no '_'
    wrapped = None
    if engine_reads("xgrammar", g):  # (xgrammar's mask bug; it never gets a Lark lexer grammar)
        g, wrapped = reshaping("root-wrapper")(g, dialect_record(g.dialect).name_separator)
    if wrapped:
        fired["portable-root-wrapper"] = fired.get("portable-root-wrapper", 0) + 1
        notes.append(f"portable: root delegates to {wrapped}")
    if not dialect_record(g.dialect).underscore_names:  # GBNF: llama.cpp reads no '_'
        g, renamed = reshaping("rule-names")(g)
        if renamed:
            fired["portable-rule-names"] = fired.get("portable-rule-names", 0) + len(renamed)
            notes.append(f"portable: rule names in llama.cpp's characters: {', '.join(renamed[:6])}"
                         f"{' …' if len(renamed) > 6 else ''}")
    return g


__all__ = ["fixup", "no_left_recursion", "reduce"]
