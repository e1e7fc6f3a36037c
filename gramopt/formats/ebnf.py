"""GBNF (llama.cpp) and xgrammar EBNF: reader and writer.

    parse_ebnf(text, dialect="ebnf") -> Grammar     dialect "gbnf" or "ebnf"
    write_ebnf(grammar, dialect="ebnf") -> str
    with_root_start(grammar) -> Grammar             start rule renamed to ``root``

The two dialects share one syntax; xgrammar's EBNF is the superset::

    grammar  := rule*                       a rule name starts a line; the start rule is `root`
    rule     := NAME "::=" alts ["(=" alts ")"]       lookahead assertion: EBNF only
    alts     := seq ("|" seq)*              an empty seq is ε (llama.cpp's `a ::= | "x"`)
    seq      := postfix*
    postfix  := atom ("*" | "+" | "?" | "{" m "}" | "{" m ",}" | "{" m "," n "}")*
    atom     := STRING | CLASS | "." | NAME | "(" alts ")" | regex
    regex    := "Regex(" STRING ["," "json_string=" BOOL] ["," "flags=" STRING] ")"   EBNF only:
                xgrammar's macro, read into plain IR (``regex_macro.py``). A rule whose whole
                body is one macro (as xgrammar's JSON-schema converter writes them) also
                keeps its source (``Rule.native``): the passes leave such a rule as it is
                and the EBNF writer writes the macro back byte for byte, xgrammar's fast
                path (expanded into rules: 75 → 760 µs p95 on a UUID-pattern schema); GBNF
                writes the expansion. A macro inside a larger body is written expanded.

Differences, each following the dialect's own engine (llama.cpp ``src/llama-grammar.cpp``,
xgrammar ``cpp/grammar_parser.cc``):

    construct       gbnf (llama.cpp)                ebnf (xgrammar)
    -------------   ------------------------------  -------------------------------------
    rule names      [A-Za-z0-9_-]+                  also "." inside a name (``a.b``)
    \\x escape       exactly 2 hex digits            1 or more hex digits, greedy
    {m,-1}          error                           unbounded, as {m,}
    (= ...)         error                           lookahead assertion ending a rule

Escapes denote code points (a literal's language is their UTF-8 bytes): \\n \\r \\t \\\\ \\" \\'
\\[ \\] \\? \\/ \\a \\b \\f \\v \\e \\0 \\xN.. \\uNNNN \\UNNNNNNNN, and inside a class also
\\^ \\$ \\. \\* \\+ \\( \\) \\{ \\} \\| \\-. A bare ``.`` is any code point. ``""`` and ``()`` are ε.

The reader raises only ``GrammarError`` with a 1-based position and reads nesting of any depth
without recursion; a group or quantified item that would nest a rule body deeper than
``MAX_BODY_DEPTH`` (= ``MAX_PASS_DEPTH``) becomes a rule of its own, ``<rule>-N`` after its rule
(the same language), so every later stage walks bounded bodies and a body no deeper reads back
as written — llama.cpp's JSON-schema converter writes ``maxLength: 160`` as 155 nested
``(char (char ...)?)?``. It keeps rule order, each rule's comments (``Rule.comment``:
the comment lines above it and its inline comments) and the file's header comment block
(``Grammar.header``: the comments above the first rule when a blank line separates them).

The writer prints what llama.cpp, xgrammar 0.2.8 and llguidance 1.9.1 all load: ε as ``""``
(xgrammar rejects a bare empty alternative), ``\\xNN`` for control characters (a hex digit
right after one is escaped too, since xgrammar's ``\\x`` is greedy), ``\\uNNNN`` only from
U+1000 up (llguidance drops leading zeros of \\u and \\U escapes and then fails), and raw
UTF-8 for everything else, so it never prints ``\\U``, ``\\0``, ``\\[`` in a string or ``\\-``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Iterable

from .regex_macro import RegexMacroError, regex_to_expr
from ..grammar import (MAX_PASS_DEPTH, depth, Alt, CharClass, Epsilon, Expr, Grammar, GrammarError, Literal, Native, Ref, Regex,
                       Repeat, Rule, Seq, SourcePos, Terminal, alt, rename_refs, seq, transform, walk)
from ..grammar.tag_dispatch import TagDispatch, lower_tag_dispatch

DIALECTS = ("gbnf", "ebnf")
START = "root"
MAX_NESTING = 100  # goebnf: brackets inside one production; deeper input is rejected, never a RecursionError
MAX_DEPTH = 200  # expression depth of one rule read (goebnf; here only a macro's expansion can reach it)
MAX_BODY_DEPTH = MAX_PASS_DEPTH  # a rule body read nests no deeper: deeper groups become rules (_Parser.lift)
MAX_BOUND = 2**31 - 1  # xgrammar stores repetition bounds as int32

_NAMES = {"gbnf": "GBNF", "ebnf": "xgrammar EBNF"}
# xgrammar turns these identifiers into macros or booleans; a rule cannot be called so there.
_XGRAMMAR_RESERVED = frozenset({"TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch",
                                "Regex", "Substring", "true", "false"})

_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "[": "[",
                   "]": "]", "?": "?", "/": "/", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                   "e": "\x1b", "0": "\0"}
_CLASS_ESCAPES = frozenset("^$.*+(){}|-")
_HEX = frozenset("0123456789abcdefABCDEF")
_NAME_CHARS = {"gbnf": frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")}
_NAME_CHARS["ebnf"] = _NAME_CHARS["gbnf"] | {"."}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACE = re.compile(r"[ \t\r\n]+")
_PLAIN = re.compile(r'[^"\\\r\n]+')  # a run of string characters that need no care
_CLASS_TEXT = re.compile(r"\[(?:[^\]\\\r\n]|\\[^\r\n])*\]")
_MACRO_ARG_NAME = re.compile(r"([A-Za-z_]+)[ \t]*=")
_NAME_RE = {"gbnf": re.compile(r"[A-Za-z0-9_-]*"), "ebnf": re.compile(r"[A-Za-z0-9_.-]*")}


# ================================================================ source text


class Source:
    """Text with 1-based (line, column) lookup; lines end at \\n, \\r\\n or \\r."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]

    def line(self, i: int) -> int:
        return bisect.bisect_right(self.starts, i)

    def pos(self, i: int) -> SourcePos:
        line = self.line(i)
        return SourcePos(line, i - self.starts[line - 1] + 1)

    def error(self, message: str, i: int) -> GrammarError:
        return GrammarError(message, self.pos(min(i, len(self.text))))


