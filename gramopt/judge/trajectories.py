"""Deterministic trajectories for the engine check: the token paths along which the input's
and the candidate's masks are compared.

    sentences(grammar, n, seed) -> list[bytes]       sentences derived at random from the input
    covering_texts(grammar, max_bytes) -> list[bytes]  every alternative at every place, in a budget
    byte_sentences(grammar) -> list[bytes]           what llguidance's byte-vocabulary check follows
    token_paths(texts, encode, max_tokens, end) -> list[tuple[int, ...]]
    Walker(TokenGroups(first_bytes(tokens)), end_ids, seed).choose(allowed) -> int | None
                                                     one seeded step of a walk
    WALK_TOKENS, SENTENCES, TRAJECTORY_TOKENS

Three sources, all seeded and counted in work units (tokens, never seconds):
  * samples the caller gives (a schema's valid instances), as bytes;
  * sentences derived at random from the input (``verify.derivations``), so every rule the
    input reaches is likely exercised; for llguidance's byte-vocabulary check, first covering
    sentences (``covering_texts``), which take every alternative at every place within a
    byte budget, so a state behind a deep or unlikely choice is reached for certain;
  * random walks through the *input's* engine masks (``Walker``): at each step a token the
    input's mask allows, drawn first by its first byte (uniform over the distinct first
    bytes allowed: ``"``, ``{``, a digit, a letter… equally likely, so a walk takes the
    grammar's branches rather than the thousands of letter tokens inside a string), then
    uniformly among the allowed tokens with that first byte. Walks reach token boundaries
    that no tokenizer produces (a quote and a newline in one token: the lookahead defect).
    A step whose mask is the step before's (a string's interior, a run of white space) most
    often repeats its state, and its mask has been compared already: there the walk takes a
    way out, a token of a first-byte group the mask splits (``Walker.choose(repeated=True)``),
    rather than spend its steps, and the engine's dearest masks, in one state.

A byte trajectory becomes token ids through the caller's ``encode`` (Qwen's BPE,
``judge.vocabulary``), and ends with the end token when the whole text fit in ``max_tokens``:
the mask before it must allow stopping exactly where the language accepts.
"""

from __future__ import annotations

import random
from typing import Callable, Iterable, Sequence

import numpy as np

from ..grammar import Grammar
from ..grammar.dialects import token_atoms
from ..grammar.memo import IdentityMemo

SENTENCES = 24           # sentences derived from the input per check
SENTENCE_DEPTH = 10      # past this depth a derivation takes shortest completions
TRAJECTORY_TOKENS = 96   # a sample or sentence is cut after this many tokens
WALK_TOKENS = 48         # the longest random walk, in tokens
COVER_BYTES = 16384      # bytes of covering sentences the byte-vocabulary check follows
BYTE_SENTENCES = 48      # random sentences it follows after them


_SENTENCES: dict[tuple, IdentityMemo] = {}  # by (n, seed, max_depth)


def sentences(grammar: Grammar, n: int = SENTENCES, seed: int = 0, max_depth: int = SENTENCE_DEPTH) -> list[bytes]:
    """Up to ``n`` distinct sentences of ``grammar`` derived at random (seeded); none for a
    Lark grammar (its sentences are terminal sequences) or an empty language. A function of
    the grammar and the arguments, remembered for the last few grammars (``grammar.memo``):
    each engine's check of one input asks for them."""
    memo = _SENTENCES.setdefault((n, seed, max_depth), IdentityMemo(4))
    return list(memo.get(grammar, lambda g: tuple(_sentences(g, n, seed, max_depth))))


_DERIVABLE = IdentityMemo(4)


def _derivable(grammar: Grammar):
    """(the compiled grammar, its ``heights``) to derive sentences from, or None (a Lark
    grammar, an empty language); remembered: random and covering sentences both need them,
    and on a counted repetition of 32,767 they take a second."""
    def make(g: Grammar):
        from ..verify.derivations import heights
        from ..verify.symbols import compile_grammar
        if token_atoms(g.dialect):
            return None
        cg = compile_grammar(g)
        if cg.empty or cg.atoms is not None:
            return None
        return cg, heights(cg)
    return _DERIVABLE.get(grammar, make)


