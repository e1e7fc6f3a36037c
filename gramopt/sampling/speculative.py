"""Speculative decoding under a grammar, verified against the Φ-reweighted target.

A round: the draft model proposes up to ``gamma`` tokens from its own masked (optionally
reweighted) distribution q̃, advancing the matcher; the matcher is rolled back; one target call
gives p(· | x), p(· | x·d1), …; position by position the verifier forms the target's sampling
distribution p̃ = p · Φ̂ over the mask (estimator.py), accepts d_i with probability
min(1, p̃(d_i) / q̃(d_i)), and at the first rejection draws from the residual
∝ max(0, p̃ − q̃) and ends the round; when every draft token is kept it draws one more token
from p̃. Leviathan et al.'s argument makes each emitted token distributed as p̃ given the
prefix, whatever the draft: with exact Φ the output is μ*, and with Φ̂ ≡ 1 it is μ_proj —
a verifier that checks against the masked target keeps local projection's bias however good
the draft is.

The draft's and the verifier's masks at a position come from the same matcher state, so q̃ and
p̃ share their support. ``SpecStats`` counts rounds (target calls), drafted and accepted tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .estimator import Step, draw, reweight
from .loop import Samples, candidates, next_probs
from .uniform import Uniform


@dataclass
class SpecStats:
    rounds: int = 0      # target calls
    drafted: int = 0     # draft tokens proposed
    accepted: int = 0    # draft tokens kept
    tokens: int = 0      # tokens emitted (stop tokens included)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_call(self) -> float:
        return self.tokens / self.rounds if self.rounds else 0.0


def logits_after_each(model, ids: list[int], first: int) -> torch.Tensor:
    """Next-token logits after ``ids[:j+1]`` for j = first … len(ids)−1, (n, V): one call when the
    model has ``sequence_logits``, else one call per position."""
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    with torch.no_grad():
        if hasattr(model, "sequence_logits"):
            return model.sequence_logits(x)[0, first:]
        return torch.cat([model(x[:, :j + 1], model.new_cache(1)) for j in range(first, len(ids))])


def speculative_decode(target, draft, new_matcher, *, n: int, target_phi, draft_phi=None, gamma: int = 4,
                       bos: int, eos_ids, max_tokens: int, temperature: float = 1.0,
                       seed: int = 0) -> tuple[Samples, SpecStats]:
    """``n`` strings from the target's Φ̂-reweighted distribution (module docstring)."""
    draft_phi = draft_phi or Uniform()
    eos = tuple(int(e) for e in eos_ids)
    rng = np.random.default_rng(seed)
    V = target.vocab_size
    if draft.vocab_size != V:
        raise ValueError(f"draft has {draft.vocab_size} logits, target {V}")
    buf = np.zeros((V + 31) // 32, np.int32)
    m = new_matcher()
    out, stats = Samples(), SpecStats()
    for _ in range(n):
        prefix: list[int] = []
        status = None
        held = 0  # tokens the matcher holds
        try:
            while status is None:
                # draft
                drafted, qs = [], []
                for _ in range(gamma):
                    cand = candidates(m, V, buf, len(prefix) + len(drafted), max_tokens, eos)
                    if len(cand) == 0:
                        break
                    with torch.no_grad():
                        ids = torch.tensor([[bos, *prefix, *drafted]], dtype=torch.long, device=draft.device)
                        pd = next_probs(draft(ids, draft.new_cache(1)), temperature)[0]
                    step = Step(m, tuple(prefix + drafted), pd, cand, eos)
                    q = reweight(step, draft_phi.phi(step))
                    y = int(cand[draw(q, rng.random())])
                    m.accept_token(y)
                    held += 1
                    drafted.append(y)
                    qs.append((cand, q))
                    if y in eos:
                        break
                if drafted:
                    m.rollback(len(drafted))
                    held -= len(drafted)
                stats.drafted += len(drafted)
                # verify: one target call for every drafted position (+ the bonus one)
                body = [t for t in drafted if t not in eos]
                pt = next_probs(logits_after_each(target, [bos, *prefix, *body], len(prefix)), temperature)
                stats.rounds += 1
                for i in range(len(drafted) + 1):
                    cand = candidates(m, V, buf, len(prefix), max_tokens, eos)
                    if len(cand) == 0:
                        status = "dead" if len(prefix) < max_tokens else "budget"
                        break
                    step = Step(m, tuple(prefix), pt[i], cand, eos)
                    p = reweight(step, target_phi.phi(step))
                    if i < len(drafted):
                        dc, dq = qs[i]
                        if not np.array_equal(dc, cand):
                            raise AssertionError("draft and verifier masks differ at one position")
                        j = int(np.searchsorted(cand, drafted[i]))
                        if rng.random() * dq[j] < p[j]:
                            y, kept = drafted[i], True
                            stats.accepted += 1
                        else:
                            resid = np.maximum(p - dq, 0.0)
                            y, kept = int(cand[draw(resid if resid.sum() > 0 else p, rng.random())]), False
                    else:
                        y, kept = int(cand[draw(p, rng.random())]), False
                    if not m.accept_token(y):
                        raise RuntimeError(f"the matcher refused token {y}, which its mask allowed")
                    held += 1
                    stats.tokens += 1
                    out.n_steps += 1
                    if y in eos:
                        status = "eos"
                        break
                    prefix.append(y)
                    if not kept:
                        break
        finally:
            if held:
                m.rollback(held)
        out.tokens.append(prefix)
        out.finished.append(status)
    return out, stats