@dataclass(frozen=True, slots=True)
class Comment:
    line: int
    text: str  # without the comment marker and one following space
    inline: bool  # a token precedes it on its line


def comment_text(raw: str) -> str:
    """``# note`` → ``note``: the marker, one space after it and trailing blanks removed."""
    body = raw[1:] if raw.startswith("#") else raw[2:] if raw.startswith("//") else raw
    return (body[1:] if body.startswith(" ") else body).rstrip()


def attach_comments(comments: list[Comment], spans: list[tuple[int, int]]) -> tuple[str, list[str]]:
    """Distribute comments over rules whose source lines are ``spans`` (first, last).

    A comment inside a rule's span, or after the previous rule and before this one, belongs
    to the rule (comments after the last rule go to the last rule). Comments above the first
    rule are the file's header, except for the block directly above it (no blank line
    between), which is the first rule's own. Returns (header, per-rule comment texts).
    """
    per_rule: list[list[str]] = [[] for _ in spans]
    header: list[str] = []
    before_first: list[Comment] = []
    firsts = [s[0] for s in spans]
    for c in comments:
        if not spans:
            header.append(c.text)
            continue
        k = bisect.bisect_right(firsts, c.line) - 1  # last rule starting at or before the line
        if k < 0:
            before_first.append(c)
        elif c.line <= spans[k][1] or k == len(spans) - 1:
            per_rule[k].append(c.text)
        else:
            per_rule[k + 1].append(c.text)
    own = len(before_first)
    expected = firsts[0] - 1 if spans else 0
    while own > 0 and before_first[own - 1].line == expected:
        own -= 1
        expected -= 1
    header.extend(c.text for c in before_first[:own])
    if spans:
        per_rule[0][:0] = [c.text for c in before_first[own:]]
    return "\n".join(header), ["\n".join(lines) for lines in per_rule]


# ================================================================ tokens


@dataclass(frozen=True, slots=True)
class Token:
    """kind: name ::= string class dot ( (= ) | * + ? {} expr eof. ``value``: the name, the
    literal text, the CharClass, the (min, max) bounds or (expr: a Regex macro) its Expr.
    ``at``: offset in the source."""

    kind: str
    value: object
    at: int
    first_on_line: bool


