"""Go EBNF (golang.org/x/exp/ebnf, as in ollama's x/grammar): reader.

    parse_goebnf(text) -> Grammar

    Production  = name "=" [ Expression ] "." .
    Expression  = Alternative { "|" Alternative } .
    Alternative = Term { Term } .
    Term        = name | token [ "…" token ] | "(" Expression ")" | "[" Expression "]"
                | "{" Expression "}" .

``[x]`` is ``x?``, ``{x}`` is ``x*``, ``"a" … "z"`` is the class ``[a-z]`` (both ends one
code point; ASCII ``...`` is read as ``…`` too). Tokens are Go string literals: ``"..."``
with Go escapes (``\\xNN`` and octal ``\\NNN`` are bytes, which must form UTF-8 together)
or raw ```...```; ``""`` is ε. Comments are ``//`` and ``/* */``.

The start rule is the first production. gramopt writes Go-EBNF grammars as xgrammar EBNF,
whose start rule is always ``root``, so the reader renames the first production to ``root``
(``with_root_start``: references follow, a later production already called ``root`` becomes
``root_1``); then ``parse_ebnf(write_ebnf(g))`` equals ``g``. ``Grammar.dialect`` is
``"goebnf"`` only as a record of where the grammar came from.
"""

from __future__ import annotations

from dataclasses import replace

from ..grammar import (CharClass, Epsilon, Expr, Grammar, GrammarError, Literal, Ref, Repeat, Rule,
                       alt, seq)
from .ebnf import (MAX_DEPTH, MAX_NESTING, Comment, Source, _depth, attach_comments, comment_text,
                   with_root_start)

_PUNCT = "=|()[]{}."
_GO_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}
_HEX = "0123456789abcdefABCDEF"


class _Lexer:
    """Tokens as (kind, value, offset): kind is "name", "string", "…", a punctuation
    character, or "eof"."""

    def __init__(self, src: Source):
        self.src, self.text = src, src.text
        self.tokens: list[tuple[str, object, int]] = []
        self.comments: list[Comment] = []
        self.last_line = 0

    def run(self):
        text, n, i = self.text, len(self.text), 0
        while i < n:
            c = text[i]
            if c in " \t\r\n":
                i += 1
            elif text.startswith("//", i) or text.startswith("/*", i):
                i = self.comment(i)
            elif c == '"':
                i = self.string(i)
            elif c == "`":
                j = text.find("`", i + 1)
                if j < 0:
                    raise self.src.error("unterminated raw string: missing closing '`'", i)
                i = self.emit("string", text[i + 1:j].replace("\r", ""), i, j + 1)
            elif c == "…":
                i = self.emit("…", None, i, i + 1)
            elif text.startswith("...", i):
                i = self.emit("…", None, i, i + 3)
            elif c in _PUNCT:
                i = self.emit(c, None, i, i + 1)
            elif c.isalpha() or c == "_":
                j = i + 1
                while j < n and (text[j].isalnum() or text[j] == "_"):
                    j += 1
                i = self.emit("name", text[i:j], i, j)
            else:
                shown = f"'{c}'" if c.isprintable() else f"U+{ord(c):04X}"
                raise self.src.error(f"unexpected character {shown}", i)
        self.emit("eof", None, n, n)
        return self.tokens, self.comments

    def emit(self, kind: str, value: object, start: int, end: int) -> int:
        self.tokens.append((kind, value, start))
        self.last_line = self.src.line(start)
        return end

    def comment(self, i: int) -> int:
        text = self.text
        if text.startswith("//", i):
            j = i
            while j < len(text) and text[j] not in "\r\n":
                j += 1
            body, end = text[i:j], j
        else:
            j = text.find("*/", i + 2)
            if j < 0:
                raise self.src.error("unterminated comment: missing '*/'", i)
            body, end = "//" + text[i + 2:j].strip(), j + 2
        line = self.src.line(i)
        for k, part in enumerate(body.splitlines() or [""]):
            self.comments.append(Comment(line + k, comment_text(part if k == 0 else "//" + part),
                                         line == self.last_line and k == 0))
        return end

    def string(self, start: int) -> int:
        text, n, i = self.text, len(self.text), start + 1
        out = bytearray()
        while True:
            if i >= n or text[i] in "\r\n":
                raise self.src.error("unterminated string: missing closing '\"' on this line", start)
            c = text[i]
            if c == '"':
                break
            if c != "\\":
                out += c.encode("utf-8", "surrogatepass")
                i += 1
                continue
            e = text[i + 1] if i + 1 < n else ""
            if e in _GO_ESCAPES:
                out.append(_GO_ESCAPES[e])
                i += 2
            elif e in ("x", "u", "U"):
                width = {"x": 2, "u": 4, "U": 8}[e]
                digits = text[i + 2:i + 2 + width]
                if len(digits) < width or any(d not in _HEX for d in digits):
                    raise self.src.error(f"bad escape '\\{e}{digits}': expected {width} hex digits", i)
                value = int(digits, 16)
                if e == "x":
                    out.append(value)
                elif value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                    raise self.src.error(f"escape '\\{e}{digits}' is not a valid code point", i)
                else:
                    out += chr(value).encode("utf-8")
                i += 2 + width
            elif e in "01234567" and e:
                digits = text[i + 1:i + 4]
                if len(digits) < 3 or any(d not in "01234567" for d in digits) or int(digits, 8) > 255:
                    raise self.src.error(f"bad octal escape '\\{digits}': expected 3 octal digits "
                                         "up to \\377", i)
                out.append(int(digits, 8))
                i += 4
            else:
                raise self.src.error(f"bad escape '\\{e}'" if e and e not in "\r\n" else
                                     "unterminated escape at the end of the line", i)
        try:
            value = out.decode("utf-8")
        except UnicodeDecodeError:
            raise self.src.error("string is not valid UTF-8 after its escapes", start) from None
        return self.emit("string", value, start, i + 1)


