"""xgrammar's ``Regex("pattern", json_string=..., flags=...)`` macro, read into the IR exactly.

    regex_to_expr(pattern, json_string=False, flags=None) -> Expr     raises RegexMacroError

The pattern is parsed by Python's own regular-expression parser (``re._parser``, the
maintained parser behind ``re.compile``); its parse tree is then given xgrammar's meaning
(``cpp/fsm_builder.cc``, ``RegexFSMBuilder``), which differs from Python's in a few places:

    construct            xgrammar (what the grammar means)       Python's re
    -------------------  --------------------------------------  ---------------------------
    ``^`` first, ``$``   no-ops: a Regex always matches whole    anchors
    last
    ``.``                any code point, ``\\n`` included         any but ``\\n``
                         (with ``flags`` and no ``s``: not \\n)
    ``\\d \\w \\s``         ASCII [0-9], [0-9A-Za-z_], [\\t-\\r ]     Unicode categories
    ``(?i)`` / ``i``     ASCII case folding only                 Unicode case folding
    json_string=true     the code points U+0000-U+001F, '"' and  —
                         '\\' are removed from every character
                         match (literals too)

So a ``Regex`` denotes a regular language of code-point strings, which the IR writes with
literals, character classes, sequences, alternations and bounded or unbounded repetition;
the translation is structural (one IR node per parse-tree node), so it is exact. Lazy
quantifiers (``*?``) match the same strings under a whole-string match and read as their
greedy forms. A branch that can match nothing under ``json_string`` (a literal ``"``) is
dropped; a pattern that matches nothing at all is refused.

Refused: backreferences, lookarounds, word boundaries and
anchors other than a leading ``^`` / trailing ``$`` (xgrammar ignores an inner anchor with a
warning: gramopt will not guess), atomic groups and possessive quantifiers, conditionals,
scoped inline flags, and what Python's parser itself rejects (e.g. ``\\p{L}``).
"""

from __future__ import annotations

import re
import re._constants as C  # noqa: N812 - re's own opcode names
import re._parser as sre

from ..grammar import CharClass, Epsilon, Expr, Literal, Repeat, alt, seq
from ..grammar.expr import MAX_CODE_POINT, complement_ranges, normalize_ranges

# code points a JSON string body cannot hold unescaped (xgrammar JSONStringForbiddenChars)
JSON_STRING_FORBIDDEN = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
ANY = ((0, MAX_CODE_POINT),)
_CATEGORIES = {  # xgrammar's ASCII meaning of the class escapes: (ranges, negated)
    C.CATEGORY_DIGIT: (((0x30, 0x39),), False),
    C.CATEGORY_NOT_DIGIT: (((0x30, 0x39),), True),
    C.CATEGORY_WORD: (((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)), False),
    C.CATEGORY_NOT_WORD: (((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)), True),
    C.CATEGORY_SPACE: (((0x09, 0x0D), (0x20, 0x20)), False),
    C.CATEGORY_NOT_SPACE: (((0x09, 0x0D), (0x20, 0x20)), True),
}
_REFUSED = {
    C.GROUPREF: "a backreference",
    C.GROUPREF_EXISTS: "a conditional group (?(n)...)",
    C.ASSERT: "a lookahead/lookbehind assertion",
    C.ASSERT_NOT: "a negative lookahead/lookbehind assertion",
    C.ATOMIC_GROUP: "an atomic group (?>...)",
    C.POSSESSIVE_REPEAT: "a possessive quantifier",
}
_PLAIN_FLAGS = C.SRE_FLAG_UNICODE  # implied for str patterns; any other global flag but (?i) is refused