class _Lexer:
    def __init__(self, src: Source, dialect: str):
        self.src, self.text, self.dialect = src, src.text, dialect
        self.name_chars = _NAME_CHARS[dialect]
        self.name_re = _NAME_RE[dialect]
        self.classes: dict[str, CharClass] = {}
        self.tokens: list[Token] = []
        self.comments: list[Comment] = []
        self.last_line = 0
        self.macros: dict[int, str] = {}  # offset of a Regex(...) token -> its source text

    def run(self) -> tuple[list[Token], list[Comment]]:
        text, n, i = self.text, len(self.text), 0
        while i < n:
            c = text[i]
            if c in " \t\r\n":
                i = _SPACE.match(text, i).end()
            elif c == "#":
                j = i
                while j < n and text[j] not in "\r\n":
                    j += 1
                line = self.src.line(i)
                self.comments.append(Comment(line, comment_text(text[i:j]), line == self.last_line))
                i = j
            elif text.startswith("::=", i):
                i = self.emit("::=", None, i, i + 3)
            elif c == '"':
                i = self.string(i)
            elif c == "[":
                i = self.char_class(i)
            elif c == "{":
                i = self.bounds(i)
            elif c == "(":
                i = self.emit("(=", None, i, i + 2) if text.startswith("(=", i) else self.emit("(", None, i, i + 1)
            elif c in ")|*+?":
                i = self.emit(c, None, i, i + 1)
            elif c in self.name_chars or c == ".":
                j = max(self.name_re.match(text, i).end(), i + 1)
                word = text[i:j]
                if self.dialect == "ebnf" and word == "Regex" and text[j:].lstrip(" \t").startswith("("):
                    i = self.regex_macro(i, j)
                    continue
                if self.dialect == "ebnf" and word in _XGRAMMAR_RESERVED and text[j:].lstrip(" \t").startswith("("):
                    if word == "TagDispatch":
                        i = self.tag_dispatch(i, j)
                        continue
                    raise self.src.error(f"xgrammar's macro {word}(...) is not supported by gramopt", i)
                i = self.emit("dot", None, i, j) if word == "." else self.emit("name", word, i, j)
            else:
                raise self.src.error(f"unexpected character {_show_char(c)}", i)
        self.emit("eof", None, n, n)
        return self.tokens, self.comments

    def emit(self, kind: str, value: object, start: int, end: int) -> int:
        line = self.src.line(start)
        self.tokens.append(Token(kind, value, start, line != self.last_line))
        self.last_line = line
        return end

    # ------------------------------------------------------------ macros
    def regex_macro(self, start: int, i: int) -> int:
        """``Regex("pattern" [, json_string=true|false] [, flags="isu"])`` as one "expr"
        token holding the pattern's language in the IR (see ``regex_macro.py``)."""
        text = self.text
        i = self.skip_blanks(i) + 1  # past '('
        args: list[tuple[str | None, object, int]] = []  # (name or None, value, offset)
        while True:
            i = self.skip_blanks(i)
            if text.startswith(")", i):
                break
            if args:
                if not text.startswith(",", i):
                    raise self.src.error("expected ',' or ')' in the Regex(...) arguments", i)
                i = self.skip_blanks(i + 1)
            name = None
            m = _MACRO_ARG_NAME.match(text, i)
            if m:
                name, i = m.group(1), self.skip_blanks(m.end())
            if text.startswith('"', i):
                i = self.string(i)
                value: object = self.tokens.pop().value
            elif text.startswith(("true", "false"), i):
                value = text.startswith("true", i)
                i += 4 if value else 5
            else:
                raise self.src.error("expected a string, true or false in the Regex(...) arguments", i)
            args.append((name, value, i))
        end = i + 1
        positional = [a for a in args if a[0] is None]
        named = {a[0]: a for a in args if a[0] is not None}
        if len(positional) != 1 or not isinstance(positional[0][1], str) or args[0][0] is not None:
            raise self.src.error("Regex expects exactly one string argument, the pattern, first", start)
        unknown = sorted(set(named) - {"json_string", "flags"})
        if unknown:
            raise self.src.error(f"Regex does not support the named argument '{unknown[0]}'", start)
        json_string = named.get("json_string", (None, False, 0))[1]
        flags = named.get("flags", (None, None, 0))[1]
        if not isinstance(json_string, bool):
            raise self.src.error("json_string must be a boolean", start)
        if flags is not None and not isinstance(flags, str):
            raise self.src.error("flags must be a string", start)
        pattern = str(positional[0][1])
        try:
            expr = regex_to_expr(pattern, json_string=json_string, flags=flags)
        except RegexMacroError as e:
            at = text.index('"', start)  # the pattern's opening quote
            raw = text[at + 1:at + 1 + len(pattern)]
            exact = e.offset is not None and raw == pattern  # the column is exact when unescaped
            col = at + 1 + e.offset if exact else at
            raise self.src.error(f"in Regex({_show_pattern(pattern)}): {e}", col) from None
        self.macros[start] = text[start:end]
        return self.emit("expr", expr, start, end)

    def skip_blanks(self, i: int) -> int:
        m = _SPACE.match(self.text, i)
        return m.end() if m else i

    # ------------------------------------------------------------ literals
    def string(self, start: int) -> int:
        text, n, i = self.text, len(self.text), start + 1
        out: list[str] = []
        while True:
            if i >= n or text[i] in "\r\n":
                raise self.src.error("unterminated string: missing closing '\"' on this line", start)
            c = text[i]
            if c == '"':
                break
            if c == "\\":
                cp, i = self.escape(i, in_class=False)
                out.append(chr(cp))
            else:
                j = _PLAIN.match(text, i).end()
                out.append(text[i:j])
                i = j
        value = "".join(out)
        surrogate = _SURROGATE.search(value)
        if surrogate:
            raise self.src.error(f"surrogate code point U+{ord(surrogate.group()):04X} in a string "
                                 "has no UTF-8 encoding", start)
        return self.emit("string", value, start, i + 1)

    def char_class(self, start: int) -> int:
        m = _CLASS_TEXT.match(self.text, start)
        if m and m.group() in self.classes:  # generated grammars repeat a few classes often
            return self.emit("class", self.classes[m.group()], start, m.end())
        end = self.parse_class(start)
        self.classes[self.text[start:end]] = self.tokens[-1].value
        return end

    def parse_class(self, start: int) -> int:
        text, n, i = self.text, len(self.text), start + 1
        negated = i < n and text[i] == "^"
        i += negated
        items: list[tuple[int, int, bool]] = []  # (code point, offset, is an unescaped '-')
        while True:
            if i >= n or text[i] in "\r\n":
                raise self.src.error("unterminated character class: missing ']' on this line", start)
            c = text[i]
            if c == "]":
                break
            if c == "\\":
                cp, j = self.escape(i, in_class=True)
                items.append((cp, i, False))
                i = j
            else:
                items.append((ord(c), i, c == "-"))
                i += 1
        ranges: list[tuple[int, int]] = []
        k = 0
        while k < len(items):
            lo, at, _ = items[k]
            if k + 2 < len(items) and items[k + 1][2]:
                hi = items[k + 2][0]
                if lo > hi:
                    raise self.src.error(f"character range {_show_cp(lo)}-{_show_cp(hi)} is reversed: "
                                         f"U+{lo:04X} > U+{hi:04X}", at)
                ranges.append((lo, hi))
                k += 3
            else:
                ranges.append((lo, lo))
                k += 1
        if negated and ranges == [(0, 0x10FFFF)]:
            # the writer's GBNF spelling of the empty class (llama.cpp breaks on '[]'):
            # read back as the empty class it stands for, so written grammars round-trip
            negated, ranges = False, []
        return self.emit("class", CharClass(tuple(ranges), negated), start, i + 1)

    def escape(self, i: int, in_class: bool) -> tuple[int, int]:
        """The code point of the escape at ``text[i] == '\\'`` and the offset after it."""
        text, n = self.text, len(self.text)
        e = text[i + 1] if i + 1 < n else ""
        if e in ("x", "u", "U"):
            j = i + 2
            while j < n and text[j] in _HEX and (e != "x" or self.dialect == "ebnf" or j < i + 4):
                j += 1
            want = {"x": 2 if self.dialect == "gbnf" else 1, "u": 4, "U": 8}[e]
            digits = text[i + 2:j][:want] if e != "x" else text[i + 2:j]
            if len(digits) < want:
                need = "2" if e == "x" and self.dialect == "gbnf" else "1 or more" if e == "x" else str(want)
                raise self.src.error(f"bad escape '\\{e}{digits}': expected {need} hex digits", i)
            if len(digits) > 8 or int(digits, 16) > 0x10FFFF:
                raise self.src.error(f"escape '\\{e}{digits}' is beyond U+10FFFF", i)
            return int(digits, 16), i + 2 + len(digits)
        if e in _SIMPLE_ESCAPES:
            return ord(_SIMPLE_ESCAPES[e]), i + 2
        if in_class and e in _CLASS_ESCAPES:
            return ord(e), i + 2
        if in_class and e in "dDsSwW":
            raise self.src.error(f"class escape '\\{e}' is not supported: list the characters", i)
        if not e or e in "\r\n":
            raise self.src.error("unterminated escape at the end of the line", i)
        raise self.src.error(f"bad escape '\\{e}'", i)

    # ------------------------------------------------------------ macros
    def tag_dispatch(self, start: int, i: int) -> int:
        """``TagDispatch(("trigger", rule), ..., loop_after_dispatch=true, excludes=("s", ...))``
        (xgrammar 0.2.8's arguments; it may span lines) as one token whose value is
        ``(TagDispatch, [(rule name, offset), ...])``; lowered by the parser."""
        text, n = self.text, len(self.text)

        def skip(k: int) -> int:
            while k < n and text[k] in " \t\r\n":
                k += 1
            return k

        def expect(k: int, c: str, what: str) -> int:
            k = skip(k)
            if not text.startswith(c, k):
                got = _show_char(text[k]) if k < n else "end of input"
                raise self.src.error(f"TagDispatch: expected {what}, got {got}", k)
            return k + 1

        def string(k: int) -> tuple[str, int]:
            k = skip(k)
            if k >= n or text[k] != '"':
                raise self.src.error("TagDispatch: expected a string", k)
            end = self.string(k)
            return str(self.tokens.pop().value), end

        def name(k: int) -> tuple[str, int]:
            k = skip(k)
            j = self.name_re.match(text, k).end()
            if j == k:
                raise self.src.error("TagDispatch: expected a name", k)
            return text[k:j], j

        tags: list[tuple[str, str]] = []
        refs: list[tuple[str, int]] = []
        loop, excludes = True, ()
        k = expect(i, "(", "'('")
        while True:
            k = skip(k)
            if text.startswith(")", k):
                k += 1
                break
            if text.startswith("(", k):
                trigger, k = string(k + 1)
                k = expect(k, ",", "',' after the trigger")
                at = skip(k)
                rule, k = name(k)
                refs.append((rule, at))
                k = expect(k, ")", "')' after the rule name")
                tags.append((trigger, rule))
            else:
                at = k
                key, k = name(k)
                k = expect(k, "=", f"'=' after '{key}'")
                if key == "loop_after_dispatch":
                    value, k = name(k)
                    if value not in ("true", "false"):
                        raise self.src.error("TagDispatch: loop_after_dispatch is true or false", skip(k) - len(value))
                    loop = value == "true"
                elif key == "excludes":
                    k = expect(k, "(", "'(' after 'excludes='")
                    items: list[str] = []
                    while not text.startswith(")", skip(k)):
                        s, k = string(k)
                        items.append(s)
                        if text.startswith(",", skip(k)):
                            k = skip(k) + 1
                    k = skip(k) + 1
                    excludes = tuple(items)
                else:
                    raise self.src.error(f"TagDispatch argument '{key}' is not supported (xgrammar 0.2.8 "
                                         "takes loop_after_dispatch and excludes)", at)
            k = skip(k)
            if text.startswith(",", k):
                k += 1
            elif not text.startswith(")", k):
                got = _show_char(text[k]) if k < n else "end of input"
                raise self.src.error(f"TagDispatch: expected ',' or ')', got {got}", k)
        td = TagDispatch(tuple(tags), loop, excludes)
        why = td.problem()
        if why:
            raise self.src.error(why, start)
        self.emit("tagdispatch", (td, refs), start, k)
        self.last_line = self.src.line(k - 1)
        return k

    def bounds(self, start: int) -> int:
        """``{m}``, ``{m,}``, ``{m,n}`` and (EBNF) ``{m,-1}``, spaces allowed inside."""
        text, n = self.text, len(self.text)

        def skip(i: int) -> int:
            while i < n and text[i] in " \t\r\n":
                i += 1
            return i

        def number(i: int) -> tuple[int, int]:
            j = i
            while j < n and text[j].isascii() and text[j].isdigit():
                j += 1
            if j == i:
                got = _show_char(text[i]) if i < n else "end of input"
                raise self.src.error(f"bad repetition bounds: expected a number, got {got}", i)
            if j - i > 10 or int(text[i:j]) > MAX_BOUND:
                raise self.src.error(f"repetition bound {text[i:j]} is too large (at most {MAX_BOUND})", i)
            return int(text[i:j]), j

        lo, i = number(skip(start + 1))
        i = skip(i)
        hi: int | None = lo
        if i < n and text[i] == ",":
            i = skip(i + 1)
            if text.startswith("-1", i) and not (i + 2 < n and text[i + 2].isdigit()):
                if self.dialect == "gbnf":
                    raise self.src.error("'{m,-1}' is xgrammar EBNF; GBNF writes an unbounded "
                                         "repetition as '{m,}'", i)
                hi, i = None, skip(i + 2)
            elif i < n and text[i] == "}":
                hi = None
            else:
                hi, i = number(i)
                i = skip(i)
        if i >= n or text[i] != "}":
            got = _show_char(text[i]) if i < n else "end of input"
            raise self.src.error(f"bad repetition bounds: expected ',' or '}}', got {got}", i)
        if hi is not None and hi < lo:
            raise self.src.error(f"bad repetition bounds {{{lo},{hi}}}: the upper bound is below "
                                 "the lower bound", start)
        return self.emit("{}", (lo, hi), start, i + 1)


