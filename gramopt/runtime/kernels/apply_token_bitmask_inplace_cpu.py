"""Backend "cpu": one fused numba loop over the packed words of float32/float64 CPU logits.

Per row, a word of all ones (-1, the common case in a permissive mask) is skipped; other
words clear their zero bits' logits to -inf one by one. Nothing is unpacked or allocated,
and the loop runs without the GIL, so it can overlap a mask fill on another thread.
"""

from __future__ import annotations

import numpy as np
import torch

from ..jit import kernel


@kernel(nrt=True)
def _apply(logits, bitmask, rows, vocab):
    ninf = -np.inf
    covered = min(vocab, bitmask.shape[1] * 32)
    for r in rows:
        row = logits[r]
        words = bitmask[r]
        for w in range((covered + 31) // 32):
            word = words[w]
            if word == -1:
                continue
            base = w * 32
            top = min(32, covered - base)
            for b in range(top):
                if (word >> b) & 1 == 0:
                    row[base + b] = ninf
        for j in range(covered, vocab):
            row[j] = ninf


def apply_token_bitmask_inplace_cpu(logits: torch.Tensor, bitmask: torch.Tensor, vocab: int,
                                    rows: list[int]) -> None:
    """``logits`` (batch, V) float32/float64 on CPU (any strides: a non-contiguous tensor is
    masked through a contiguous copy written back), ``bitmask`` (batch', words) int32."""
    if logits.device.type != "cpu" or logits.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"backend 'cpu' takes float32/float64 CPU logits, got {logits.dtype} on "
                         f"{logits.device}: use backend 'torch'")
    if not rows or vocab <= 0:
        return
    words = bitmask.to("cpu").contiguous().numpy()
    target = logits if logits.is_contiguous() else logits.contiguous()
    _apply(target.numpy(), words, np.asarray(rows, np.int64), vocab)
    if target is not logits:
        logits.copy_(target)
