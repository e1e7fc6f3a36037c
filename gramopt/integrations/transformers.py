"""transformers: a ``LogitsProcessor`` for ``model.generate`` over the drop-in compiler.

    from gramopt.integrations.transformers import logits_processor
    proc = logits_processor(tokenizer_info, grammar=gbnf)        # or json_schema=...
    model.generate(input_ids, logits_processor=[proc], max_new_tokens=64)

The grammar (any dialect gramopt reads) or schema is compiled by
``gramopt.integrations.xgrammar.GrammarCompiler`` (optimized for the xgrammar target) and
wrapped in xgrammar's own ``xgrammar.contrib.hf.LogitsProcessor``, which masks the scores
of each step (``__call__(input_ids, scores) -> scores``). As with xgrammar's, a processor
serves one ``generate`` call: make a new one per call (the compiled grammar is cached).
"""

from __future__ import annotations


def logits_processor(tokenizer_info, *, grammar: str | None = None, json_schema=None, compiler=None, **compile_kw):
    """An HF logits processor constraining generation to ``grammar`` or ``json_schema``;
    ``compiler``: a drop-in ``GrammarCompiler`` to reuse (default: one per tokenizer info)."""
    if (grammar is None) == (json_schema is None):
        raise ValueError("give exactly one of grammar= and json_schema=")
    from xgrammar.contrib.hf import LogitsProcessor
    compiler = compiler or _compiler(tokenizer_info)
    compiled = compiler.compile_grammar(grammar, **compile_kw) if grammar is not None else \
        compiler.compile_json_schema(json_schema, **compile_kw)
    return LogitsProcessor(compiled)


_COMPILERS: dict[int, tuple] = {}  # id(tokenizer info) -> (that info, its compiler)


def _compiler(tokenizer_info):
    from .xgrammar import GrammarCompiler
    key = id(tokenizer_info)
    held = _COMPILERS.get(key)
    if held is None or held[0] is not tokenizer_info:
        held = _COMPILERS[key] = (tokenizer_info, GrammarCompiler(tokenizer_info))
    return held[1]


__all__ = ["logits_processor"]