def _show_pattern(pattern: str) -> str:
    return '"' + (pattern if len(pattern) <= 40 else pattern[:37] + "...") + '"'


def _show_char(c: str) -> str:
    return f"'{c}'" if c.isprintable() and c != "'" else f"U+{ord(c):04X}"


def _show_cp(cp: int) -> str:
    printable = not 0xD800 <= cp <= 0xDFFF and chr(cp).isprintable()
    return chr(cp) if printable else f"U+{cp:04X}"


# ================================================================ parser


class _Parser:
    """Recursive descent over the token list; nesting is bounded by MAX_NESTING."""

    def __init__(self, src: Source, tokens: list[Token], dialect: str, macros: dict[int, str] | None = None):
        self.src, self.toks, self.dialect = src, tokens, dialect
        self.macros = macros or {}
        self.k = 0
        self.refs: list[tuple[str, int]] = []  # (name, offset) of every reference, in order
        self.dispatches: list[tuple[str, str, TagDispatch]] = []  # (rule, placeholder, macro)
        self.lifted: list[tuple[str, str, Expr, SourcePos]] = []  # (rule, placeholder, body, where)
        self.rule_name = ""

    @property
    def tok(self) -> Token:
        return self.toks[self.k]

    def error(self, message: str, tok: Token | None = None) -> GrammarError:
        return self.src.error(message, (tok or self.tok).at)

    def at_rule_start(self) -> bool:
        return self.tok.kind == "name" and self.toks[self.k + 1].kind == "::="

    def rule(self) -> tuple[Rule, int, int]:
        """One rule; returns it with the offsets of its name and of its last token."""
        name = self.tok
        if name.kind != "name":
            raise self.error(f"expected a rule name, got {self.describe()}")
        if self.toks[self.k + 1].kind != "::=":
            self.k += 1
            raise self.error(f"expected '::=' after the rule name '{name.value}', got {self.describe()}")
        if not name.first_on_line:
            raise self.error(f"rule '{name.value}' must start on a new line", name)
        self.k += 2
        self.rule_name = str(name.value)
        first = self.tok
        body = self.alternatives(0)
        whole_macro = first.kind == "expr" and self.toks[self.k - 1] is first and first.at in self.macros
        lookahead = None
        if self.tok.kind == "(=":
            lookahead = self.lookahead()
        if not (self.tok.kind == "eof" or self.at_rule_start()):
            if self.tok.kind == ")":
                raise self.error("unmatched ')'")
            raise self.error(f"a lookahead assertion must end the rule, got {self.describe()}")
        native = Native(self.macros[first.at], body) if whole_macro else None
        rule = Rule(str(name.value), body, lookahead, pos=self.src.pos(name.at), native=native)
        if _depth(body) > MAX_DEPTH or (lookahead is not None and _depth(lookahead) > MAX_DEPTH):
            raise self.error(f"rule '{name.value}' is nested more than {MAX_DEPTH} levels deep", name)
        return rule, name.at, self.toks[self.k - 1].at

    def lookahead(self) -> Expr:
        open_ = self.tok
        if self.dialect == "gbnf":
            raise self.error("lookahead assertions '(= ...)' are xgrammar EBNF, not GBNF: "
                             "read the grammar as 'ebnf'")
        self.k += 1
        if self.tok.kind == ")":
            raise self.error("empty lookahead assertion '(= )'")
        expr = self.alternatives(1)
        self.close(open_)
        return expr

    def close(self, open_: Token) -> None:
        if self.tok.kind != ")":
            where = self.src.pos(open_.at)
            raise self.error(f"expected ')' to close the '(' at line {where.line}, column "
                             f"{where.col}, got {self.describe()}")
        self.k += 1

    def alternatives(self, level: int) -> Expr:
        """``alts`` up to the token that ends it (``|``-separated sequences; ``level`` 0 is a
        rule body, which a lookahead ``(=`` also ends, 1 a lookahead's inside). Read without
        recursion: ``open_`` holds the groups ``(`` opened and not yet closed, so nesting
        costs a list entry, not a Python frame. No expression read is deeper than
        ``MAX_BODY_DEPTH``: what would be is lifted into a rule of its own (``lift``), and
        an expression no deeper is read as it is (so a grammar gramopt wrote reads back
        equal)."""
        open_: list[_Group] = [_Group(None)]
        while True:
            group, kind = open_[-1], self.tok.kind
            if kind == "(":
                open_.append(_Group(self.tok))
                self.k += 1
            elif kind == "|":
                group.end_alternative()
                self.k += 1
            elif kind in (("|", ")", "(=", "eof") if level + len(open_) == 1 else ("|", ")", "eof")) \
                    or self.at_rule_start():
                if len(open_) == 1:
                    return group.close(self.lift)[0]
                self.close(group.open)
                open_.pop()
                open_[-1].add(*self.postfix(*group.close(self.lift), group.open))
            else:
                tok = self.tok
                expr = self.atom()
                macro = tok.kind == "expr"  # a macro's expansion, kept whole unless quantified (Rule.native)
                lifts = not macro or self.tok.kind in _QUANTIFIERS
                open_[-1].add(*self.postfix(expr, _depth(expr) if macro else 1, tok), lifts=lifts)

    def postfix(self, expr: Expr, d: int, at: Token) -> tuple[Expr, int, Token]:
        """``expr`` (``d`` deep, read at ``at``) with the quantifiers that follow it, its
        depth and ``at``; the item of a quantifier that would nest deeper than
        ``MAX_BODY_DEPTH`` is lifted first."""
        while self.tok.kind in _QUANTIFIERS:
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(self.tok.kind) or self.tok.value
            if d >= MAX_BODY_DEPTH:
                expr, d = self.lift(expr, at), 1
            expr, d = Repeat(expr, lo, hi), d + 1
            self.k += 1
        return expr, d, at

    def lift(self, expr: Expr, at: Token) -> Ref:
        """A reference to a new rule whose body is ``expr`` (the same language: a rule means
        its body), named after the rule being read once every name is known
        (``place_lifted``)."""
        placeholder = f"{self.rule_name}\0nest\0{len(self.lifted)}"
        self.lifted.append((self.rule_name, placeholder, expr, self.src.pos(at.at)))
        return Ref(placeholder)

    def atom(self) -> Expr:
        tok = self.tok
        if tok.kind == "string":
            self.k += 1
            return Literal(tok.value) if tok.value else Epsilon()
        if tok.kind in ("class", "expr"):
            self.k += 1
            return tok.value
        if tok.kind == "dot":
            self.k += 1
            return CharClass((), negated=True)
        if tok.kind == "name":
            self.refs.append((str(tok.value), tok.at))
            self.k += 1
            return Ref(str(tok.value))
        if tok.kind == "tagdispatch":
            td, refs = tok.value
            self.refs.extend(refs)
            self.k += 1
            placeholder = f"{self.rule_name}\0tag_dispatch\0{len(self.dispatches)}"
            self.dispatches.append((self.rule_name, placeholder, td))
            return Ref(placeholder)
        if tok.kind == "(=":
            raise self.error("a lookahead assertion '(= ...)' may only end a rule body")
        if tok.kind in ("*", "+", "?", "{}"):
            raise self.error(f"repetition {self.describe()} must follow an element")
        raise self.error(f"expected an element, got {self.describe()}")

    def describe(self) -> str:
        tok = self.tok
        if tok.kind == "eof":
            return "end of input"
        if tok.kind == "name":
            return f"name '{tok.value}'"
        return {"string": "a string", "class": "a character class", "dot": "'.'", "expr": "a Regex(...)",
                "{}": "'{...}'"}.get(tok.kind, f"'{tok.kind}'")


