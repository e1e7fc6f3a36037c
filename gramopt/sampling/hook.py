"""Faithful sampling inside ``gramopt.decoding.loop.generate``: its ``reweight`` hook.

    hook = FaithfulLogits([e.matcher for e in guide.engines], "onestep", eos_ids=vocab.eos_ids)
    generate(model, guide, steps=64, n_words=vocab.n_words, reweight=hook)

``generate`` calls the hook once per step with the raw logits (before the mask), the rows'
packed masks and the tokens decoded so far; the hook adds T · log Φ̂(y) to each allowed y's
logit, so that after the mask and softmax(· / T) the row samples from p_T(y) · Φ̂(y), the same
distribution ``gramopt.sampling.decode`` draws from (estimator.py). Rows where Φ̂ gives no
candidate positive weight are left as they are (the masked distribution, as in ``reweight``).
A ``top_k`` in ``Sampling`` then cuts the reweighted logits, not the model's.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .estimator import Step
from .registry import make_estimator


class FaithfulLogits:
    def __init__(self, matchers, faithful="onestep", *, eos_ids, temperature: float = 1.0, **estimator_args):
        self.matchers = list(matchers)
        self.estimator = make_estimator(faithful, eos_ids=eos_ids, temperature=temperature, **estimator_args) \
            if isinstance(faithful, str) else faithful
        self.eos_ids = tuple(int(e) for e in eos_ids)
        self.temperature = float(temperature)
        self.phi_s = 0.0

    def __call__(self, rows, logits: torch.Tensor, bitmask: np.ndarray, tokens) -> None:
        t0 = time.perf_counter()
        rows = list(rows)
        V = logits.shape[-1]
        probs = torch.softmax(logits[rows].double() / self.temperature, dim=-1).cpu().numpy()
        for i, r in enumerate(rows):
            bits = np.unpackbits(np.ascontiguousarray(bitmask[r]).view(np.uint8), bitorder="little")[:V]
            cand = np.flatnonzero(bits)
            if len(cand) == 0:
                continue
            step = Step(self.matchers[r], tuple(tokens[r]), probs[i], cand, self.eos_ids)
            phi = np.asarray(self.estimator.phi(step), np.float64)
            if not (probs[i][cand] * phi).sum() > 0:
                continue
            with np.errstate(divide="ignore"):
                add = self.temperature * np.log(phi)
            idx = torch.as_tensor(cand, device=logits.device)
            logits[r, idx] = logits[r, idx] + torch.as_tensor(add, dtype=logits.dtype, device=logits.device)
        self.phi_s += time.perf_counter() - t0
