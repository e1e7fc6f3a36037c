"""The vocabulary the engine check asks xgrammar and llama.cpp about: a part of Qwen's.
(llguidance is asked over Qwen's whole vocabulary: ``judge.masks.QWEN_WHOLE``, below.)

    judge_vocab() -> Vocab         Qwen's tokens of at most ``SHORT`` bytes, its longer runs of
                                   ASCII punctuation and white space, and its end token, in
                                   Qwen's order (renumbered); 50,935 of 151,644
    encode(data) -> list[int]      ``data`` as tokens of it: Qwen's BPE, each Qwen token not in
                                   it spelt by the longest of its own that fit
    qwen_encode(data) -> list[int] ``data`` as Qwen's tokens (its BPE; greedy where not UTF-8)
    judge_tokenizer(), qwen_tokenizer()   each vocabulary's tokenizer, built once per process
    kept(token_bytes) -> bool      whether a Qwen token is one of them

Why not Qwen's whole vocabulary. The user's model is not known when a grammar is optimized:
Qwen's vocabulary was already a stand-in for it, and the question the check asks is whether an
engine treats two forms of one grammar alike over *some* real vocabulary. What an engine gets
wrong by form shows where a token runs across a grammar boundary — past a rule's end that a
lookahead assertion vouches for (xgrammar: ``"\\n`` after a string), across a lexeme's end
(llguidance's greedy lexer), into a class that excludes part of a character (llama.cpp's
partial UTF-8) — and a token that crosses one crosses it within its first few bytes or as a run
of punctuation: a quote, a comma, a brace, a newline, indentation. Those are the tokens kept:
every byte, every pair, triple and quadruple Qwen's BPE learnt (every CJK character, every
split UTF-8 sequence among them), every run of ASCII punctuation and white space (``"},\\n``,
32 spaces). What is left out is mostly a word's letters, which lie inside one lexeme or one
class repetition, where a shorter token of the same letters walks the same path; a long word
that ends across a boundary (``name":``) is left out too, and its ending (``":``, ``e":``) kept:
a difference only such a token shows is one this check can miss. An engine's
time to compile a grammar and to fill a mask grows with the tokens it walks: with a third of
them, short ones, the input's compile and trace cost xgrammar 0.50x and llama.cpp 0.31x what
Qwen's whole vocabulary cost (geometric means over 27 JSONSchemaBench schemas), and xgrammar's
compile of a ``maxLength: 32767`` string 4x less (``benchmarks/results/judge-vocab-2026-11-29``).

Soundness is unchanged: a mask difference found over this vocabulary is one the engine makes
with a real tokenizer's tokens (these are Qwen's, with their ids renumbered; each token's bit is
computed by the engine from that token's bytes), so it is never invented; a token left out can
only make the check miss a difference, as the step budget can.

Not for llguidance. An engine whose masks fail by the vocabulary's *size* is not asked about a
part of it: llguidance computes a mask within a limit of 50,000 Earley items, reached where
long tokens run through a string's rule, and past it allows only the end token. Over this part
the check missed such a failure the optimizer's repair had left in an output (corpus
maskbench Github_hard-o81117: 90,035 Qwen tokens refused inside an email string), so llguidance
keeps Qwen's whole vocabulary (``benchmarks/results/judge-vocab-2026-11-29``).
"""

from __future__ import annotations

from functools import lru_cache

SHORT = 4
"""Tokens of at most this many bytes are all kept."""

NAME = "qwen.tiktoken/judge"
"""The judge vocabulary's ``Vocab.name`` (a part of Qwen's tiktoken vocabulary)."""


def kept(token: bytes) -> bool:
    """Whether the judge asks about a Qwen token of these bytes: at most ``SHORT`` bytes (the
    empty end token among them), or ASCII punctuation and white space only."""
    return len(token) <= SHORT or all(b < 0x80 and not chr(b).isalnum() for b in token)


@lru_cache(maxsize=1)
def _parts():
    """(the judge's Vocab, Qwen id -> its id or -1)."""
    import numpy as np
    from ..runtime.vocab import Vocab
    qwen = Vocab.qwen()
    ids = np.full(len(qwen), -1, np.int64)
    tokens: list[bytes] = []
    for q, b in enumerate(qwen.token_bytes):
        if kept(b):
            ids[q] = len(tokens)
            tokens.append(b)
    eos = tuple(int(ids[e]) for e in qwen.eos_ids)
    special = {name: int(ids[i]) for name, i in qwen.special.items() if ids[i] >= 0}
    return Vocab(tokens, eos, special, name=NAME), ids


def judge_vocab():
    """The judge's vocabulary (module docstring), built once per process."""
    return _parts()[0]


@lru_cache(maxsize=1)
def judge_tokenizer():
    """The judge vocabulary's tokenizer (greedy longest match), built once per process."""
    from ..runtime.tokenize import Tokenizer
    return Tokenizer(judge_vocab())


@lru_cache(maxsize=1)
def qwen_tokenizer():
    """Qwen's tokenizer (its BPE), built once per process."""
    from ..runtime.tokenize import Tokenizer
    from ..runtime.vocab import Vocab
    return Tokenizer.for_vocab(Vocab.qwen())


def qwen_encode(data: bytes) -> list[int]:
    """Qwen token ids of ``data``: its BPE for UTF-8 text, else greedy longest match over its
    tokens (every byte is one). ValueError (``TokenizeError``) when it cannot spell it."""
    bpe = qwen_tokenizer()
    try:
        return bpe.encode(data.decode("utf-8"))
    except UnicodeDecodeError:
        return bpe.greedy(data)


def encode(data: bytes) -> list[int]:
    """``data`` as judge-vocabulary tokens: Qwen's tokens (``qwen_encode``), each one the judge
    does not keep spelt by the longest kept tokens that fit (every byte is one). ValueError
    when the vocabulary cannot spell it."""
    from ..runtime.vocab import Vocab
    qwen = Vocab.qwen()
    ids = _parts()[1]
    spell = judge_tokenizer()
    out: list[int] = []
    for q in qwen_encode(data):
        j = int(ids[q])
        if j >= 0:
            out.append(j)
        else:
            out.extend(spell.greedy(qwen.token_bytes[q]))
    return out


__all__ = ["NAME", "SHORT", "encode", "judge_tokenizer", "judge_vocab", "kept", "qwen_encode", "qwen_tokenizer"]