def _sentences(grammar: Grammar, n: int, seed: int, max_depth: int) -> list[bytes]:
    from ..verify.derivations import random_sentence
    made = _derivable(grammar)
    if made is None:
        return []
    cg, hts = made
    rng = random.Random(seed)
    out = dict.fromkeys(bytes(random_sentence(cg, rng, max_depth, hts)) for _ in range(n))
    return list(out)


def covering_texts(grammar: Grammar, max_bytes: int = COVER_BYTES, seed: int = 0) -> list[bytes]:
    """Sentences of ``grammar`` that take every alternative of every rule, and every
    optional and repetition both empty and not, at each place it is written, as far as
    ``max_bytes`` (bytes over all of them: work units) reach (``verify.derivations.
    covering_sentences``); none for a Lark grammar or an empty language. Random sentences
    rarely reach a state that needs a deep or unlikely choice (a non-empty whitespace after
    the ``[`` of one optional property, 17 rules down): these aim at each such choice."""
    from ..verify.derivations import covering_sentences
    made = _derivable(grammar)
    if made is None:
        return []
    cg, hts = made
    found = covering_sentences(cg, random.Random(seed), hts, max_bytes)
    return list(dict.fromkeys(bytes(s) for s in found))


_BYTE_SENTENCES = IdentityMemo(4)


def byte_sentences(grammar: Grammar) -> list[bytes]:
    """The texts the byte-vocabulary checks follow (llguidance's and llama.cpp's, ``judge.masks``):
    the covering sentences (``covering_texts``), then ``BYTE_SENTENCES`` random ones. A function
    of the grammar, remembered for the last few grammars (``grammar.memo``): both engines'
    checks of one input ask for them (0.1-0.3 s on a JSONSchemaBench grammar)."""
    return list(_BYTE_SENTENCES.get(grammar, lambda g: tuple(dict.fromkeys(
        covering_texts(g) + sentences(g, BYTE_SENTENCES, seed=0)))))


def token_paths(texts: Iterable[bytes], encode: Callable[[bytes], list[int]], max_tokens: int = TRAJECTORY_TOKENS,
                end: int | None = None) -> list[tuple[int, ...]]:
    """Each text as token ids (``encode``), cut at ``max_tokens``; ``end`` appended where the
    whole text fit. Texts the tokenizer cannot spell are skipped; duplicates kept once."""
    out: dict[tuple[int, ...], None] = {}
    for text in texts:
        try:
            ids = list(encode(text))
        except ValueError:
            continue
        whole = len(ids) <= max_tokens
        ids = ids[:max_tokens]
        if whole and end is not None:
            ids.append(end)
        if ids:
            out.setdefault(tuple(ids), None)
    return list(out)


def interleave(*sources: Sequence) -> list:
    """The items of ``sources`` taken in turn (a budget cut keeps some of each)."""
    out, k = [], 0
    while any(k < len(s) for s in sources):
        out.extend(s[k] for s in sources if k < len(s))
        k += 1
    return out


class TokenGroups:
    """A vocabulary's token ids grouped by first byte (``first_bytes[t]``, -1 for a token
    without bytes: a group of its own), built once per vocabulary."""

    def __init__(self, first_bytes: np.ndarray):
        self.first = first_bytes
        self.order = np.argsort(first_bytes, kind="stable")
        firsts = first_bytes[self.order]
        self.starts = np.flatnonzero(np.r_[True, firsts[1:] != firsts[:-1]])
        self.bounds = np.r_[self.starts, firsts.size]
        self.byte = firsts[self.starts]
        self.sizes = np.diff(self.bounds)
        self.group = np.empty(first_bytes.size, np.intp)  # each token's group
        self.group[self.order] = np.repeat(np.arange(self.starts.size), self.sizes)
        self._order32 = self.order.astype(np.int32)

    def __len__(self) -> int:
        return self.starts.size

    def members(self, g: int) -> np.ndarray:
        return self.order[self.bounds[g]:self.bounds[g + 1]]

    def allowed_counts(self, allowed: np.ndarray) -> np.ndarray:
        """Per group, how many of its tokens the boolean array ``allowed`` (by token id) marks
        (int64; counted over the marked tokens where they are few, as a walk's repeated masks
        between lexemes are, else group by group: the same counts)."""
        ids = np.flatnonzero(allowed)
        if ids.size * 8 <= allowed.size:
            return np.bincount(self.group[ids], minlength=self.starts.size)
        return np.add.reduceat(np.take(allowed.view(np.uint8), self._order32), self.starts, dtype=np.int64)


