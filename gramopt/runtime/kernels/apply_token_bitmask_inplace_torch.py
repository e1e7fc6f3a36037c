"""Backend "torch": vectorized torch ops (any device, any float dtype). The packed words are
unpacked on the logits' device with one shift-and-mask (``unpack_bitmask``), then
``masked_fill_`` writes -inf; no Python loop over tokens."""

from __future__ import annotations

import torch

_SHIFTS: dict = {}


def _shifts(device) -> torch.Tensor:
    key = str(device)
    s = _SHIFTS.get(key)
    if s is None:
        s = torch.arange(32, dtype=torch.int32, device=device)
        _SHIFTS[key] = s
    return s


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """bool (…, vocab_size): bit i of word i // 32."""
    bits = (bitmask.to(torch.int32).unsqueeze(-1) >> _shifts(bitmask.device)) & 1
    return bits.reshape(*bitmask.shape[:-1], -1)[..., :vocab_size].bool()


def apply_token_bitmask_inplace_torch(logits: torch.Tensor, bitmask: torch.Tensor, vocab: int,
                                      rows: list[int]) -> None:
    """``logits`` (batch, V), ``bitmask`` (batch', words) int32, mask columns [0, vocab) of
    ``rows`` (see kernels/__init__.py for the semantics)."""
    if not rows or vocab <= 0:
        return
    covered = min(vocab, bitmask.shape[-1] * 32)
    idx = torch.as_tensor(rows, dtype=torch.long, device=logits.device)
    words = bitmask.to(logits.device, non_blocking=True)[idx]
    allowed = unpack_bitmask(words, covered)
    block = logits[idx, :vocab]
    block[:, :covered].masked_fill_(~allowed, float("-inf"))
    block[:, covered:] = float("-inf")
    logits[idx, :vocab] = block