class RegexMacroError(ValueError):
    """A pattern gramopt cannot read exactly; ``offset``: the 0-based position in it where
    Python's parser stopped (None for a construct refused after parsing: its parse tree
    keeps no positions)."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


def regex_to_expr(pattern: str, json_string: bool = False, flags: str | None = None) -> Expr:
    """The IR expression with the language xgrammar gives ``Regex(pattern, ...)``.

    ``flags`` is xgrammar's optional flags argument (``i``, ``s``, ``u``): given, ``.`` stops
    at ``\\n`` unless it holds ``s``; ``i`` folds ASCII case.
    """
    fold = False
    dot = ANY
    if flags is not None:
        bad = sorted(set(flags) - set("isu"))
        if bad:
            raise RegexMacroError(f"regular-expression flag '{bad[0]}' is not supported")
        fold = "i" in flags
        if "s" not in flags:
            dot = complement_ranges(((0x0A, 0x0A),))
    try:
        tree = sre.parse(pattern)
    except re.error as e:
        raise RegexMacroError(f"bad regular expression: {e.msg}", e.pos or 0) from None
    extra = tree.state.flags & ~_PLAIN_FLAGS
    if extra & C.SRE_FLAG_IGNORECASE:
        fold = True
        extra &= ~C.SRE_FLAG_IGNORECASE
    if extra:
        raise RegexMacroError("inline flags other than (?i) are not supported in a Regex macro")
    items = list(tree)
    if items and items[0] == (C.AT, C.AT_BEGINNING):
        items = items[1:]
    if items and items[-1] in ((C.AT, C.AT_END), (C.AT, C.AT_END_STRING)):
        items = items[:-1]
    forbid = JSON_STRING_FORBIDDEN if json_string else ()
    expr = _Translator(pattern, fold, dot, forbid).sequence(items)
    if expr is None:
        raise RegexMacroError("the pattern matches no string" +
                              (" inside a JSON string (json_string=true)" if json_string else ""))
    return expr


class _Translator:
    """Parse tree → IR; ``None`` stands for the empty language (no IR node has it)."""

    def __init__(self, pattern: str, fold: bool, dot: tuple, forbid: tuple):
        self.pattern, self.fold, self.dot, self.forbid = pattern, fold, dot, forbid

    def sequence(self, items) -> Expr | None:
        parts: list[Expr] = []
        for op, av in items:
            e = self.node(op, av)
            if e is None:
                return None
            if isinstance(e, Epsilon):
                continue
            if isinstance(e, Literal) and parts and isinstance(parts[-1], Literal):
                parts[-1] = Literal(parts[-1].text + e.text)  # "ab" rather than "a" "b"
            else:
                parts.append(e)
        return seq(*parts)

    def node(self, op, av) -> Expr | None:
        if op is C.LITERAL:
            return self.codepoints(((av, av),))
        if op is C.NOT_LITERAL:
            return self.codepoints(((av, av),), negated=True)
        if op is C.ANY:
            return self.codepoints(self.dot, folded=True)
        if op is C.IN:
            return self.char_set(av)
        if op is C.BRANCH:
            branches = [b for b in (self.sequence(list(s)) for s in av[1]) if b is not None]
            return alt(*branches) if branches else None
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise self.error("scoped inline flags (?flags:...)")
            return self.sequence(list(sub))
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            body = self.sequence(list(sub))
            high = None if hi is C.MAXREPEAT else int(hi)
            if body is None:
                return Epsilon() if lo == 0 else None
            if isinstance(body, Epsilon) or high == 0:
                return Epsilon()
            return body if (lo, high) == (1, 1) else Repeat(body, int(lo), high)
        if op is C.AT and av in (C.AT_BEGINNING, C.AT_END):
            return Epsilon()  # xgrammar ignores '^' and '$' anywhere (0.2.8: a warning, then a match without them)
        if op is C.AT:
            raise self.error(f"the anchor {_AT_NAMES.get(av, str(av))} (only '^' and '$' are read: "
                             "xgrammar ignores them)")
        if op in _REFUSED:
            raise self.error(_REFUSED[op])
        raise self.error(f"the regular-expression construct {op}")

    def char_set(self, items) -> Expr | None:
        negated = bool(items) and items[0][0] is C.NEGATE
        ranges: list[tuple[int, int]] = []
        for op, av in items[1:] if negated else items:
            if op is C.LITERAL:
                ranges.append((av, av))
            elif op is C.RANGE:
                ranges.append(av)
            elif op is C.CATEGORY:
                if av not in _CATEGORIES:
                    raise self.error(f"the class escape {av}")
                rs, neg = _CATEGORIES[av]
                ranges.extend(complement_ranges(rs) if neg else rs)
            else:
                raise self.error(f"the class item {op}")
        return self.codepoints(tuple(ranges), negated=negated)

    def codepoints(self, ranges, negated: bool = False, folded: bool = False) -> Expr | None:
        """One code point of ``ranges`` (case-folded, negated, minus the forbidden set)."""
        rs = normalize_ranges(ranges)
        if self.fold and not folded:
            rs = normalize_ranges(rs + _ascii_case_partners(rs))
        if negated:
            rs = complement_ranges(rs)
        if self.forbid:
            rs = _minus(rs, self.forbid)
        if not rs:
            return None
        if len(rs) == 1 and rs[0][0] == rs[0][1]:
            return Literal(chr(rs[0][0]))
        outside = complement_ranges(rs)
        if len(outside) <= len(rs):  # e.g. "anything but a quote": written as [^"]
            return CharClass(outside, negated=True)
        return CharClass(rs)

    def error(self, what: str) -> RegexMacroError:
        return RegexMacroError(f"{what} cannot be expressed in a grammar: gramopt refuses it")


_AT_NAMES = {C.AT_BEGINNING: "'^'", C.AT_END: "'$'", C.AT_BEGINNING_STRING: "'\\A'",
             C.AT_END_STRING: "'\\Z'", C.AT_BOUNDARY: "'\\b'", C.AT_NON_BOUNDARY: "'\\B'"}


def _ascii_case_partners(ranges) -> tuple[tuple[int, int], ...]:
    """The other-case ASCII letters of those in ``ranges`` (xgrammar FoldAsciiCaseRanges)."""
    out = []
    for lo, hi in ranges:
        a, b = max(lo, 0x61), min(hi, 0x7A)
        if a <= b:
            out.append((a - 0x20, b - 0x20))
        a, b = max(lo, 0x41), min(hi, 0x5A)
        if a <= b:
            out.append((a + 0x20, b + 0x20))
    return tuple(out)


def _minus(ranges, removed) -> tuple[tuple[int, int], ...]:
    keep = complement_ranges(normalize_ranges(removed))
    out = []
    for lo, hi in ranges:
        for a, b in keep:
            if a <= hi and lo <= b:
                out.append((max(a, lo), min(b, hi)))
    return normalize_ranges(out)

