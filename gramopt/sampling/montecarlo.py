"""``MonteCarlo(k, horizon)``: Φ by rollouts with the model, importance-weighted.

For each candidate y, ``k`` rollouts continue x·y for up to ``horizon`` tokens with the *masked*
model (the proposal q(y' | z) = p(y' | z) / Z(z) over the allowed y', Z(z) their total
probability). A rollout's weight is the product of the Z's along it, so

    E_q[Π_t Z(z_t)] = Σ_paths Π_t p(y_t | z_t) = Pr_p[the continuation ends in L]

when the rollout runs to its stop token: unbiased for Φ(x·y) wherever the mask allows exactly
the viable tokens (every allowed prefix can be completed, as in a finite or length-bounded
grammar), and never 0 there — unlike counting which unconstrained rollouts happen to stay
valid. A rollout stopped by the horizon keeps the weight so far (Φ of the rest taken as 1): an
upward bias that shrinks as the horizon grows. Under a token budget (``max_tokens``, as in the
decoding loop) a rollout that reaches it may only stop: its last factor is p(EOS), or 0.
``MonteCarlo(k, 1)`` is OneStep with the true next-step distribution (one forward pass)
instead of the current one.

Cost per decoded token: ``horizon + 1`` forward passes over k·|candidates| rows and one mask per
row and rollout step. The rollout matchers are scratch matchers (``new_matcher()``) brought to
the prefix by rollback and accept; the decoding matcher is not touched.
"""

from __future__ import annotations

import numpy as np
import torch

from .estimator import Step, allowed_tokens, draw


class MonteCarlo:
    def __init__(self, model, new_matcher, *, k: int = 8, horizon: int = 8, bos: int,
                 temperature: float = 1.0, seed: int = 0, max_tokens: int | None = None):
        if k < 1 or horizon < 0:
            raise ValueError("k must be >= 1 and horizon >= 0")
        self.model = model
        self.new_matcher = new_matcher
        self.k = k
        self.horizon = horizon
        self.bos = bos
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.name = f"mc(k={k},h={horizon})"
        self.rng = np.random.default_rng(seed)
        self._pool: list[list] = []  # [matcher, its prefix as a list]
        self._buf: np.ndarray | None = None

    def _scratch(self, rows: int, prefix: tuple[int, ...]) -> list:
        while len(self._pool) < rows:
            self._pool.append([self.new_matcher(), []])
        out = []
        for entry in self._pool[:rows]:
            m, cur = entry
            common = 0
            while common < min(len(cur), len(prefix)) and cur[common] == prefix[common]:
                common += 1
            if len(cur) > common:
                m.rollback(len(cur) - common)
                del cur[common:]
            for t in prefix[common:]:
                if not m.accept_token(t):
                    raise RuntimeError(f"a scratch matcher refused token {t} of the decoded prefix")
                cur.append(t)
            out.append(m)
        return out

    def phi(self, step: Step) -> np.ndarray:
        cand = step.candidates
        eos = step.eos_ids
        out = np.ones(len(cand))
        live_c = np.flatnonzero(~np.isin(cand, eos))
        if len(live_c) == 0 or self.horizon == 0:
            return out
        firsts = np.repeat(cand[live_c], self.k)
        R = len(firsts)
        matchers = self._scratch(R, step.prefix)
        V = len(step.probs)
        if self._buf is None or self._buf.shape[0] < (V + 31) // 32:
            self._buf = np.zeros((V + 31) // 32, np.int32)
        extra = [0] * R  # tokens accepted beyond the prefix, per row
        try:
            for r, y in enumerate(firsts.tolist()):
                if not matchers[r].accept_token(y):
                    raise RuntimeError(f"the matcher refused token {y}, which its mask allowed")
                extra[r] = 1
            weight = np.ones(R)
            live = np.ones(R, bool)
            device = self.model.device
            ids = torch.tensor([[self.bos, *step.prefix, y] for y in firsts.tolist()], dtype=torch.long,
                               device=device)
            past = self.model.new_cache(R)
            for t in range(self.horizon):
                at_budget = self.max_tokens is not None and len(step.prefix) + 1 + t >= self.max_tokens
                with torch.no_grad():
                    logits = self.model(ids, past)
                p = torch.softmax(logits.double() / self.temperature, dim=-1).cpu().numpy()
                nxt = np.full(R, self.bos)
                for r in np.flatnonzero(live):
                    allowed = allowed_tokens(matchers[r], V, self._buf)
                    if at_budget:
                        allowed = allowed[np.isin(allowed, eos)]
                    pa = p[r, allowed]
                    z = pa.sum()
                    weight[r] *= z
                    if not z > 0:
                        live[r] = False
                        continue
                    y = int(allowed[draw(pa / z, self.rng.random())])
                    if y in eos:
                        live[r] = False
                        continue
                    if not matchers[r].accept_token(y):
                        raise RuntimeError(f"the matcher refused token {y}, which its mask allowed")
                    extra[r] += 1
                    nxt[r] = y
                if not live.any():
                    break
                ids = torch.as_tensor(nxt, dtype=torch.long, device=device).view(R, 1)
        finally:
            for r in range(R):
                if extra[r]:
                    matchers[r].rollback(extra[r])
        out[live_c] = weight.reshape(len(live_c), self.k).mean(axis=1)
        return out