_depth = depth


_QUANTIFIERS = ("*", "+", "?", "{}")


class _Group:
    """An open group while ``alternatives`` reads it: the ``(`` that opened it (None for
    the whole body), its finished alternatives and the items of the current one, each as
    (expression, depth, token read at, whether it may be lifted)."""

    __slots__ = ("open", "alts", "items")

    def __init__(self, open_: Token | None):
        self.open = open_
        self.alts: list[list[tuple[Expr, int, Token, bool]]] = []
        self.items: list[tuple[Expr, int, Token, bool]] = []

    def add(self, expr: Expr, d: int, at: Token, lifts: bool = True) -> None:
        self.items.append((expr, d, at, lifts))

    def end_alternative(self) -> None:
        self.alts.append(self.items)
        self.items = []

    def close(self, lift) -> tuple[Expr, int]:
        """The group's expression and depth. Deeper than ``MAX_BODY_DEPTH``: its items more
        than ``MAX_BODY_DEPTH - 2`` deep become ``lift(item, at)`` first (a sequence and an
        alternation may wrap them), which leaves it at most that deep."""
        self.end_alternative()
        joined = _joined(alt, Alt, [_joined(seq, Seq, [(e, d) for e, d, _, _ in items]) for items in self.alts])
        if joined[1] <= MAX_BODY_DEPTH:
            return joined
        alts = [[(lift(e, at), 1) if lifts and d > MAX_BODY_DEPTH - 2 else (e, d) for e, d, at, lifts in items]
                for items in self.alts]
        return _joined(alt, Alt, [_joined(seq, Seq, items) for items in alts])