class Walker:
    """Seeded choices of a random walk through a mask (module docstring); ``end_ids`` end a
    walk."""

    TRIES = 24        # draws of a group before its allowed groups are listed
    FEW_WORDS = 512   # a mask with at most this many nonzero words is listed token by token

    def __init__(self, groups: TokenGroups, end_ids: Iterable[int], seed: int = 0):
        self.groups = groups
        self.end = frozenset(int(t) for t in end_ids)
        self.rng = random.Random(seed)

    def choose(self, row: np.ndarray, repeated: bool = False) -> int | None:
        """A token the packed mask ``row`` allows (int32 words, bit i of word i//32), None
        when it allows none: a first-byte group uniformly among those with an allowed token,
        then a token uniformly within it. An end token is one of the choices (tokens without
        bytes are a group of their own), so walks also stop where the language may. (A
        sparse mask is listed; a dense one is drawn from with rejection: the same law.)
        ``repeated``: the mask is the walk's previous one; the token is a way out
        (``_way_out``) where the mask splits a group."""
        if repeated:
            t = self._way_out(row)
            if t is not None:
                return t
        gs = self.groups
        n = gs.first.size
        words = np.flatnonzero(row)
        if words.size <= self.FEW_WORDS:
            bits = np.unpackbits(row[words].view(np.uint8), bitorder="little").reshape(-1, 32).astype(bool)
            ids = (words[:, None] * 32 + np.arange(32))[bits]
            ids = ids[ids < n]
            if ids.size == 0:
                return None
            firsts = gs.first[ids]
            live = np.unique(firsts)
            b = live[self.rng.randrange(live.size)]
            return self._within(ids[firsts == b], b)
        allowed = allowed_bits(row, n)
        for _ in range(self.TRIES):
            g = self.rng.randrange(len(gs))
            ids = gs.members(g)
            among = ids[allowed[ids]]
            if among.size:
                return self._within(among, gs.byte[g])
        live = np.flatnonzero(gs.allowed_counts(allowed))
        g = int(live[self.rng.randrange(live.size)])
        ids = gs.members(g)
        return self._within(ids[allowed[ids]], gs.byte[g])

    def _way_out(self, row: np.ndarray) -> int | None:
        """A token from a first-byte group the mask splits (some of its tokens allowed, some
        not: a lexeme or a rule may end inside them, as a closing quote ends a string), the
        group drawn with weight ``(1 - allowed share)**4`` (a group the mask mostly forbids,
        the quote's among the letters', comes first), the token uniformly among its allowed;
        None where the mask splits no group. Why: inside a repetition every token of a fully
        allowed group leads back to the same state, so the way out is among the split ones.
        (Weights by IEEE division and products only: the same draw on any machine.)"""
        gs = self.groups
        allowed = allowed_bits(row, gs.first.size)
        per = gs.allowed_counts(allowed)
        size = gs.sizes
        f = (size - per) / size
        w = np.where((per > 0) & (per < size), f * f * f * f, 0.0)
        cw = np.cumsum(w)
        if cw[-1] <= 0.0:
            return None
        g = min(int(np.searchsorted(cw, self.rng.random() * cw[-1], side="right")), len(gs) - 1)
        ids = gs.members(g)
        return self._within(ids[allowed[ids]], gs.byte[g])

    def _within(self, among: np.ndarray, first: int) -> int:
        if first < 0:  # tokens without bytes: an end token if one is allowed
            ends = sorted(t for t in among.tolist() if t in self.end)
            return ends[0] if ends else int(among.min())
        return int(among[self.rng.randrange(among.size)])


def allowed_bits(row: np.ndarray, n: int) -> np.ndarray:
    """The packed mask ``row`` (int32 words, bit i of word i//32) as ``n`` booleans by token id."""
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:n].view(bool)


def first_bytes(token_bytes: Sequence[bytes]) -> np.ndarray:
    """Each token's first byte, -1 for a token without bytes (special tokens)."""
    return np.array([b[0] if b else -1 for b in token_bytes], np.int16)


__all__ = ["BYTE_SENTENCES", "allowed_bits", "COVER_BYTES", "SENTENCES", "byte_sentences", "covering_texts", "TRAJECTORY_TOKENS", "TokenGroups", "WALK_TOKENS", "Walker", "first_bytes", "interleave", "sentences",
           "token_paths"]
