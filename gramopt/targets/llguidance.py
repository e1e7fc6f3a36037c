"""The llguidance target's engine check: llguidance's own masks, original vs optimized.

    engine_difference(original, optimized, samples=48, seed=0) -> Difference | None
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
from dataclasses import dataclass

from ..grammar import Grammar

EOS = 256


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


def _matcher(grammar: Grammar):
    import llguidance as llg
    from ..formats import write
    m = llg.LLMatcher(_byte_tokenizer(), llg.grammar_from("gbnf", write(grammar, "gbnf")), log_level=0)
    return None if m.is_error() else m


def _allowed(m, buf) -> frozenset[int]:
    import llguidance.numpy as llnp
    import numpy as np
    llnp.fill_next_token_bitmask(m, buf, 0)
    bits = np.unpackbits(buf[0].view(np.uint8), bitorder="little")[:EOS + 1]
    return frozenset(np.flatnonzero(bits).tolist())


def sentences(grammar: Grammar, n: int, seed: int = 0, max_depth: int = 10) -> list[bytes]:
    """``n`` random sentences of ``grammar`` (bytes; fewer when the language is small)."""
    from ..verify.derivations import heights, random_sentence
    from ..verify.symbols import compile_grammar
    cg = compile_grammar(grammar)
    if cg.empty or cg.atoms is not None:
        return []
    rng, hts = random.Random(seed), heights(cg)
    return list(dict.fromkeys(bytes(random_sentence(cg, rng, max_depth, hts)) for _ in range(n)))


def engine_difference(original: Grammar, optimized: Grammar, samples: int = 48,
                      seed: int = 0) -> Difference | None:
    """The first step at which llguidance treats the two grammars differently along random
    sentences of ``original`` (module docstring); None when none is found. A grammar that
    llguidance does not load is a difference only when the original loads."""
    import llguidance.numpy as llnp
    if original.dialect == "lark" or optimized.dialect == "lark":
        return None  # sentences of a Lark grammar are terminal sequences, not bytes
    ma = _matcher(original)
    if ma is None:
        return None
    mb = _matcher(optimized)
    if mb is None:
        return Difference(b"", [], [])
    buf_a, buf_b = llnp.allocate_token_bitmask(1, EOS + 1), llnp.allocate_token_bitmask(1, EOS + 1)
    for text in sentences(original, samples, seed):
        ma.reset()
        mb.reset()
        for i, x in enumerate(list(text) + [EOS]):
            a, b = _allowed(ma, buf_a), _allowed(mb, buf_b)
            if a != b:
                return Difference(text[:i], sorted(a - b), sorted(b - a))
            if x not in a or not ma.consume_token(x):
                break
            if not mb.consume_token(x):
                return Difference(text[:i], [x], [])
    return None


__all__ = ["Difference", "available", "engine_difference", "sentences"]
