"""A .lark text as lark's own grammar parser sees it: statements with positions, comments.

    parse_statements(text) -> list[Statement]     raises GrammarError(message, pos)
    comments(text, statements) -> (header, {statement index: comment})

The parse is lark's (``lark.load_grammar._get_parser``, the LALR parser lark uses for
every .lark file), kept *before* lark's ``PrepareGrammar`` so every name is still a token
with a line and column. Lark drops comments; :func:`comments` recovers the ones gramopt
keeps: the comment lines directly above a statement (no blank line between) belong to it,
and a comment block at the top of the file that a blank line separates from the first
statement is the header. Comments inside a definition or at the end of a line are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lark import Token, Tree
from lark.exceptions import LarkError, UnexpectedInput

from ..grammar import GrammarError, SourcePos
from .ebnf import MAX_NESTING


@dataclass(frozen=True)
class Statement:
    """One top-level statement of a .lark file: ``kind`` is lark's tree name (rule, term,
    ignore, import, declare, override, extend); ``tree`` the raw parse tree."""

    kind: str
    tree: Tree
    pos: SourcePos
    start: int  # offset of the first token
    end: int  # offset just after the last token
    last_line: int


def parse_statements(text: str) -> list[Statement]:
    """Lark's parse of ``text``, one Statement per top-level item, in source order."""
    from lark.load_grammar import _get_parser

    try:
        tree = _get_parser().parse(text + "\n", "start")
    except UnexpectedInput as e:
        raise GrammarError(_explain(e), _pos_of(e)) from None
    except LarkError as e:
        raise GrammarError(f"lark: {_first_line(e)}") from None
    out: list[Statement] = []
    for stmt in tree.children:
        toks, too_deep = _tokens(stmt)
        if too_deep is not None:
            raise GrammarError(f"parentheses nested more than {MAX_NESTING} levels deep",
                               SourcePos(too_deep.line, too_deep.column))
        if not toks:  # "%ignore" with nothing after it: lark keeps no token to place it
            raise GrammarError(f"%{stmt.data} needs an argument", _keyword_pos(text, stmt.data, out))
        first = min(toks, key=lambda t: t.start_pos or 0)
        last = max(toks, key=lambda t: t.end_pos or 0)
        out.append(Statement(stmt.data, stmt, SourcePos(first.line, first.column), first.start_pos,
                             last.end_pos, last.end_line))
    return out


def _tokens(stmt: Tree) -> tuple[list[Token], Token | None]:
    """The tokens of one statement's tree and the first (in source order) that sits inside
    more than ``MAX_NESTING`` groups (``(...)``, ``[...]``: an ``expansions`` node below the
    definition's own), or None; found without recursion, so a statement nested any depth
    is refused with its place rather than a RecursionError in lark's tree walks or ours."""
    toks: list[Token] = []
    too_deep: Token | None = None
    stack: list[tuple[object, int]] = [(stmt, -1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, Token):
            toks.append(node)
            if level > MAX_NESTING and (too_deep is None or node.start_pos < too_deep.start_pos):
                too_deep = node
        elif isinstance(node, Tree):
            inner = level + (node.data == "expansions")
            stack.extend((c, inner) for c in node.children)
    return toks, too_deep


def _keyword_pos(text: str, keyword: str, before: list[Statement]) -> SourcePos:
    """Where ``%keyword`` first appears after the statements already read."""
    i = text.find("%" + keyword, before[-1].end if before else 0)
    if i < 0:
        return SourcePos(1, 1)
    return SourcePos(text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1)


def _explain(e: UnexpectedInput) -> str:
    """Lark's own wording for a grammar syntax error (its table of example mistakes)."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken
    from lark.load_grammar import _get_parser, _translate_parser_exception

    if isinstance(e, UnexpectedCharacters):
        ch = e.char if isinstance(e.char, str) else "?"
        return f"unexpected character {ch!r}"
    if isinstance(e, UnexpectedToken):
        try:
            known = _translate_parser_exception(_get_parser().parse, e)
        except Exception:  # noqa: BLE001 - the explanation is a courtesy
            known = None
        if known:
            return known[0].lower() + known[1:]
        tok = e.token
        got = "end of input" if tok.type == "$END" else f"{tok.type} {str(tok)!r}"
        expected = ", ".join(sorted(e.accepts or e.expected))
        return f"unexpected {got}; expected one of: {expected}"
    return _first_line(e)


def _pos_of(e: UnexpectedInput) -> SourcePos | None:
    line, col = getattr(e, "line", None), getattr(e, "column", None)
    if isinstance(line, int) and isinstance(col, int) and line > 0 and col > 0:
        return SourcePos(line, col)
    return None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ---------------------------------------------------------------- comments

_COMMENT_START = re.compile(r"//|#")


def comments(text: str, statements: list[Statement]) -> tuple[str, dict[int, str]]:
    """(header, {statement index: comment}) — see the module docstring. Comment text is
    kept without its ``//`` or ``#`` marker and one following space."""
    lines = text.splitlines()
    is_comment = [_comment_text(line) for line in lines]
    attached: dict[int, str] = {}
    taken: set[int] = set()
    prev_end = 0  # last line (1-based) of the previous statement
    for i, st in enumerate(statements):
        block: list[int] = []
        ln = st.pos.line - 1  # 1-based line just above the statement
        while ln > prev_end and is_comment[ln - 1] is not None:
            block.append(ln)
            ln -= 1
        block.reverse()
        if block:
            attached[i] = "\n".join(is_comment[b - 1] for b in block)
            taken.update(block)
        prev_end = st.last_line
    first_line = statements[0].pos.line if statements else len(lines) + 1
    header_lines = []
    for ln in range(1, first_line):
        if ln in taken:
            break
        if is_comment[ln - 1] is not None:
            header_lines.append(is_comment[ln - 1])
        elif header_lines and lines[ln - 1].strip():
            break
    return "\n".join(header_lines), attached


def _comment_text(line: str) -> str | None:
    """The comment of a line that holds only a comment, else None."""
    stripped = line.strip()
    m = _COMMENT_START.match(stripped)
    if not m:
        return None
    body = stripped[m.end():]
    return body[1:] if body.startswith(" ") else body