class _Parser:
    def __init__(self, src: Source, tokens):
        self.src, self.toks, self.k = src, tokens, 0
        self.refs: list[tuple[str, int]] = []

    @property
    def kind(self) -> str:
        return self.toks[self.k][0]

    def error(self, message: str, at: int | None = None):
        return self.src.error(message, self.toks[self.k][2] if at is None else at)

    def describe(self) -> str:
        kind, value, _ = self.toks[self.k]
        return {"eof": "end of input", "name": f"name '{value}'", "string": "a string"}.get(kind, f"'{kind}'")

    def expect(self, kind: str, what: str) -> None:
        if self.kind != kind:
            raise self.error(f"expected {what}, got {self.describe()}")
        self.k += 1

    def production(self) -> tuple[Rule, int, int]:
        kind, name, at = self.toks[self.k]
        if kind != "name":
            raise self.error(f"expected a production name, got {self.describe()}")
        self.k += 1
        self.expect("=", f"'=' after the production name '{name}'")
        body: Expr = Epsilon() if self.kind == "." else self.expression(0)
        if self.kind == "name" and self.toks[self.k + 1][0] == "=":
            raise self.error(f"missing '.' at the end of production '{name}'")
        self.expect(".", f"'.' at the end of production '{name}'")
        if _depth(body) > MAX_DEPTH:
            raise self.error(f"production '{name}' is nested more than {MAX_DEPTH} levels deep", at)
        return Rule(name, body, pos=self.src.pos(at)), at, self.toks[self.k - 1][2]

    def expression(self, depth: int) -> Expr:
        items = [self.alternative(depth)]
        while self.kind == "|":
            self.k += 1
            items.append(self.alternative(depth))
        return alt(*items)

    def alternative(self, depth: int) -> Expr:
        items = []
        while self.kind in ("name", "string", "(", "[", "{"):
            if self.kind == "name" and self.toks[self.k + 1][0] == "=":
                break  # the next production: this one lacks its '.'
            items.append(self.term(depth))
        if not items:
            raise self.error(f"expected a term, got {self.describe()}")
        return seq(*items)

    def term(self, depth: int) -> Expr:
        kind, value, at = self.toks[self.k]
        self.k += 1
        if kind == "name":
            self.refs.append((value, at))
            return Ref(value)
        if kind == "string":
            if self.kind == "…":
                self.k += 1
                kind2, hi, at2 = self.toks[self.k]
                if kind2 != "string":
                    raise self.error(f"expected a string after '…', got {self.describe()}")
                self.k += 1
                for s, where in ((value, at), (hi, at2)):
                    if len(s) != 1:
                        raise self.error("a range 'a' … 'z' needs single characters at both ends", where)
                if value > hi:
                    raise self.error(f"character range is reversed: U+{ord(value):04X} > U+{ord(hi):04X}", at)
                return CharClass(((ord(value), ord(hi)),))
            return Literal(value) if value else Epsilon()
        close = {"(": ")", "[": "]", "{": "}"}[kind]
        if depth >= MAX_NESTING:
            raise self.error(f"brackets nested more than {MAX_NESTING} levels deep", at)
        inner = self.expression(depth + 1)
        pos = self.src.pos(at)
        self.expect(close, f"'{close}' to close the '{kind}' at line {pos.line}, column {pos.col}")
        if kind == "[":
            return Repeat(inner, 0, 1)
        if kind == "{":
            return Repeat(inner, 0, None)
        return inner


def parse_goebnf(text: str) -> Grammar:
    """Read Go EBNF; the first production is the start rule, renamed ``root`` (see the
    module docstring). Raises GrammarError (with a position) on any malformed input."""
    src = Source(text)
    tokens, comments = _Lexer(src).run()
    parser = _Parser(src, tokens)
    rules: list[Rule] = []
    spans: list[tuple[int, int]] = []
    while parser.kind != "eof":
        rule, first, last = parser.production()
        rules.append(rule)
        spans.append((src.line(first), src.line(last)))
    if not rules:
        raise src.error("empty grammar: no productions", 0)
    header, notes = attach_comments(comments, spans)
    rules = [replace(r, comment=c) for r, c in zip(rules, notes)]
    grammar = Grammar(tuple(rules), rules[0].name, dialect="goebnf", header=header)
    _check(rules, parser.refs, src)  # on the names as written, before the renaming
    return with_root_start(grammar).check()


def _check(rules: list[Rule], refs, src: Source) -> None:
    """Duplicate productions and undefined names, with positions."""
    seen: dict[str, Rule] = {}
    for r in rules:
        if r.name in seen:
            raise GrammarError(f"duplicate production '{r.name}' (first defined at line "
                               f"{seen[r.name].pos.line})", r.pos)
        seen[r.name] = r
    for name, at in refs:
        if name not in seen:
            raise src.error(f"undefined production '{name}'", at)