def _joined(build, kind: type, pairs: list[tuple[Expr, int]]) -> tuple[Expr, int]:
    """``build(*exprs)`` (``seq`` or ``alt``, whose node is ``kind``) and its exact depth
    from the parts' depths: a part of the same kind is spliced (its items are one level
    less deep), ε is dropped from a sequence, a single part is returned as it is."""
    expr = build(*(e for e, _ in pairs))
    if not isinstance(expr, kind):  # ε, or one part unwrapped
        return expr, next((d for e, d in pairs if e is expr), 1)
    inner = max((d - 1 if isinstance(e, kind) else d) for e, d in pairs
                if not (kind is Seq and isinstance(e, Epsilon)))
    return expr, 1 + inner


def place_lifted(rules: list[Rule], lifted: list[tuple[str, str, Expr, SourcePos]]) -> list[Rule]:
    """``rules`` with each lifted group (``_Parser.lift``) as a rule of its own, named
    ``<rule>-N`` (the first N free, numbered from the outermost group) and placed after the
    rule it was read in; its placeholder references renamed. Same language: each
    placeholder stood for exactly that body."""
    taken = {r.name for r in rules}
    by_owner: dict[str, list[tuple[str, Expr, SourcePos]]] = {}
    for owner, ph, body, where in lifted:
        by_owner.setdefault(owner, []).append((ph, body, where))
    mapping: dict[str, str] = {}
    for owner, groups in by_owner.items():
        n = 0
        for ph, _, _ in reversed(groups):  # the outermost group was lifted last
            n += 1
            while f"{owner}-{n}" in taken:
                n += 1
            mapping[ph] = f"{owner}-{n}"
            taken.add(mapping[ph])
    out: list[Rule] = []
    for r in rules:
        out.append(replace(r, body=rename_refs(r.body, mapping),
                           lookahead=None if r.lookahead is None else rename_refs(r.lookahead, mapping)))
        out.extend(Rule(mapping[ph], rename_refs(body, mapping), pos=where)
                   for ph, body, where in reversed(by_owner.get(r.name, ())))
    return out


# ================================================================ reading


def parse_ebnf(text: str, dialect: str = "ebnf") -> Grammar:
    """Read GBNF (``dialect="gbnf"``) or xgrammar EBNF (``"ebnf"``). The start rule is
    ``root``. Raises GrammarError (with a position) on any malformed input."""
    if dialect not in DIALECTS:
        raise GrammarError(f"unknown dialect '{dialect}' for the GBNF/EBNF reader")
    src = Source(text)
    lexer = _Lexer(src, dialect)
    tokens, comments = lexer.run()
    parser = _Parser(src, tokens, dialect, lexer.macros)
    rules: list[Rule] = []
    spans: list[tuple[int, int]] = []
    while parser.tok.kind != "eof":
        rule, first, last = parser.rule()
        rules.append(rule)
        spans.append((src.line(first), src.line(last)))
    if not rules:
        raise src.error("empty grammar: no rules", 0)
    header, notes = attach_comments(comments, spans)
    rules = [replace(r, comment=c) for r, c in zip(rules, notes)]
    check_names(rules, parser.refs, src)
    if parser.lifted:
        rules = place_lifted(rules, parser.lifted)
    if parser.dispatches:
        rules = _lower_dispatches(rules, parser.dispatches)
    return Grammar(tuple(rules), START, dialect=dialect, header=header).check()


def _lower_dispatches(rules: list[Rule], dispatches) -> list[Rule]:
    """Replace each TagDispatch placeholder by plain rules (grammar/tag_dispatch.py). A rule
    whose whole body is the macro becomes its start state; a macro inside a larger body
    gets a rule of its own, ``<rule>_tag_dispatch[_N]``, placed after the rule."""
    taken = {r.name for r in rules}
    mapping: dict[str, str] = {}
    whole: dict[str, Rule] = {}
    by_rule: dict[str, list[tuple[str, TagDispatch]]] = {}
    for owner, ph, td in dispatches:
        r = next(r for r in rules if r.name == owner)
        if r.body == Ref(ph) and owner not in whole:
            mapping[ph] = owner
            whole[owner] = r
        else:
            base, n = f"{owner}_tag_dispatch", 1
            name = base
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            mapping[ph] = name
        by_rule.setdefault(owner, []).append((ph, td))
    for name in mapping.values():
        taken.add(name)
    out: list[Rule] = []
    for r in rules:
        body = rename_refs(r.body, mapping)
        extra: list[Rule] = []
        for ph, td in by_rule.get(r.name, ()):
            lowered = lower_tag_dispatch(mapping[ph], td, taken)
            taken.update(x.name for x in lowered)
            if mapping[ph] == r.name:
                body = lowered[0].body
                extra.extend(lowered[1:])
            else:
                extra.extend(lowered)
        out.append(replace(r, body=body))
        out.extend(extra)
    return out


def check_names(rules: list[Rule], refs: Iterable[tuple[str, int]], src: Source) -> None:
    """Duplicate rules (at the second definition), a missing ``root`` and undefined
    references (at the reference) as GrammarError."""
    seen: dict[str, Rule] = {}
    for r in rules:
        if r.name in seen:
            first = seen[r.name].pos
            raise GrammarError(f"duplicate rule '{r.name}' (first defined at line {first.line})", r.pos)
        seen[r.name] = r
    if START not in seen:
        raise GrammarError(f"no start rule: the grammar must define '{START}'", rules[0].pos)
    for name, at in refs:
        if name not in seen:
            raise src.error(f"undefined rule '{name}'", at)


# ================================================================ writing


