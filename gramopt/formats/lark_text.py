"""Lark literal syntax: string and regexp tokens in, quoted source text out.

Reading uses lark's own rules (``lark.load_grammar._literal_to_pattern``: the body of
``"…"`` and ``/…/`` goes through lark's ``eval_escaping``), so a literal means here what it
means to lark. Writing is the exact inverse: for every text ``t`` and pattern ``p``,

    read_string(quote_string(t)) == t        read_regexp(quote_regexp(p, f)) == (p, f)

(tested with hypothesis against lark itself).

A case-insensitive string ``"abc"i`` is the regexp lark compiles it to: re.escape of the
text inside a scoped flag, ``Regex("(?i:abc)", "")`` — the same language, and a form
:func:`ci_string_text` recognizes so that the writer prints ``"abc"i`` back (which lark's
lexer treats as a string: keyword priority over a NAME regexp). The price: a hand-written
``/(?i:abc)/`` is printed as ``"abc"i`` too — same language, string priority.
"""

from __future__ import annotations

import re
import warnings

from lark.exceptions import GrammarError as LarkGrammarError
from lark.lexer import Token

from ..grammar import GrammarError, Regex

_RE_FLAGS = "imslux"  # lark's regexp flags, in the canonical order gramopt keeps them
_SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_CI_SHAPE = re.compile(r"\(\?i:(.*)\)", re.S)
_UNESCAPE = re.compile(r"\\(.)", re.S)


# ---------------------------------------------------------------- reading


def read_literal(raw: str, kind: str) -> tuple[str, str]:
    """(value, flags) of a lark STRING or REGEXP token ``raw``, flags in the order
    ``imslux`` (their order does not matter to lark); lark's GrammarError
    (bad escape, newline without the x flag, empty literal) becomes ours."""
    from lark.load_grammar import _literal_to_pattern

    try:
        pattern = _literal_to_pattern(Token(kind, raw))
    except LarkGrammarError as e:
        if len(e.args) == 2 and isinstance(e.args[1], SyntaxError):  # lark's eval of the escapes
            raise GrammarError(f"bad escape sequence in {raw}: {e.args[1].msg}") from None
        raise GrammarError(_first_line(e)) from None
    except (AssertionError, ValueError, SyntaxError) as e:  # lark's asserts on odd input
        raise GrammarError(f"bad literal {raw}: {e or 'malformed'}") from None
    return pattern.value, "".join(f for f in _RE_FLAGS if f in pattern.flags)  # lark keeps a set


def ci_string(text: str) -> Regex:
    """The IR of the case-insensitive string ``"text"i`` (see the module docstring)."""
    return Regex(f"(?i:{re.escape(text)})", "")


def ci_string_text(rx: Regex) -> str | None:
    """The text of ``rx`` when it has the shape :func:`ci_string` builds, else None."""
    if rx.flags:
        return None
    m = _CI_SHAPE.fullmatch(rx.pattern)
    if m is None:
        return None
    text = _UNESCAPE.sub(r"\1", m.group(1))
    return text if text and re.escape(text) == m.group(1) else None


def range_endpoint(raw: str) -> str | None:
    """The character lark reads from a range endpoint's quoted body ``raw`` (lark's
    escaping *without* the string-only backslash fold), or None when it is not one
    character (lark refuses such a range)."""
    from lark.load_grammar import eval_escaping

    try:
        value = eval_escaping(raw)
    except Exception:  # noqa: BLE001 - lark raises its GrammarError or SyntaxError
        return None
    return value if len(value) == 1 else None


def range_compiles_as_written(raw_lo: str, raw_hi: str, lo: int, hi: int) -> bool:
    """Lark turns ``"a".."z"`` into the regexp ``[a-z]`` pasted from the raw quoted text;
    True when each endpoint is one character as lark reads it and that regexp is the
    code-point range lo..hi."""
    if range_endpoint(raw_lo) != chr(lo) or range_endpoint(raw_hi) != chr(hi):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rx = re.compile(f"[{raw_lo}-{raw_hi}]")
    except (re.error, ValueError, OverflowError):
        return False
    probes = {lo, hi, (lo + hi) // 2, lo - 1, hi + 1, ord("-"), ord("^"), ord("]"), ord("\\")}
    return all((rx.fullmatch(chr(c)) is not None) == (lo <= c <= hi)
               for c in probes if 0 <= c <= 0x10FFFF)


# ---------------------------------------------------------------- writing


def quote_string(text: str) -> str:
    """Lark source ``"…"`` whose value is exactly ``text``."""
    out = ['"']
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif c.isprintable() and not _is_surrogate(c):
            out.append(c)
        else:
            out.append(_code_escape(c))
    out.append('"')
    return "".join(out)


def quote_regexp(pattern: str, flags: str = "") -> str:
    """Lark source ``/…/flags`` whose pattern, after lark's escaping, is exactly
    ``pattern``. A backslash lark would evaluate (``\\n``, ``\\x``, ``\\u``…), a quote and a
    slash are written as ``\\x5c``, ``\\x22``, ``\\x2f`` so they survive as themselves."""
    out = ["/"]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        nxt = pattern[i + 1] if i + 1 < n else ""
        if c == "\\" and nxt == "\\":
            out.append("\\\\")
            i += 2
            continue
        if c == "\\" and nxt == "/":
            out.append("\\/")
            i += 2
            continue
        if c == "\\" and nxt and nxt not in 'Uuxnftr"\'\n' and nxt.isprintable():
            out.append(c + nxt)
            i += 2
            continue
        if c == "\\":
            out.append("\\x5c")
        elif c == "/":
            out.append("\\x2f")
        elif c == '"':
            out.append("\\x22")
        elif c == "'":
            out.append("\\x27")
        elif c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif c.isprintable() and not _is_surrogate(c):
            out.append(c)
        else:
            out.append(_code_escape(c))
        i += 1
    out.append("/" + flags)
    return "".join(out)


def class_char(cp: int) -> str:
    """One code point as it may appear inside a Python regexp ``[...]`` (raw where the
    class syntax allows; :func:`quote_regexp` escapes what lark's source needs)."""
    c = chr(cp)
    return "\\" + c if c in "\\]^-[" else c


def _code_escape(c: str) -> str:
    cp = ord(c)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _is_surrogate(c: str) -> bool:
    return 0xD800 <= ord(c) <= 0xDFFF


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
