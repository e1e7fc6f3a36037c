"""Backend "triton": one fused Triton kernel for CUDA logits (needs the ``triton`` package).

Grid (row, block of BLOCK tokens): each program loads its tokens' words, extracts the bits
and stores -inf where a bit is 0 (or lies beyond the bitmask) and the column is below
``vocab``. Checked bit for bit against the plain definition on CPU under Triton's
interpreter (``TRITON_INTERPRET=1``: tests/test_runtime_triton.py runs ``launch``) and on
CUDA by tests/test_runtime_serving.py when a device is there (run on an H100 on 2026-11-27,
with benchmarks/cuda_paths.py's 28 shapes): ``backend="auto"`` picks it for CUDA logits.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _apply_kernel(logits_ptr, bitmask_ptr, rows_ptr, vocab, n_words, logits_stride, bitmask_stride,
                  BLOCK: tl.constexpr):
    pid_row = tl.program_id(0)
    pid_blk = tl.program_id(1)
    row = tl.load(rows_ptr + pid_row)
    cols = pid_blk * BLOCK + tl.arange(0, BLOCK)
    in_vocab = cols < vocab
    word_idx = cols // 32
    has_word = word_idx < n_words
    words = tl.load(bitmask_ptr + row * bitmask_stride + word_idx, mask=in_vocab & has_word, other=0)
    bit = (words >> (cols % 32)) & 1
    blocked = in_vocab & (bit == 0)
    tl.store(logits_ptr + row * logits_stride + cols, float("-inf"), mask=blocked)


def apply_token_bitmask_inplace_triton(logits: torch.Tensor, bitmask: torch.Tensor, vocab: int,
                                       rows: list[int]) -> None:
    if logits.device.type != "cuda":
        raise ValueError("backend 'triton' takes CUDA logits")
    launch(logits, bitmask, vocab, rows)


def launch(logits: torch.Tensor, bitmask: torch.Tensor, vocab: int, rows: list[int]) -> None:
    """The kernel over ``rows`` of ``logits`` on their device (CUDA, or CPU under Triton's
    interpreter)."""
    if not rows or vocab <= 0:
        return
    if logits.stride(-1) != 1:
        raise ValueError("backend 'triton' needs logits contiguous in the vocabulary dimension")
    words = bitmask.to(logits.device).contiguous()
    idx = torch.as_tensor(rows, dtype=torch.int32, device=logits.device)
    BLOCK = 4096
    grid = (len(rows), triton.cdiv(vocab, BLOCK))
    _apply_kernel[grid](logits, words, idx, vocab, words.shape[-1], logits.stride(0), words.stride(0),
                        BLOCK=BLOCK)
