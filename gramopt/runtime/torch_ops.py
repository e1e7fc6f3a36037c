"""Masks on tensors (torch is optional: this module is imported only when used).

``apply_token_bitmask(logits, bitmask)`` sets to -inf every logit whose bit is 0, in place,
on whatever device the logits live (CPU or CUDA): the packed int32 words are unpacked with
one vectorized shift-and-mask (``(words[..., None] >> arange(32)) & 1``), no Python loop.
Without ``indices`` it goes through ``kernels.apply_token_bitmask_inplace`` (backend "auto":
the fused numba loop for float32/float64 CPU logits, these torch ops otherwise).
``GrammarLogitsProcessor`` is a Hugging Face-style logits processor over Matchers.
"""

from __future__ import annotations

import numpy as np
import torch

from .kernels import apply_token_bitmask_inplace
from .kernels.apply_token_bitmask_inplace_torch import unpack_bitmask  # public here too


def apply_token_bitmask(logits: torch.Tensor, bitmask, indices=None) -> torch.Tensor:
    """Mask ``logits`` (V) or (batch, V) in place with packed ``bitmask`` (words) or
    (batch, words) (numpy or torch; moved to the logits' device). ``indices`` picks the
    rows of a batch to mask. Logits columns beyond the mask's bits are masked too."""
    if isinstance(bitmask, np.ndarray):
        bitmask = torch.from_numpy(bitmask)
    if indices is None and bitmask.dtype == torch.int32:
        apply_token_bitmask_inplace(logits, bitmask)  # fused loop on CPU float logits
        return logits
    bitmask = bitmask.to(logits.device, non_blocking=True)
    vocab = logits.shape[-1]
    allowed = unpack_bitmask(bitmask, min(vocab, bitmask.shape[-1] * 32))
    if allowed.shape[-1] < vocab:
        pad = torch.zeros(*allowed.shape[:-1], vocab - allowed.shape[-1], dtype=torch.bool,
                          device=logits.device)
        allowed = torch.cat([allowed, pad], dim=-1)
    if indices is not None:
        idx = torch.as_tensor(indices, device=logits.device, dtype=torch.long)
        if allowed.dim() == 1:
            allowed = allowed.unsqueeze(0).expand(len(idx), -1)
        elif allowed.shape[0] != len(idx):
            allowed = allowed[idx]
        rows = logits[idx]
        logits[idx] = rows.masked_fill(~allowed, float("-inf"))
        return logits
    logits.masked_fill_(~allowed, float("-inf"))
    return logits


class GrammarLogitsProcessor:
    """``processor(input_ids, scores) -> scores`` as in transformers' LogitsProcessor.

    One Matcher per batch row; on each call, the tokens appended since the last call are
    accepted, then the rows' masks are filled and applied. ``prompt_len`` (per row or one
    int) marks where generation starts; by default the first call's length.

    A row is finished once its matcher accepted a stop token: the tokens a generation loop
    appends to it afterwards (padding, often the EOS id again) are not the grammar's, so
    they are not accepted, and its scores pass through unmasked — a row of all ``-inf``
    would make the whole batch's sampling probabilities NaN.
    """

    def __init__(self, matchers, prompt_len=None):
        self.matchers = list(matchers) if isinstance(matchers, (list, tuple)) else [matchers]
        self.prompt_len = prompt_len
        self._seen = None
        n_words = self.matchers[0].vocab.n_words
        self._buf = np.zeros((len(self.matchers), n_words), np.int32)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[-1]
        if input_ids.shape[0] != len(self.matchers):
            raise ValueError(f"batch of {input_ids.shape[0]} rows for {len(self.matchers)} matchers")
        if self._seen is None:
            self._seen = [n] * len(self.matchers) if self.prompt_len is None else (
                list(self.prompt_len) if isinstance(self.prompt_len, (list, tuple))
                else [self.prompt_len] * len(self.matchers))
        ids = input_ids.detach().to("cpu")
        for r, m in enumerate(self.matchers):
            for t in ids[r, self._seen[r]:n].tolist():
                if m.is_terminated():
                    break  # padding after the row's stop token
                if not m.accept_token(t):
                    raise ValueError(f"row {r}: token {t} is not allowed by the grammar")
            self._seen[r] = n
            if m.is_terminated():
                self._buf[r] = -1  # every bit set: the row's scores pass through
            else:
                m.fill_next_token_bitmask(self._buf, r)
        return apply_token_bitmask(scores, self._buf)
