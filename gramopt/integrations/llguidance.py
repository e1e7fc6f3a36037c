"""llguidance: its grammar-building calls, optimized for the ``llguidance`` target.

    from gramopt.integrations import llguidance as gllg
    grammar = gllg.grammar_from("gbnf", text)        # as llguidance.grammar_from
    grammar = gllg.grammar_from_lark(lark)           # as LLMatcher.grammar_from_lark
    grammar = gllg.grammar_from_json_schema(schema)  # as LLMatcher.grammar_from_json_schema
    m = gllg.matcher(tokenizer, "gbnf", text)        # an llguidance.LLMatcher

Grammars (formats "gbnf", "ebnf", "cfg", "grammar", "lark") are read by gramopt, optimized
for the ``llguidance`` target (its lexemes kept as they are, the result checked in
llguidance itself: ``targets.LLGUIDANCE``) in the fast per-request mode, written back in the
input's dialect and handed to llguidance's own call. Like ``llguidance.grammar_from``, the
GBNF formats also take Lark text (a text without ``::=`` is read as Lark).

JSON schemas, regexes, choices and llguidance's JSON grammars are passed through unchanged:
llguidance compiles a schema natively (its ``JsonCompiler``, whose strings and numbers are
lexemes: its fast path), and no grammar text of a schema means the same in llguidance (the
``llguidance`` target converts schemas with llama.cpp's converter, whose semantics differ
from llguidance's own).

An optimized grammar llguidance refuses (``LLMatcher.validate_grammar``) gives way to the
input's; any optimizer trouble serves the input (``request.RequestOptimizer``).
"""

from __future__ import annotations

import llguidance as _llg

from . import request as _request
from .request import Request, RequestOptimizer

TARGET = "llguidance"
GBNF_FORMATS = ("gbnf", "ebnf", "cfg", "grammar")
LARK_FORMATS = ("lark",)  # llguidance.grammar_from's format names of its Lark


def _optimizer(optimizer: RequestOptimizer | None) -> RequestOptimizer:
    return optimizer if optimizer is not None else _request.shared(TARGET)


def optimized_text(text: str, dialect: str, optimizer: RequestOptimizer | None = None) -> str:
    """``text`` (``dialect``: "gbnf" or "lark") optimized for llguidance, in the same
    dialect; ``text`` itself when not optimized."""
    served = _optimizer(optimizer).optimize(Request("grammar", text, dialect=dialect, out=dialect))
    return served.text if served.text is not None else text


def _valid_or_plain(optimized: str, plain: str, optimizer: RequestOptimizer | None) -> str:
    """``optimized`` unless llguidance refuses it (then ``plain``, counted as refused)."""
    if optimized == plain:
        return plain
    if _llg.LLMatcher.validate_grammar(optimized):
        _request.LOG.warning("gramopt: llguidance refused the optimized grammar; serving the input")
        _optimizer(optimizer).count_refused()
        return plain
    return optimized


def grammar_from(format: str, text: str, *, optimizer: RequestOptimizer | None = None) -> str:
    """``llguidance.grammar_from(format, text)`` with the grammar formats optimized."""
    if format in GBNF_FORMATS:
        dialect = "gbnf" if "::=" in text else "lark"
        plain = _llg.grammar_from(format, text)
        better = optimized_text(text, dialect, optimizer)
        if better == text:
            return plain
        return _valid_or_plain(_llg.grammar_from(dialect, better), plain, optimizer)
    if format in LARK_FORMATS:
        return grammar_from_lark(text, optimizer=optimizer)
    return _llg.grammar_from(format, text)


def grammar_from_lark(lark: str, *, optimizer: RequestOptimizer | None = None) -> str:
    """``LLMatcher.grammar_from_lark(lark)``, optimized."""
    plain = _llg.LLMatcher.grammar_from_lark(lark)
    better = optimized_text(lark, "lark", optimizer)
    if better == lark:
        return plain
    return _valid_or_plain(_llg.LLMatcher.grammar_from_lark(better), plain, optimizer)


def grammar_from_json_schema(schema, defaults=None, overrides=None) -> str:
    """``LLMatcher.grammar_from_json_schema``, unchanged (module docstring: llguidance's own
    JSON compiler is its fast path)."""
    return _llg.LLMatcher.grammar_from_json_schema(schema, defaults, overrides)


def grammar_from_regex(regex: str) -> str:
    """``LLMatcher.grammar_from_regex``, unchanged (a regex is one lexeme in llguidance)."""
    return _llg.LLMatcher.grammar_from_regex(regex)


def matcher(tokenizer, format: str, text: str, *, log_level: int = 1, limits=None,
            optimizer: RequestOptimizer | None = None):
    """An ``llguidance.LLMatcher`` for ``text`` in ``format`` (``grammar_from``'s formats),
    optimized; when the optimized grammar puts the matcher in an error state that the
    input's does not, the input's matcher is returned."""
    kw = {"log_level": log_level} if limits is None else {"log_level": log_level, "limits": limits}
    grammar = grammar_from(format, text, optimizer=optimizer)
    m = _llg.LLMatcher(tokenizer, grammar, **kw)
    if not m.is_error():
        return m
    plain = _llg.grammar_from(format, text)
    if plain == grammar:
        return m
    fallback = _llg.LLMatcher(tokenizer, plain, **kw)
    if not fallback.is_error():
        _request.LOG.warning("gramopt: llguidance's matcher refused the optimized grammar (%s); serving the input",
                             m.get_error())
        _optimizer(optimizer).count_refused()
        return fallback
    return m


__all__ = ["grammar_from", "grammar_from_json_schema", "grammar_from_lark", "grammar_from_regex", "matcher",
           "optimized_text"]
