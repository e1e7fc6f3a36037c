"""Lark grammars (.lark): read with lark's own grammar loader, write text lark loads.

    parse_lark(text, path=None, start=None, import_paths=()) -> Grammar   (lark_reader)
    write_lark(grammar) -> str                                             (lark_writer)

The pieces: lark_source (lark's parse of the file, positions, comments), lark_text
(string / regexp literal syntax both ways), lark_reader (trees → IR: imports, templates,
%override/%extend), lark_imports (which definitions an %import brings), lark_writer (IR →
text, also for grammars read from GBNF / EBNF).
"""

from __future__ import annotations

from .lark_imports import imported_names
from .lark_reader import parse_lark
from .lark_writer import expr_text, write_lark

__all__ = ["parse_lark", "write_lark", "expr_text", "imported_names"]
