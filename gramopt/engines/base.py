"""The adapter interface every external engine implements (xgrammar, llguidance, llama.cpp, …).

    env = Env.create(vocab)              a vocabulary and its text tokenizer, shared by adapters
    eng = ENGINES["xgrammar"](env)       .missing: why it cannot run (None when it can)
    eng.prepare()                        tokenizer glue (the engine's own vocabulary object), untimed
    eng.source(grammar)                  (dialect, text): all that compile reads of the grammar
    h = eng.compile(grammar)             the engine's compiled grammar; EngineError when refused
    m = eng.matcher(h)                   one decoding row: fill(out_row) / accept(t) / reset() /
                                         is_terminated(), with per-call seconds in fill_s, accept_s
    times = eng.run(h, tokens)           seconds per mask along a token trajectory (bench)

A third engine subclasses ``Engine``: it sets ``name``, ``module`` (the Python package it
needs), ``target`` (the ``--target`` it is measured under) and ``dialect`` (what it reads),
implements ``compile`` and ``matcher``, and is added to ``gramopt.engines.ENGINES``. ``run``
has a default built on ``matcher``; an adapter may override it with a tighter timed loop.
Masks are packed int32 rows, bit i of word i//32 = token i allowed (xgrammar's and
llguidance's layout).
"""

from __future__ import annotations

import importlib.util
import re
import time

import numpy as np

from ..formats import write
from ..grammar import Grammar, GrammarError
from ..grammar.memo import IdentityMemo


class EngineError(Exception):
    """The engine refused the grammar or a token of the trajectory (one line)."""


class Env:
    """A vocabulary with its text tokenizer; adapters keep per-vocabulary state in ``cache``."""

    def __init__(self, vocab, tokenizer=None):
        from ..runtime.tokenize import Tokenizer  # gramopt.runtime loads numba: on first use
        self.vocab = vocab
        self.tokenizer = tokenizer or Tokenizer.for_vocab(vocab)
        self.cache: dict = {}

    @classmethod
    def create(cls, vocab) -> "Env":
        return cls(vocab)

    @property
    def is_qwen(self) -> bool:
        """Qwen's tiktoken vocabulary, or a part of it (the judge's, ``judge.vocabulary``)."""
        return self.tokenizer.encoder is not None or self.vocab.name.startswith("qwen.tiktoken/")


class EngineMatcher:
    """One decoding row of an engine: the interface the decoding loop and the lockstep check
    use (``gramopt.decoding.loop``). Records seconds per call in ``fill_s`` / ``accept_s``."""

    kind = ""

    def __init__(self):
        self.fill_s: list[float] = []
        self.accept_s: list[float] = []

    def fill(self, out_row: np.ndarray) -> None:  # pragma: no cover - interface
        """Write the packed mask of the next token into ``out_row`` (int32 words)."""
        raise NotImplementedError

    def accept(self, token: int) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def accept_allowed(self, token: int) -> bool:
        """``accept`` of a token the caller saw allowed by this state's mask (filled here, or
        one known equal: the same engine state). An engine that guards ``accept`` with its
        own mask (llama.cpp) may skip that guard; the others accept as usual."""
        return self.accept(token)

    def try_accept(self, token: int) -> bool:
        """``accept`` of a token whose mask was not asked: False where the engine refuses it,
        the matcher then still in its state before (``reset`` works). ``accept`` already is
        such a call for the engines that guard it (llama.cpp) or leave a refusal undone
        (xgrammar); llguidance overrides it."""
        return self.accept(token)

    def reset(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def is_terminated(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError


class Engine:
    """An external engine behind one interface (module docstring)."""

    name = ""
    module = ""      # the Python package it needs ("" for none)
    target = "generic"  # the optimizer target it is measured under
    dialect = "ebnf"   # the dialect it reads
    default = True     # among the engines a benchmark measures when none are named

    def __init__(self, env: Env, threads: int = 1):
        self.env = env
        self.threads = threads  # threads a compile may use (1: what a benchmark times); same result
        self.missing = self._missing()

    @classmethod
    def installed(cls) -> bool:
        return not cls.module or importlib.util.find_spec(cls.module) is not None

    def _missing(self) -> str | None:
        if not self.installed():
            return f"{self.name} is not installed (pip install gramopt[engines])"
        return None

    def prepare(self) -> None:
        """Per-vocabulary setup (tokenizer objects), kept out of the timed compile."""

    def timed_compile(self, grammar: Grammar):
        self.prepare()
        t = time.perf_counter()
        h = self.compile(grammar)
        return h, time.perf_counter() - t

    def compile(self, grammar: Grammar):  # pragma: no cover - interface
        raise NotImplementedError

    def matcher(self, handle) -> EngineMatcher:  # pragma: no cover - interface
        raise NotImplementedError

    def run(self, handle, tokens: list[int]) -> list[float]:
        """Seconds per mask along ``tokens``: fill the mask (timed), then accept the token;
        a token the engine rejects is an ``EngineError``."""
        m = self.matcher(handle)
        out = np.zeros((len(self.env.vocab) + 31) // 32, np.int32)
        for t in tokens:
            m.fill(out)
            if not (out[t >> 5] >> (t & 31)) & 1 or not m.accept(t):
                raise EngineError(f"{self.name} rejects token {t} at step {len(m.fill_s) - 1}")
        return list(m.fill_s)

    def source(self, grammar: Grammar) -> tuple[str, str]:
        """(dialect, text): everything ``compile`` reads of ``grammar``. An engine is a
        function of its source and the vocabulary, so two grammars with one source are one
        grammar to it: the same compiled form, the same masks (the judge compiles one source
        once). ``EngineError`` when the dialect cannot spell the grammar."""
        return self.dialect, self.printed(grammar)

    def printed(self, grammar: Grammar, dialect: str | None = None) -> str:
        """The grammar as the engine reads it; a construct the dialect cannot spell is the
        engine refusing the grammar."""
        try:
            return printed_as(grammar, dialect or self.dialect)
        except GrammarError as e:
            raise EngineError(e.message if hasattr(e, "message") else str(e).splitlines()[0]) from None


BYTE_END = 256
"""The end token of the byte vocabularies (llguidance's ``_byte_tokenizer``, llama.cpp's
``byte_vocab``): ids 0..255 are the single bytes."""

_PRINTED: dict[str, IdentityMemo] = {}


def printed_as(grammar: Grammar, dialect: str) -> str:
    """``write(grammar, dialect)``, remembered for the last few grammars (the same objects:
    ``grammar.memo``; ``write`` is a pure function of them). The judge asks for one grammar's
    text several times per engine (its source compared, its compile, llguidance's byte
    check; llguidance and llama.cpp both read GBNF), and printing 10,000 rules takes seconds.
    A grammar the dialect cannot spell raises each time (nothing is remembered)."""
    memo = _PRINTED.setdefault(dialect, IdentityMemo(4))
    return memo.get(grammar, lambda g: write(g, dialect))


# xgrammar's C++ log prefix, "[17:37:27] /project/cpp/json_schema_converter.cc:4950: ": a wall-clock
# stamp and a source line of xgrammar's build, in front of the message a user needs
_LOG_STAMP = re.compile(r"^\[\d{2}:\d{2}:\d{2}\] \S+:\d+: ")


def first_line(e: Exception, limit: int = 160) -> str:
    """An engine's error message, first line, bounded, without xgrammar's log stamp (the same
    input gives the same message at any hour)."""
    line = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return _LOG_STAMP.sub("", line)[:limit]


__all__ = ["BYTE_END", "Engine", "EngineError", "EngineMatcher", "Env", "first_line", "printed_as"]
