"""The packed token bitmask shared by every backend: bit i of int32 word i//32 is token i
(xgrammar's and vLLM's layout).

    write_row(words, out, row)   copy a mask into a numpy or torch (any device) bitmask row
    allowed_ids(words, n)        the token ids whose bit is set, below n
"""

from __future__ import annotations

import numpy as np


def write_row(words: np.ndarray, out, row: int = 0) -> None:
    """Copy the int32 mask ``words`` into ``out`` (1-D, or (batch, words) at ``row``): a numpy
    array, or a torch tensor on any device. Words past the mask are cleared; a row shorter
    than the mask is a ValueError."""
    words = words.view(np.int32)
    if isinstance(out, np.ndarray):
        target = out if out.ndim == 1 else out[row]
        if target.shape[0] < len(words):
            raise ValueError(f"bitmask has {target.shape[0]} words, need {len(words)}")
        target[:len(words)] = words
        target[len(words):] = 0
    else:  # torch
        import torch
        target = out if out.dim() == 1 else out[row]
        target[:len(words)].copy_(torch.from_numpy(words.copy()).to(target.device))
        if target.shape[0] > len(words):
            target[len(words):] = 0


def allowed_ids(words: np.ndarray, n: int) -> np.ndarray:
    """Ids below ``n`` whose bit is set in the packed mask ``words``."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
    return np.nonzero(bits[:n])[0]
