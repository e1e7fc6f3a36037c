"""Adjacent literal fusion (GBNF / EBNF only).

    # "a" "b"          -->  "ab"
    # "ab" [c] "d" X   -->  "abcd" X      (a one-code-point class is that literal)

Why it preserves the language: in GBNF / EBNF a literal denotes the UTF-8 bytes of its text,
and the bytes of u·v are the bytes of u followed by those of v, so {u}·{v} = {uv}; a class
with exactly one code point c denotes {c}. Concatenation is associative, so a maximal run of
such items may be replaced by the one literal of their joined text.

Not in Lark: there a literal is a lexer token, and "a" "b" (two tokens, with ``%ignore``
between them) is not "ab" (one token). κ is unchanged: a literal of k code points lowers to
k terminal symbols either way. Surrogate code points (no UTF-8 form) are never fused.
Idempotent.
"""

from __future__ import annotations

from ...grammar import CharClass, Expr, Grammar, Literal, Seq, seq, transform
from .common import is_lark, map_bodies


def literal_text(e: Expr) -> str | None:
    """The text ``e`` denotes when it is a literal or a one-code-point class, else None."""
    if isinstance(e, Literal):
        return e.text
    if isinstance(e, CharClass):
        cps = e.code_points()
        if len(cps) == 1 and cps[0][0] == cps[0][1] and not 0xD800 <= cps[0][0] <= 0xDFFF:
            return chr(cps[0][0])
    return None


def fuse_items(e: Seq) -> Expr:
    """``e`` with every run of two or more literal items replaced by one literal."""
    out: list[Expr] = []
    run: list[Expr] = []

    def flush() -> None:
        if len(run) >= 2:
            out.append(Literal("".join(literal_text(i) for i in run)))
        else:
            out.extend(run)
        run.clear()

    for item in e.items:
        if literal_text(item) is not None:
            run.append(item)
        else:
            flush()
            out.append(item)
    flush()
    return seq(*out)


def fuse_literals(grammar: Grammar) -> Grammar:
    """Fuse adjacent literals in every sequence (no-op on Lark grammars)."""
    if is_lark(grammar):
        return grammar
    step = lambda e: fuse_items(e) if isinstance(e, Seq) else e  # noqa: E731
    return map_bodies(grammar, lambda body: transform(body, step))
