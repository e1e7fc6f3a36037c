"""llama-cpp-python: ``LlamaGrammar.from_string`` / ``from_file`` / ``from_json_schema``,
optimized for the ``llama.cpp`` target.

    from gramopt.integrations.llamacpp import LlamaGrammar
    grammar = LlamaGrammar.from_string(gbnf)            # a llama_cpp.LlamaGrammar
    grammar = LlamaGrammar.from_json_schema(schema)     # llama.cpp's converter, then optimized
    llm(prompt, grammar=grammar)

The GBNF is read by gramopt, optimized for llama.cpp (no left recursion; repetitions and
alternations ordered as llama.cpp's backtracking stack prefers; kept only where llama.cpp's
calibrated cost model prices it no higher: ``targets.LLAMA_CPP``) in the fast per-request
mode and handed to ``llama_cpp.LlamaGrammar.from_string``. ``from_json_schema`` converts
with llama-cpp-python's own ``json_schema_to_gbnf`` first, as ``llama_cpp.LlamaGrammar``
does. The optimizer never fails a call: an input gramopt cannot read, an overrun or an
error serve the input text (``request.RequestOptimizer``).
"""

from __future__ import annotations

from . import request as _request
from .request import Request, RequestOptimizer

TARGET = "llama.cpp"


def optimized_gbnf(text: str, optimizer: RequestOptimizer | None = None) -> str:
    """GBNF ``text`` optimized for llama.cpp (``text`` itself when not optimized)."""
    opt = optimizer if optimizer is not None else _request.shared(TARGET)
    served = opt.optimize(Request("grammar", text, dialect="gbnf", out="gbnf"))
    return served.text if served.text is not None else text


class LlamaGrammar:
    """The constructors of ``llama_cpp.LlamaGrammar``, returning its instances."""

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True, *, optimizer: RequestOptimizer | None = None):
        import llama_cpp
        return llama_cpp.LlamaGrammar.from_string(optimized_gbnf(grammar, optimizer), verbose=verbose)

    @classmethod
    def from_file(cls, file, verbose: bool = True, *, optimizer: RequestOptimizer | None = None):
        with open(file, encoding="utf-8") as f:
            return cls.from_string(f.read(), verbose=verbose, optimizer=optimizer)

    @classmethod
    def from_json_schema(cls, json_schema: str, verbose: bool = True, *, optimizer: RequestOptimizer | None = None):
        from llama_cpp.llama_grammar import json_schema_to_gbnf
        return cls.from_string(json_schema_to_gbnf(json_schema), verbose=verbose, optimizer=optimizer)


__all__ = ["LlamaGrammar", "optimized_gbnf"]
