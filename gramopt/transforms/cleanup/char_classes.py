"""Merge single-character alternatives into one character class (GBNF / EBNF only).

    # "a" | "b" | [c-d]          -->  [a-d]
    # "x" | "ab" | [0-9] | A     -->  [x0-9] | "ab" | A      (merged class where the first was)
    # [^a-c] | "a"               -->  [^b-c]

Why it preserves the language: a one-code-point literal and a character class each denote
a set of single code points (their UTF-8 encodings); the union of such sets is the class of
the union of the code points, and a union of alternatives may be regrouped in any order
(union is associative and commutative). When a negated class takes part, the result is the
negated class of the complement of the union, so it stays as short to write.

Not in Lark: there a literal is a lexer token, and turning two tokens into one class would
change what the lexer produces. κ never increases: k single-symbol productions become one
(−2 per merged member), and a nested alternation left with one member loses its helper.
Idempotent.
"""

from __future__ import annotations

from ...grammar import Alt, CharClass, Expr, Grammar, Literal, transform
from ...grammar.expr import alt, complement_ranges
from .common import is_lark, map_bodies


def single_code_points(e: Expr) -> tuple[tuple[int, int], ...] | None:
    """The code points of ``e`` when ``e`` denotes single code points only, else None."""
    if isinstance(e, CharClass):
        return e.code_points()
    if isinstance(e, Literal) and len(e.text) == 1:
        return ((ord(e.text), ord(e.text)),)
    return None


def merge_members(e: Alt) -> Expr:
    """``e`` with its single-character members merged into one class at the first's place."""
    singles = [i for i, m in enumerate(e.items) if single_code_points(m) is not None]
    if len(singles) < 2:
        return e
    ranges = [r for i in singles for r in single_code_points(e.items[i])]
    negated = any(isinstance(e.items[i], CharClass) and e.items[i].negated for i in singles)
    merged = CharClass(ranges)
    if negated:
        merged = CharClass(complement_ranges(merged.ranges), negated=True)
    items = [merged if i == singles[0] else m
             for i, m in enumerate(e.items) if i == singles[0] or i not in singles]
    return alt(*items)


def merge_char_alternatives(grammar: Grammar) -> Grammar:
    """Merge the single-character members of every alternation (no-op on Lark grammars)."""
    if is_lark(grammar):
        return grammar
    step = lambda e: merge_members(e) if isinstance(e, Alt) else e  # noqa: E731
    return map_bodies(grammar, lambda body: transform(body, step))
