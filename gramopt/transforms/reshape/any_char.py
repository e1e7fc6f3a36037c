"""Any character written as every engine reads it: ``.`` as ``([^\\n] | "\\n")``.

    spell_any_char(grammar) -> (grammar, names of the rules changed)

The three engines disagree on how a grammar may say "any character". llama.cpp's and
llguidance's GBNF readers take ``.`` and xgrammar's EBNF reader refuses it (``Rule "." is
not defined``); xgrammar and llama.cpp take the empty negated class ``[^]`` (what the EBNF
writer prints) and llguidance refuses it (``invalid regex "[^]"``); llguidance also refuses a
class written with ``\\U`` escapes. All three read a negated class and a literal, so the
portable target writes the any-character class (``CharClass((), negated=True)``, or a class
of every code point) as ``[^\\n] | "\\n"``: a grammar people wrote for llama.cpp with
``"\\\\" .`` in its strings then loads in xgrammar too (held-out jade__tool_call).

Argument: ``[^\\n]`` is every code point but U+000A and ``"\\n"`` is U+000A, so their union
is every code point: the class's own set, one character either way.
"""

from __future__ import annotations

from ...grammar import CharClass, Expr, Grammar, Literal, alt, transform
from ..cleanup.common import map_bodies

NEWLINE = 0x0A
EVERY_CODE_POINT = ((0, 0x10FFFF),)


def is_any_char(e: Expr) -> bool:
    """Whether ``e`` is a class of every code point (``.``, ``[^]``, ``[\\x00-\\U0010FFFF]``)."""
    return isinstance(e, CharClass) and e.code_points() == EVERY_CODE_POINT


def spelled(e: Expr) -> Expr:
    """``e`` with every any-character class written as ``[^\\n] | "\\n"``."""
    if is_any_char(e):
        return alt(CharClass(((NEWLINE, NEWLINE),), negated=True), Literal("\n"))
    return e


def spell_any_char(g: Grammar) -> tuple[Grammar, list[str]]:
    """``g`` with every any-character class spelt as all three engines read it (module
    docstring), in every rule but the pinned ones (an engine's own form, ``Rule.pinned``, kept
    as written); returns the grammar and the rules changed (empty: ``g`` itself)."""
    out = map_bodies(g, lambda body: transform(body, spelled))  # an untouched body comes back as is
    return out, [a.name for a, b in zip(g.rules, out.rules) if a.body != b.body]
