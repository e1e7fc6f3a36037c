"""``apply_token_bitmask_inplace``: set to -inf every logit whose token bit is 0, in place.

    apply_token_bitmask_inplace(logits, bitmask, vocab_size=None, indices=None, backend="auto")

One kernel per file, picked by ``backend`` (xgrammar's layout and semantics):

    backend   file                                     where
    --------  ---------------------------------------  ------------------------------------
    "cpu"     apply_token_bitmask_inplace_cpu.py       numba loop over the words, fused (no
                                                       unpacked mask), float32/float64 on CPU
    "torch"   apply_token_bitmask_inplace_torch.py     vectorized torch ops, any device/dtype
    "triton"  apply_token_bitmask_inplace_triton.py    one fused Triton kernel on CUDA
    "auto"    cpu for float32/float64 CPU logits; triton for CUDA logits contiguous in the
              vocabulary when the triton package imports; torch otherwise

Semantics, for every backend: ``logits`` is (V,) or (batch, V); ``bitmask`` (words,) or
(batch, words) int32, bit j of word j // 32 = token j allowed. Row b of the bitmask masks row
b of the logits, for every b, or for b in ``indices`` only. Columns ``j < vocab_size``
(default: all of V) are set to -inf when their bit is 0 or lies beyond the bitmask's
32·words bits; columns from ``vocab_size`` on are left alone (padding the caller owns).
"""

from __future__ import annotations

import functools

BACKENDS = ("auto", "cpu", "torch", "triton")


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size: int | None = None, indices=None,
                                backend: str = "auto") -> None:
    import numpy as np
    import torch
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if isinstance(bitmask, np.ndarray):
        bitmask = torch.from_numpy(bitmask)
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.dim() not in (1, 2) or bitmask.dim() not in (1, 2):
        raise ValueError("logits must be (V,) or (batch, V) and bitmask (words,) or (batch, words)")
    one_row = logits.dim() == 1
    logits2 = logits.unsqueeze(0) if one_row else logits
    bitmask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if bitmask2.shape[0] < logits2.shape[0] and indices is None:
        if bitmask2.shape[0] != 1:
            raise ValueError(f"bitmask has {bitmask2.shape[0]} rows, logits {logits2.shape[0]}")
        bitmask2 = bitmask2.expand(logits2.shape[0], -1)
    vocab = logits2.shape[-1] if vocab_size is None else min(int(vocab_size), logits2.shape[-1])
    rows = list(range(logits2.shape[0])) if indices is None else [int(i) for i in indices]
    if rows and (min(rows) < 0 or max(rows) >= min(logits2.shape[0], bitmask2.shape[0])):
        raise ValueError("an index is outside the logits' or the bitmask's rows")
    if backend == "auto":
        backend = _auto(logits)
    if backend == "cpu":
        from .apply_token_bitmask_inplace_cpu import apply_token_bitmask_inplace_cpu as fn
    elif backend == "triton":
        from .apply_token_bitmask_inplace_triton import apply_token_bitmask_inplace_triton as fn
    else:
        from .apply_token_bitmask_inplace_torch import apply_token_bitmask_inplace_torch as fn
    fn(logits2, bitmask2, vocab, rows)


def _auto(logits) -> str:
    """The backend "auto" picks. On an H100 (benchmarks/cuda_paths.py, results in
    benchmarks/results/cuda-paths-2026-11-27) the Triton kernel was exact on every shape
    and 2.6-3.9× faster than the torch ops (V 128,256 and 151,936, batch 1-256, float32
    and bfloat16)."""
    import torch
    if logits.device.type == "cpu":
        return "cpu" if logits.dtype in (torch.float32, torch.float64) else "torch"
    if logits.device.type == "cuda" and logits.stride(-1) == 1 and _has_triton():
        return "triton"
    return "torch"


@functools.lru_cache(maxsize=None)
def _has_triton() -> bool:
    """Whether triton imports: asked once per process (``auto`` runs on every decoding step,
    and a failed import searches the path each time)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True