def write_ebnf(grammar: Grammar, dialect: str = "ebnf", *, drop_lookahead: bool = False) -> str:
    """Print ``grammar`` as GBNF or xgrammar EBNF, one rule per line, start rule ``root``
    (renamed if needed, see ``with_root_start``), comments kept, minimal parentheses.

    Raises GrammarError for what the dialect cannot express: Lark terminals, regexps and
    directives; rule names outside the dialect's alphabet; lookahead assertions in GBNF
    (unless ``drop_lookahead=True``, which widens the language to what the rule matches
    without its assertion). Lark's tree-shaping rule flags, priorities and aliases do not
    change the language and are not printed.
    """
    if dialect not in DIALECTS:
        raise GrammarError(f"unknown dialect '{dialect}' for the GBNF/EBNF writer")
    what = _NAMES[dialect]
    if grammar.terminals:
        raise GrammarError(f"Lark terminal definitions (e.g. '{grammar.terminals[0].name}') cannot "
                           f"be written as {what}")
    if grammar.directives:
        raise GrammarError(f"directive %{grammar.directives[0].name} cannot be written as {what}")
    g = with_root_start(grammar)
    if dialect == "gbnf":
        g = with_llamacpp_names(g)
    lines = [*_comment_lines(g.header), ""] if g.header else []
    for r in g.rules:
        _check_rule_name(r.name, dialect)
        lines.extend(_comment_lines(r.comment))
        native = dialect == "ebnf" and r.native is not None and r.native.body == r.body
        text = f"{r.name} ::= {r.native.text if native else format_expr(r.body, dialect)}"
        if r.lookahead is not None:
            if dialect == "gbnf" and not drop_lookahead:
                raise GrammarError(f"rule '{r.name}' has a lookahead assertion, which GBNF cannot "
                                   "express: write xgrammar EBNF, or pass drop_lookahead=True", r.pos)
            if dialect == "ebnf":
                text += f" (= {format_expr(r.lookahead, dialect)})"
        lines.append(text)
    return "\n".join(lines) + "\n"


def with_root_start(grammar: Grammar) -> Grammar:
    """The grammar with its start rule named ``root``, the fixed start of GBNF and xgrammar
    EBNF: the start rule is renamed (references follow), and a different rule already
    called ``root`` becomes ``root_1`` (or the first free ``root_N``; ``root-N`` in GBNF,
    whose rule names llama.cpp reads without '_'). Same language."""
    if grammar.start == START:
        return grammar
    mapping = {grammar.start: START}
    if START in grammar:
        names = set(grammar.names)
        sep = "-" if grammar.dialect == "gbnf" else "_"  # llama.cpp's rule names have no '_'
        n = 1
        while f"{START}{sep}{n}" in names:
            n += 1
        mapping[START] = f"{START}{sep}{n}"
    return grammar.renamed(mapping)


_LLAMACPP_NAME_CHAR = re.compile(r"[^A-Za-z0-9-]")


def llamacpp_names(grammar: Grammar) -> dict[str, str]:
    """The renaming that puts every rule name in llama.cpp's GBNF alphabet (letters, digits,
    '-'; its parser stops a name at '_' or '.' and fails): each other character becomes '-',
    made fresh against every name of the grammar (``a_b`` beside ``a-b`` becomes ``a-b2``),
    in rule order. Empty when every name is already in the alphabet."""
    taken = set(grammar.names)
    mapping: dict[str, str] = {}
    for r in grammar.rules:
        if r.name not in mapping and _LLAMACPP_NAME_CHAR.search(r.name):
            base = _LLAMACPP_NAME_CHAR.sub("-", r.name) or "rule"
            new, k = base, 1
            while new in taken:
                k += 1
                new = f"{base}{k}"
            taken.add(new)
            mapping[r.name] = new
    return mapping


def with_llamacpp_names(grammar: Grammar) -> Grammar:
    """The grammar with the rule names llama.cpp reads (``llamacpp_names``); the GBNF writer
    applies it, so every GBNF output loads in llama.cpp."""
    return grammar.renamed(llamacpp_names(grammar))


def _comment_lines(comment: str) -> list[str]:
    return [f"# {line}" if line else "#" for line in _LINE_BREAK.split(comment)] if comment else []


_RULE_NAME = {"gbnf": re.compile(r"[A-Za-z0-9-]+"), "ebnf": re.compile(r"[A-Za-z_.-][A-Za-z0-9_.-]*")}


def _check_rule_name(name: str, dialect: str) -> None:
    if (not _RULE_NAME[dialect].fullmatch(name) or name == "."
            or (dialect == "ebnf" and name in _XGRAMMAR_RESERVED)):
        allowed = ("letters, digits and '-'" if dialect == "gbnf" else
                   "letters, digits, '_', '-' and '.', not starting with a digit, and not a "
                   "macro or boolean name")
        raise GrammarError(f"rule name '{name}' cannot be written as {_NAMES[dialect]} ({allowed})")


def format_expr(expr: Expr, dialect: str = "ebnf") -> str:
    """One expression in ``dialect`` syntax with minimal parentheses."""
    if dialect == "gbnf" and _may_nest(expr):
        if _nests_repeats(expr) or _nests_repeats(transform(expr, _same)):
            expr = transform(expr, _unnested)
    return _fmt(expr, 0, dialect)


def _nests_repeats(expr: Expr) -> bool:
    return any(isinstance(e, Repeat) and isinstance(e.item, Repeat) for e in walk(expr))


def _may_nest(expr: Expr) -> bool:
    """One walk: a repetition of a repetition, or a sequence the reader would flatten (a ``""``
    or a sequence among its items); without either, the body reads back with no nest."""
    if isinstance(expr, Repeat):
        return isinstance(expr.item, Repeat) or _may_nest(expr.item)
    if isinstance(expr, Seq):
        return any(isinstance(i, (Epsilon, Seq)) or _may_nest(i) for i in expr.items)
    if isinstance(expr, Alt):
        return any(_may_nest(i) for i in expr.items)
    return False


def _same(e: Expr) -> Expr:
    return e


def _unnested(e: Expr) -> Expr:
    """For ``transform``: a repetition of a repetition respelled (``_unnested_repeat``) until
    its operand is none. Run bottom-up over a body, with ``seq`` dropping each ``""`` that a
    respelling leaves, it gives a body the reader reads back with no such nest: the reader
    drops a ``""`` item of a group (``transform(e, _same)`` is what it reads), which could
    otherwise leave a one-item group around a repetition under a repetition."""
    while isinstance(e, Repeat) and isinstance(e.item, Repeat):
        e = _unnested_repeat(e)
    return e


# contexts: 0 = alternative, 1 = item of a sequence, 2 = operand of a repetition suffix
def _fmt(e: Expr, ctx: int, dialect: str) -> str:
    if isinstance(e, Alt):
        s = " | ".join(_fmt(i, 0, dialect) for i in e.items)
        return f"({s})" if ctx >= 1 else s
    if isinstance(e, Seq):
        s = " ".join(_fmt(i, 1, dialect) for i in e.items)
        return f"({s})" if ctx >= 2 else s
    if isinstance(e, Repeat):
        while dialect == "gbnf" and isinstance(e, Repeat) and isinstance(e.item, Repeat):
            e = _unnested_repeat(e)  # one level of nesting fewer each time
        if not isinstance(e, Repeat):
            return _fmt(e, ctx, dialect)
        s = _fmt(e.item, 2, dialect) + _suffix(e.min, e.max)
        return f"({s})" if ctx >= 2 else s  # "a"** is rejected by xgrammar and llguidance
    if isinstance(e, Epsilon):
        return '""'
    if isinstance(e, Literal):
        return '"' + _escape_units([ord(c) for c in e.text], "string") + '"'
    if isinstance(e, CharClass):
        return _fmt_class(e, dialect)
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, (Terminal, Regex)):
        what = f"terminal '{e.name}'" if isinstance(e, Terminal) else f"regexp /{e.pattern}/"
        raise GrammarError(f"Lark {what} cannot be written as {_NAMES[dialect]}")
    raise GrammarError(f"cannot be written as {_NAMES[dialect]}: {type(e).__name__}")


