"""The faithful decoding loop: model forward, grammar mask, Φ reweighting, sampling.

    samples = decode(model, lambda: Matcher(grammar, vocab), n=1000, faithful="onestep",
                     bos=bos, eos_ids=vocab.eos_ids, max_tokens=32, seed=0)

Rows decode in batches (one forward pass per step for the batch, KV cache); per row and step
the matcher's mask gives the candidates, the estimator Φ̂, and the token is drawn from
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


def decode(model, new_matcher, *, n: int, faithful="none", bos: int, eos_ids, max_tokens: int,
           temperature: float = 1.0, seed: int = 0, batch: int = 64) -> Samples:
    """``n`` strings sampled from p · Φ̂ under the grammar (module docstring). ``new_matcher()``
    returns a matcher at the empty prefix."""
    eos = tuple(int(e) for e in eos_ids)
    if isinstance(faithful, str):
        faithful = make_estimator(faithful, model=model, new_matcher=new_matcher, bos=bos, eos_ids=eos,
                                  max_tokens=max_tokens, temperature=temperature, seed=seed)
    estimator = faithful
    rng = np.random.default_rng(seed)
    V = model.vocab_size
    buf = np.zeros((V + 31) // 32, np.int32)
    matchers = [new_matcher() for _ in range(min(batch, n))]
    out = Samples()
    device = model.device
    for lo in range(0, n, batch):
        b = min(batch, n - lo)
        prefixes: list[list[int]] = [[] for _ in range(b)]
        finished = ["budget"] * b
        accepted = [0] * b
        active = [True] * b
        past = model.new_cache(b)
        ids = torch.full((b, 1), bos, dtype=torch.long, device=device)
        try:
            for _ in range(max_tokens + 1):
                t0 = time.perf_counter()
                probs = next_probs(model(ids, past), temperature)
                out.forward_s += time.perf_counter() - t0
                nxt = [bos] * b
                for r in range(b):
                    if not active[r]:
                        continue
                    m = matchers[r]
                    t0 = time.perf_counter()
                    cand = candidates(m, V, buf, len(prefixes[r]), max_tokens, eos)
                    t1 = time.perf_counter()
                    out.mask_s += t1 - t0
                    if len(cand) == 0:
                        finished[r] = "dead" if len(prefixes[r]) < max_tokens else "budget"
                        active[r] = False
                        continue
                    step = Step(m, tuple(prefixes[r]), probs[r], cand, eos)
                    phi = estimator.phi(step)
                    t2 = time.perf_counter()
                    out.phi_s += t2 - t1
                    y = int(cand[draw(reweight(step, phi), rng.random())])
                    t3 = time.perf_counter()
                    out.draw_s += t3 - t2
                    if not m.accept_token(y):
                        raise RuntimeError(f"the matcher refused token {y}, which its mask allowed")
                    out.mask_s += time.perf_counter() - t3
                    accepted[r] += 1
                    out.n_steps += 1
                    if y in eos:
                        finished[r] = "eos"
                        active[r] = False
                    else:
                        prefixes[r].append(y)
                        nxt[r] = y
                if not any(active):
                    break
                ids = torch.tensor(nxt, dtype=torch.long, device=device).view(b, 1)
        finally:
            for r in range(b):
                if accepted[r]:
                    matchers[r].rollback(accepted[r])
        out.tokens.extend(prefixes)
        out.finished.extend(finished)
    return out
