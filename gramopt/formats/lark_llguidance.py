"""The Lark that llguidance loads: a grammar made self-contained for ``grammar_from("lark", …)``.

    for_llguidance(grammar) -> (grammar, dropped)   the subset below; ``dropped`` names what it lost
    llguidance_error(text) -> str | None            llguidance's own verdict on a .lark text

llguidance reads a Lark dialect of its own (measured with llguidance 1.9.1 on the corpus and
on grammars of python-hcl2, pyquil, outlines, gdtoolkit, pddl):

* **no priorities**: ``break_stmt.2:`` and ``NUMERAL.2:`` are "priority not supported yet".
  A priority chooses between parses (rules) or between tokens (lark's lexers); the language
  gramopt keeps for Lark (sequences of terminals) does not depend on it, so it is dropped —
  and said, because a Lark user's lexer may rely on it;
* **no relative imports** (``%import .greek_symbols.GREEK_SYMBOL``: "Unknown common regex")
  and only the ``common`` names it has its own regexps for (``LLGUIDANCE_COMMON``): every
  other imported definition is written in the file instead of its ``%import`` (the reader
  keeps them all in the IR, so this is exact);
* **the start rule is** ``start``: a grammar read with ``--start quil`` has its start rule
  renamed ``start`` (a rule already called ``start`` gets a fresh name; references follow —
  a renaming, so the language is the same).

Templates are expanded by the reader, so none is written. What llguidance still refuses
(e.g. a regexp with a lookbehind, which its regex engine does not have) is named by
:func:`llguidance_error`, for a warning.
"""

from __future__ import annotations

from dataclasses import replace

from ..grammar import Grammar

_START = "start"


def for_llguidance(grammar: Grammar) -> tuple[Grammar, list[str]]:
    """``grammar`` in the Lark subset llguidance loads (module docstring), and what it could
    not carry (the priorities; imports written out and the start renamed change nothing)."""
    dropped: list[str] = []
    prioritized = [d.name for d in (*grammar.rules, *grammar.terminals) if d.priority is not None]
    if prioritized:
        grammar = replace(grammar, rules=tuple(replace(r, priority=None) for r in grammar.rules),
                          terminals=tuple(replace(t, priority=None) for t in grammar.terminals))
        shown = ", ".join(prioritized[:4]) + (" …" if len(prioritized) > 4 else "")
        dropped.append(f"priorities ({len(prioritized)} definitions: {shown}; llguidance loads none, and a "
                       f"Lark lexer may rely on them)")
    imports = [d for d in grammar.directives if d.name in ("import", "override") and not _built_in(d)]
    if imports:
        grammar = replace(grammar, directives=tuple(d for d in grammar.directives if d not in imports))
    if grammar.start and grammar.start != _START:
        mapping = {grammar.start: _START}
        if _START in grammar:
            mapping[_START] = _fresh(f"{_START}_", set(grammar.names))
        grammar = grammar.renamed(mapping)
    return grammar, dropped


# the ``common`` names llguidance 1.9.1 knows (its "Unknown common regex" message lists them)
LLGUIDANCE_COMMON = frozenset(
    "DIGIT HEXDIGIT INT SIGNED_INT DECIMAL _EXP FLOAT SIGNED_FLOAT NUMBER SIGNED_NUMBER ESCAPED_STRING "
    "LCASE_LETTER UCASE_LETTER LETTER WORD CNAME WS_INLINE WS CR LF NEWLINE SH_COMMENT CPP_COMMENT "
    "C_COMMENT SQL_COMMENT".split())


def _built_in(d) -> bool:
    """Whether ``d`` is an ``%import common.NAME`` llguidance resolves itself (its own
    regexps: lark's ``ESCAPED_STRING`` has a lookbehind llguidance's regex engine lacks)."""
    return d.name == "import" and len(d.args) >= 2 and d.args[0] == "common" and d.args[1] in LLGUIDANCE_COMMON


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


__all__ = ["for_llguidance"]


class LarkSubset:
    """What a target that reads Lark its own way asks of a written .lark (``Target.lark_subset``):
    ``convert`` makes the grammar fit, ``error`` asks the engine whether the text loads."""

    def __init__(self, engine: str, convert, error):
        self.engine, self.convert, self.error = engine, convert, error


__all__ += ["LarkSubset"]
