"""A drop-in ``xgrammar.GrammarCompiler`` that optimizes grammars for the xgrammar target.

    from gramopt.integrations.xgrammar import GrammarCompiler, install, uninstall
    compiler = GrammarCompiler(tokenizer_info, max_threads=8)   # xgrammar's constructor
    compiler.compile_grammar(text)          any dialect gramopt reads (llama.cpp GBNF too)
    compiler.compile_json_schema(schema)    xgrammar's converter, then optimized
    await compiler.compile_grammar_async(text)   / compile_json_schema_async(schema)
    compiler.gramopt.stats()                the request counters (``request.RequestOptimizer``)
    install() / uninstall()                 swap it in for ``xgrammar.GrammarCompiler`` and
                                            for the name in loaded vLLM / SGLang / TensorRT-LLM
                                            / MLC modules

``compile_grammar`` reads its text as xgrammar EBNF with gramopt's reader, which also takes
llama.cpp GBNF (a bare empty alternative ``ws ::= | " "``, which xgrammar itself refuses),
optimizes it for the ``xgrammar`` target (``gramopt.passes.optimize``, fast per-request mode
by default) and compiles the optimized text. ``compile_json_schema`` converts the schema with
xgrammar's own converter (``xgrammar.Grammar.from_json_schema``, same keyword arguments),
optimizes that grammar and compiles it; an optimization that keeps the grammar unchanged
compiles the schema exactly as plain xgrammar does. ``compile_regex``,
``compile_structural_tag``, ``compile_builtin_json_grammar`` and ``compile_lark`` are passed
through: they are xgrammar's native forms, its fast paths (``/work/shared/ENGINES.md``:
expanding a native JSON-string regex into rules made masks 10x slower).

Never an error plain xgrammar would not raise: when the optimizer cannot read the input,
overruns the request budget, fails, or xgrammar refuses its output, the input is compiled
unoptimized — as given, or, when xgrammar refuses that text (GBNF), as gramopt prints it
(the same language, loadable); only when both are refused does xgrammar's own error reach
the caller. A repeated grammar costs a cache lookup plus xgrammar's own compile (a cache
hit in xgrammar too when its ``cache_enabled``); with ``cache_enabled`` the drop-in also
keeps the compiled grammars of decided requests (``COMPILED_ENTRIES``, within
``cache_limit_bytes``), so a repeat costs a dict lookup.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import threading
import time
from collections import OrderedDict

import xgrammar as _xgr

from . import request as _request
from .request import Request, RequestOptimizer, Served

PLAIN = _xgr.GrammarCompiler if not getattr(_xgr.GrammarCompiler, "_gramopt_drop_in", False) else \
    _xgr.GrammarCompiler.__mro__[1]  # xgrammar's own class, even if this module is reloaded after install()
TARGET = "xgrammar"
ROOT = "root"  # the start rule gramopt's EBNF writer always names (formats.ebnf.START)
STACKS = ("vllm", "sglang", "tensorrt_llm", "mlc_llm")  # packages whose imported name install() swaps
COMPILED_ENTRIES = 256  # compiled grammars a drop-in keeps (when xgrammar's cache_enabled)
_SCHEMA_OPTIONS = ("any_whitespace", "indent", "separators", "strict_mode", "max_whitespace_cnt", "any_order")


def schema_text(schema) -> str:
    """The JSON text of a schema given as xgrammar takes it (str, dict, pydantic model)."""
    convert = getattr(sys.modules.get("xgrammar.grammar"), "_convert_schema_to_str", None)
    if convert is not None:
        return convert(schema)
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return json.dumps(schema)
    return json.dumps(schema.model_json_schema())


@functools.lru_cache(maxsize=256)
def loadable_text(text: str, root_rule_name: str = ROOT) -> str | None:
    """``text`` as gramopt prints it in xgrammar EBNF (same language; GBNF's bare empty
    alternatives written ``""``), or None when gramopt cannot read it."""
    from ..formats import parse, write
    from ..grammar import GrammarError
    try:
        return write(parse(text, "ebnf", None, root_rule_name), "ebnf")
    except GrammarError:
        return None


def _schema_key(schema, kw: dict) -> tuple:
    """The compiled-grammar cache key of a schema (its JSON text) and the converter's options."""
    sep = kw["separators"]
    return ("schema", schema_text(schema), kw["any_whitespace"], kw["indent"], tuple(sep) if sep is not None else None,
            kw["strict_mode"], kw["max_whitespace_cnt"], kw["any_order"])


