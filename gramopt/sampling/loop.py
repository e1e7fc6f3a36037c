"""Faithful decoding: ``decoding.generate`` with a pick that draws from p · Φ̂.

    samples = decode(model, lambda: Matcher(grammar, vocab), n=1000, faithful="onestep",
                     bos=bos, eos_ids=vocab.eos_ids, max_tokens=32, seed=0)

Rows decode in batches through the one generation loop (``gramopt.decoding.generate``: one
forward pass per step for the batch, KV cache); per row and step the matcher's mask gives
the candidates (``FaithfulEngine``), the estimator Φ̂, and the token is drawn from
p · Φ̂ over the candidates (estimator.py). ``faithful`` is an estimator or its name
(registry.py: "none"/"uniform", "onestep", "mc", "exact"); "none" is the masked sampler. A row
ends when it samples a stop token (``eos``), when its mask allows nothing (``dead``) or when
``max_tokens`` tokens were sampled and the text is not in the language (``budget``). The
matchers are rolled back afterwards, so the same ones serve every batch.

Deterministic: one seeded generator, one variate per sampled token in row order. Costs are
kept per phase (forward, mask + accept, Φ̂, draw) so estimators can be compared per token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..decoding.loop import EngineGuide, generate
from .estimator import Step, allowed_tokens, draw, reweight
from .registry import make_estimator


@dataclass
class Samples:
    tokens: list[list[int]] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    forward_s: float = 0.0
    mask_s: float = 0.0
    phi_s: float = 0.0
    draw_s: float = 0.0
    n_steps: int = 0  # tokens drawn (stop tokens included)

    def texts(self, vocab) -> list[bytes]:
        return [b"".join(vocab.token_bytes[t] for t in row) for row in self.tokens]

    @property
    def seconds(self) -> float:
        return self.forward_s + self.mask_s + self.phi_s + self.draw_s

    def per_token_us(self) -> dict[str, float]:
        n = max(1, self.n_steps)
        return {k: 1e6 * getattr(self, k) / n for k in ("forward_s", "mask_s", "phi_s", "draw_s", "seconds")}


def next_probs(logits: torch.Tensor, temperature: float) -> np.ndarray:
    """float64 softmax(logits / temperature) on the host."""
    return torch.softmax(logits.double() / temperature, dim=-1).cpu().numpy()


def candidates(matcher, n_vocab: int, buf, n_prefix: int, max_tokens: int, eos) -> np.ndarray:
    """The mask's tokens; only stop tokens once ``max_tokens`` tokens were sampled."""
    cand = allowed_tokens(matcher, n_vocab, buf)
    return cand[np.isin(cand, eos)] if n_prefix >= max_tokens else cand


class FaithfulEngine:
    """One row's matcher behind ``generate``'s engine interface, for faithful sampling: its
    mask is the matcher's, cut to the stop tokens once ``max_tokens`` tokens were sampled
    (``candidates``, kept for the draw); the row ends when it takes a stop token."""

    def __init__(self, matcher, n_vocab: int, max_tokens: int, eos: tuple):
        self.matcher, self.n_vocab, self.max_tokens, self.eos = matcher, n_vocab, max_tokens, eos
        self.candidates = np.zeros(0, np.int64)
        self.accepted = 0  # tokens the matcher accepted (stop tokens included): the rollback
        self.stopped = False
        self.fill_s = 0.0

    def fill(self, out_row: np.ndarray) -> None:
        t = time.perf_counter()
        self.candidates = candidates(self.matcher, self.n_vocab, out_row, self.accepted, self.max_tokens, self.eos)
        bits = np.zeros(32 * out_row.shape[0], np.uint8)
        bits[self.candidates] = 1
        out_row[:] = np.packbits(bits, bitorder="little").view(np.int32)
        self.fill_s += time.perf_counter() - t

    def accept(self, token: int) -> bool:
        ok = self.matcher.accept_token(token)
        if ok:
            self.accepted += 1
            self.stopped = token in self.eos
        return ok

    def is_terminated(self) -> bool:
        return self.stopped


class FaithfulPick:
    """``generate``'s pick for faithful sampling: per live row, in row order, Φ̂ over the
    row's candidates and one variate of ``rng`` to draw from p · Φ̂ (estimator.py)."""

    def __init__(self, engines, estimator, rng: np.random.Generator, *, bos: int, temperature: float):
        self.engines, self.estimator, self.rng = engines, estimator, rng
        self.bos, self.temperature = bos, temperature
        self.phi_s = 0.0
        self.draw_s = 0.0

    def __call__(self, rows, logits: torch.Tensor, buf, tokens) -> torch.Tensor:
        probs = next_probs(logits, self.temperature)
        nxt = [self.bos] * len(self.engines)
        for r in rows:
            e = self.engines[r]
            t1 = time.perf_counter()
            step = Step(e.matcher, tuple(tokens[r]), probs[r], e.candidates, e.eos)
            phi = self.estimator.phi(step)
            t2 = time.perf_counter()
            self.phi_s += t2 - t1
            nxt[r] = int(e.candidates[draw(reweight(step, phi), self.rng.random())])
            self.draw_s += time.perf_counter() - t2
        return torch.tensor(nxt, dtype=torch.long, device=logits.device)


def decode(model, new_matcher, *, n: int, faithful="none", bos: int, eos_ids, max_tokens: int,
           temperature: float = 1.0, seed: int = 0, batch: int = 64) -> Samples:
    """``n`` strings sampled from p · Φ̂ under the grammar (module docstring). ``new_matcher()``
    returns a matcher at the empty prefix. Each batch is one run of ``decoding.generate``
    with ``FaithfulPick``."""
    eos = tuple(int(e) for e in eos_ids)
    if isinstance(faithful, str):
        faithful = make_estimator(faithful, model=model, new_matcher=new_matcher, bos=bos, eos_ids=eos,
                                  max_tokens=max_tokens, temperature=temperature, seed=seed)
    rng = np.random.default_rng(seed)
    V = model.vocab_size
    matchers = [new_matcher() for _ in range(min(batch, n))]
    out = Samples()
    for lo in range(0, n, batch):
        engines = [FaithfulEngine(m, V, max_tokens, eos) for m in matchers[:min(batch, n - lo)]]
        pick = FaithfulPick(engines, faithful, rng, bos=bos, temperature=temperature)
        try:
            gen = generate(model, EngineGuide(engines), steps=max_tokens + 1, n_words=(V + 31) // 32, bos=bos,
                           overlap=False, pick=pick)
        finally:
            for e in engines:
                if e.accepted:
                    e.matcher.rollback(e.accepted)
        for row, end in zip(gen.tokens, gen.finished):
            out.tokens.append(row[:-1] if end == "eos" else row)
            out.finished.append("dead" if end == "dead" and len(row) < max_tokens else
                                "eos" if end == "eos" else "budget")
            out.n_steps += len(row)
        out.forward_s += sum(gen.forward_s)
        out.mask_s += sum(e.fill_s for e in engines) + sum(gen.accept_s)
        out.phi_s += pick.phi_s
        out.draw_s += pick.draw_s
    return out
