"""Fit the tiny transformer (runtime/model.py) on token sequences: next-token cross-entropy.

Used by the measurement harness and tests to get a model with real, non-uniform preferences in
seconds on CPU (nothing downloaded; weights come from a seeded initialisation and the corpus).
Each sequence is trained as BOS · tokens · EOS; sequences of one batch are right-padded and the
padding positions carry no loss. Deterministic for a seed (CPU).
"""

from __future__ import annotations

import numpy as np
import torch

from ..decoding.model import TinyCausalLM


def fit(model: TinyCausalLM, sequences, *, bos: int, eos: int, steps: int = 300, batch: int = 64,
        lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Train ``model`` in place; returns the loss per step."""
    seqs = [[bos, *s, eos] for s in sequences]
    if not seqs:
        raise ValueError("no training sequences")
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    model.train()
    try:
        for _ in range(steps):
            pick = rng.integers(0, len(seqs), batch)
            width = max(len(seqs[i]) for i in pick)
            ids = torch.full((batch, width), eos, dtype=torch.long)
            keep = torch.zeros((batch, width - 1), dtype=torch.bool)
            for j, i in enumerate(pick):
                s = seqs[i]
                ids[j, :len(s)] = torch.tensor(s)
                keep[j, :len(s) - 1] = True
            logits = model.sequence_logits(ids[:, :-1].to(model.device))
            loss = torch.nn.functional.cross_entropy(logits[keep], ids[:, 1:].to(model.device)[keep])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        model.eval()
    return losses