class GrammarCompiler(PLAIN):
    """``xgrammar.GrammarCompiler`` with gramopt in front of ``compile_grammar`` and
    ``compile_json_schema`` (module docstring). ``gramopt``: a ``RequestOptimizer`` (default:
    the process-wide one for the xgrammar target, options from the environment)."""

    _gramopt_drop_in = True

    def __init__(self, tokenizer_info, *, max_threads: int = 8, cache_enabled: bool = True,
                 cache_limit_bytes: int = -1, gramopt: RequestOptimizer | None = None):
        super().__init__(tokenizer_info, max_threads=max_threads, cache_enabled=cache_enabled,
                         cache_limit_bytes=cache_limit_bytes)
        self.gramopt = gramopt if gramopt is not None else _request.shared(TARGET)
        self.gramopt.warm()
        self._keeps = cache_enabled
        self._limit = cache_limit_bytes
        self._compiled: OrderedDict = OrderedDict()  # request key -> (CompiledGrammar, bytes)
        self._compiled_bytes = 0
        self._compiled_lock = threading.Lock()

    # -- the compiled grammars of decided requests (a repeat is a dict lookup)

    def _cached(self, key):
        if not self._keeps:
            return None
        t0 = time.perf_counter()
        with self._compiled_lock:
            hit = self._compiled.get(key)
            if hit is not None:
                self._compiled.move_to_end(key)
        if hit is None:
            return None
        self.gramopt.count_cached(time.perf_counter() - t0)
        return hit[0]

    def _keep(self, key, served: Served | None, compiled):
        """Keep ``compiled`` for ``key`` unless it was a fall back (a later request may get
        the optimized grammar); bounded by ``COMPILED_ENTRIES`` and ``cache_limit_bytes``."""
        if key is None or not self._keeps or (served is not None and served.how == "fell back"):
            return compiled
        size = compiled.memory_size_bytes if self._limit > 0 else 0
        with self._compiled_lock:
            if key not in self._compiled:
                self._compiled[key] = (compiled, size)
                self._compiled_bytes += size
            while len(self._compiled) > COMPILED_ENTRIES or (self._limit > 0 and self._compiled_bytes > self._limit
                                                             and len(self._compiled) > 1):
                _, (_, freed) = self._compiled.popitem(last=False)
                self._compiled_bytes -= freed
        return compiled

    def clear_cache(self) -> None:
        super().clear_cache()
        with self._compiled_lock:
            self._compiled.clear()
            self._compiled_bytes = 0

    # -- grammars

    def compile_grammar(self, grammar, *, root_rule_name: str = ROOT):
        key = ("grammar", grammar, root_rule_name) if isinstance(grammar, str) else None
        hit = self._cached(key) if key is not None else None
        if hit is not None:
            return hit
        req = self._grammar_request(grammar, root_rule_name)
        served = self.gramopt.optimize(req) if req is not None else None
        return self._keep(key, served, self._compile_grammar_served(served, grammar, root_rule_name))

    async def compile_grammar_async(self, grammar, *, root_rule_name: str = ROOT):
        """``compile_grammar`` off the event loop's thread (optimization and compile)."""
        key = ("grammar", grammar, root_rule_name) if isinstance(grammar, str) else None
        hit = self._cached(key) if key is not None else None
        if hit is not None:
            return hit
        req = self._grammar_request(grammar, root_rule_name)
        served = await self.gramopt.optimize_async(req) if req is not None else None
        compiled = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self._compile_grammar_served, served, grammar, root_rule_name))
        return self._keep(key, served, compiled)

    def _grammar_request(self, grammar, root_rule_name: str) -> Request | None:
        if isinstance(grammar, str):
            return Request("grammar", grammar, dialect="ebnf", start=root_rule_name, out="ebnf")
        if isinstance(grammar, _xgr.Grammar):
            return Request("grammar", str(grammar), dialect="ebnf", start=ROOT, out="ebnf")
        return None  # not a grammar xgrammar takes: its own error, unchanged

    def _compile_grammar_served(self, served: Served | None, grammar, root_rule_name: str):
        if served is not None and served.text is not None:
            try:
                return super().compile_grammar(served.text, root_rule_name=ROOT)
            except Exception as e:  # noqa: BLE001 - serve the input instead (and say so)
                self._refused(e)
        try:
            return super().compile_grammar(grammar, root_rule_name=root_rule_name)
        except Exception as refused:  # noqa: BLE001 - xgrammar's own errors
            loadable = loadable_text(grammar, root_rule_name) if isinstance(grammar, str) else None
            if loadable is None or loadable == grammar:
                raise
            try:
                return super().compile_grammar(loadable, root_rule_name=ROOT)
            except Exception:  # noqa: BLE001
                raise refused from None

    # -- JSON schemas

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, indent=None, separators=None,
                            strict_mode: bool = True, max_whitespace_cnt=None, any_order: bool = False):
        kw = dict(any_whitespace=any_whitespace, indent=indent, separators=separators, strict_mode=strict_mode,
                  max_whitespace_cnt=max_whitespace_cnt, any_order=any_order)
        key = _schema_key(schema, kw)
        hit = self._cached(key)
        if hit is not None:
            return hit
        served = self.gramopt.optimize(self._schema_request(schema, kw))
        return self._keep(key, served, self._compile_schema_served(served, schema, kw))

    async def compile_json_schema_async(self, schema, **kw):
        """``compile_json_schema`` off the event loop's thread (optimization and compile)."""
        kw = {**dict(any_whitespace=True, indent=None, separators=None, strict_mode=True, max_whitespace_cnt=None,
                     any_order=False), **kw}
        key = _schema_key(schema, kw)
        hit = self._cached(key)
        if hit is not None:
            return hit
        served = await self.gramopt.optimize_async(self._schema_request(schema, kw))
        compiled = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self._compile_schema_served, served, schema, kw))
        return self._keep(key, served, compiled)

    def _schema_request(self, schema, kw: dict) -> Request:
        convert = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kw.items()
                               if k in _SCHEMA_OPTIONS))
        return Request("xgrammar-json-schema", schema_text(schema), dialect="ebnf", out="ebnf", convert=convert)

    def _compile_schema_served(self, served: Served, schema, kw: dict):
        if served.text is not None:
            try:
                return super().compile_grammar(served.text, root_rule_name=ROOT)
            except Exception as e:  # noqa: BLE001
                self._refused(e)
        return super().compile_json_schema(schema, **kw)

    def _refused(self, e: Exception) -> None:
        _request.LOG.warning("gramopt: xgrammar refused the optimized grammar (%s); compiling the input",
                             str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        self.gramopt.count_refused()


# ---------------------------------------------------------------- install


_SWAPPED: list[tuple[object, str]] = []


def install() -> type:
    """Make ``xgrammar.GrammarCompiler`` (and ``xgrammar.compiler.GrammarCompiler``) the
    drop-in, and every module attribute bound to xgrammar's class in the loaded modules of
    vLLM, SGLang, TensorRT-LLM and MLC (``from xgrammar import GrammarCompiler`` done before
    this call). Idempotent; returns the drop-in class."""
    import xgrammar.compiler as xgr_compiler
    for module in (_xgr, xgr_compiler):
        _swap(module, "GrammarCompiler")
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in STACKS:
            continue
        for attr, value in list(vars(module).items()):
            if value is PLAIN:
                _swap(module, attr)
    return GrammarCompiler


def _swap(module, attr: str) -> None:
    if getattr(module, attr, None) is PLAIN:
        setattr(module, attr, GrammarCompiler)
        _SWAPPED.append((module, attr))


def uninstall() -> None:
    """Put xgrammar's own class back everywhere ``install`` swapped it."""
    while _SWAPPED:
        module, attr = _SWAPPED.pop()
        if getattr(module, attr, None) is GrammarCompiler:
            setattr(module, attr, PLAIN)


def installed() -> bool:
    return _xgr.GrammarCompiler is GrammarCompiler


__all__ = ["GrammarCompiler", "PLAIN", "install", "installed", "loadable_text", "schema_text", "uninstall"]
