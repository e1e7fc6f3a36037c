"""The Φ interface: per-candidate future validity, and the reweighting it drives.

Masking each step and renormalising samples the locally projected distribution μ_proj. The
model conditioned on the grammar, μ*(s) ∝ p(s·EOS) · [s ∈ L], is sampled exactly token by
token by the Doob h-transform

    q(y | x) ∝ p(y | x) · Φ(x·y),    Φ(x) = Pr_p[the model's continuation of x ends in L],

with Φ(x·EOS) = [x ∈ L] (the mask allows EOS exactly then). Proof: the product of the q's
along s·EOS telescopes to p(s·EOS) / Φ(ε). An estimator returns Φ̂ over the mask's candidates;
the sampler draws from p·Φ̂ restricted to them. A constant Φ̂ cancels in the normalisation, so
``Uniform`` (Φ̂ ≡ 1) is today's masked sampler.

Estimators see the decoding state only through ``Step``: the matcher at the prefix (its API:
``accept_token``, ``fill_next_token_bitmask``, ``rollback``, ``is_terminated``; any backend with
it plugs in) and the model's next-token distribution; they leave the matcher as they found it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class Step:
    """One decoding step of one row: ``matcher`` after ``prefix`` (token ids, no BOS),
    ``probs`` the model's next-token distribution over its whole output (float64, sums to
    1: the unconstrained p, after temperature), ``candidates`` the ids the mask allows
    (ascending), ``eos_ids`` the stop tokens."""

    matcher: object
    prefix: tuple[int, ...]
    probs: np.ndarray
    candidates: np.ndarray
    eos_ids: tuple[int, ...]


class Estimator(Protocol):
    """Φ̂(prefix·y) ≥ 0 for each y in ``step.candidates`` (same order)."""

    name: str

    def phi(self, step: Step) -> np.ndarray: ...


def allowed_tokens(matcher, n_vocab: int, buf: np.ndarray | None = None) -> np.ndarray:
    """Ids the matcher's mask allows now (through ``fill_next_token_bitmask`` only)."""
    words = (n_vocab + 31) // 32
    if buf is None or buf.shape[0] < words:
        buf = np.zeros(words, np.int32)
    matcher.fill_next_token_bitmask(buf)
    bits = np.unpackbits(buf[:words].view(np.uint8), bitorder="little")[:n_vocab]
    return np.flatnonzero(bits)


def reweight(step: Step, phi: np.ndarray) -> np.ndarray:
    """q over ``step.candidates``: ∝ probs · Φ̂. When Φ̂ gives no candidate positive weight
    (an estimate of zero everywhere, or probabilities that underflowed) the masked
    distribution is used, and failing that the uniform one over the candidates."""
    p = step.probs[step.candidates]
    w = p * np.asarray(phi, np.float64)
    total = w.sum()
    if not (total > 0 and np.isfinite(total)):
        w, total = p, p.sum()
        if not total > 0:
            return np.full(len(p), 1.0 / len(p))
    return w / total


def draw(q: np.ndarray, u: float) -> int:
    """Index of ``q`` (a distribution) at uniform variate ``u`` (inverse CDF)."""
    c = np.cumsum(q)
    return int(min(np.searchsorted(c, u * c[-1], side="right"), len(q) - 1))