def _unnested_repeat(e: Repeat) -> Expr:
    """``(x{m,n}){a,b}`` spelled so that no repetition's operand is a group holding one
    repetition: llguidance's GBNF reader drops the parentheses of a one-item group and writes
    Lark's ``x{m,n}?``, a syntax error (every such pair of suffixes, llguidance 1.9.1,
    measured); llama.cpp reads both spellings. Same language: the nest denotes the union of
    ``x^k`` over the totals ``k`` of ``j`` counts in ``[m,n]``, ``a <= j <= b``, and ``x^k``
    depends on the total alone. When the totals form one interval it is one repetition of
    ``x`` (``_merged_counts``); otherwise ``m >= 1`` and the inner repetition is written
    ``x x{m-1,n-1}`` (the first copy split off), a two-item group the reader keeps; a
    repetition of what denotes only ``""`` is ``""``."""
    inner = e.item
    assert isinstance(inner, Repeat)
    if _only_empty(inner.item):  # ""^k = "" (and a split would leave a lone repetition)
        return Epsilon()
    merged = _merged_counts(inner.min, inner.max, e.min, e.max)
    if merged is not None:
        lo, hi = merged
        return inner.item if (lo, hi) == (1, 1) else Repeat(inner.item, lo, hi)
    rest = Repeat(inner.item, inner.min - 1, None if inner.max is None else inner.max - 1)
    first_split = Seq((inner.item, inner.item if (rest.min, rest.max) == (1, 1) else rest))
    return Repeat(first_split, e.min, e.max)


def _only_empty(e: Expr) -> bool:
    """``e`` denotes exactly the empty word: ``Epsilon``, or a repetition, sequence or choice
    of such (a repetition's count set is never empty, and ``""^k = ""``)."""
    if isinstance(e, Epsilon):
        return True
    if isinstance(e, Repeat):
        return _only_empty(e.item)
    if isinstance(e, (Seq, Alt)):
        return bool(e.items) and all(_only_empty(x) for x in e.items)
    return False


def _merged_counts(m: int, n: int | None, a: int, b: int | None) -> tuple[int, int | None] | None:
    """The totals of ``j`` counts in ``[m, n]`` with ``a <= j <= b`` as one interval
    ``(lo, hi)`` (``None`` = unbounded), or None when they leave a gap. They are the union of
    ``[j*m, j*n]``; with ``m = 0`` every total up to ``b*n`` is reached. With ``m >= 1`` the
    interval for ``j = 0`` is ``{0}`` and the next starts at ``m``, so ``a = 0`` needs
    ``m <= 1``; from ``j0 = max(a, 1)`` on, consecutive intervals touch iff
    ``(j+1)*m <= j*n + 1``, which is tightest at ``j0`` because ``n >= m``."""
    times = (lambda x, y: 0 if 0 in (x, y) else None if x is None or y is None else x * y)
    if m == 0 or b == 0:
        return (0, 0) if b == 0 else (0, times(b, n))
    if a == 0 and m > 1:
        return None
    j0 = max(a, 1)
    if n is not None and (b is None or b > j0) and (j0 + 1) * m > j0 * n + 1:
        return None
    return a * m, times(b, n)


def _suffix(lo: int, hi: int | None) -> str:
    if hi is None:
        return {0: "*", 1: "+"}.get(lo, f"{{{lo},}}")
    if (lo, hi) == (0, 1):
        return "?"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _fmt_class(cc: CharClass, dialect: str) -> str:
    if not cc.ranges:
        if cc.negated:  # any code point; xgrammar has no '.', llama.cpp breaks on '[^]'
            return "." if dialect == "gbnf" else "[^]"
        if dialect == "gbnf":  # no code point; llama.cpp breaks on '[]'
            return "[^\\x00-\U0010FFFF]"
        return "[]"
    cps: list[int] = []
    dash = False
    for lo, hi in cc.ranges:
        if lo == hi == 0x2D:
            dash = True  # a lone '-' goes last, where no engine reads it as a range
        else:
            cps.extend([lo] if lo == hi else [lo, hi] if hi == lo + 1 else [lo, -1, hi])
    # a leading '^' would negate the class: write it as \x5E
    body = _escape_units(cps, "class", hex_first=bool(cps) and cps[0] == 0x5E and not cc.negated)
    return ("[^" if cc.negated else "[") + body + ("-" if dash else "") + "]"


def _escape_units(cps: list[int], where: str, hex_first: bool = False) -> str:
    """Code points as text inside a string (``where="string"``) or a class (``-1`` = range
    dash). After an ``\\xNN`` escape a hex digit is escaped too (xgrammar reads ``\\x``
    greedily), so every engine reads the same code points back."""
    out: list[str] = []
    after_hex = False
    for cp in cps:
        if cp == -1:
            out.append("-")
            after_hex = False
            continue
        c = chr(cp)
        if (after_hex and c in _HEX) or (hex_first and not out):
            unit = f"\\x{cp:02X}"
        else:
            unit = _escape_char(cp, where)
        out.append(unit)
        after_hex = unit.startswith("\\x")
    return "".join(out)


def _escape_char(cp: int, where: str) -> str:
    c = chr(cp)
    if c == "\\" or c == ('"' if where == "string" else "]"):
        return "\\" + c
    if c == "-" and where == "class":
        return "\\x2D"  # a range end; only a lone '-' is printed raw, last in the class
    if c in "\t\n\r":
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}[c]
    if cp < 0x20 or 0x7F <= cp <= 0x9F:
        return f"\\x{cp:02X}"
    if 0xD800 <= cp <= 0xDFFF:
        return f"\\u{cp:04X}"
    if c.isprintable():
        return c
    if cp <= 0xFF:
        return f"\\x{cp:02X}"
    if 0x1000 <= cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return c  # raw UTF-8: llguidance cannot read \u0NNN or any \U escape
