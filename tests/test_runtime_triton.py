"""The Triton mask kernel (runtime/kernels/apply_token_bitmask_inplace_triton.py) on CPU, under
Triton's interpreter (``TRITON_INTERPRET=1``, read when the kernel is defined: a subprocess),
bit for bit against the plain definition: a column j < vocab becomes -inf iff its bit is 0
or lies beyond the bitmask's words, in the rows asked for; other rows and columns keep their
values. On CUDA the same kernel runs in tests/test_runtime_serving.py's ``test_apply_cuda``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import numpy as np, torch
from gramopt.runtime.kernels.apply_token_bitmask_inplace_triton import launch

def reference(logits, mask, vocab, rows):
    out = logits.copy()
    bits = np.unpackbits(mask.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    for r in rows:
        for j in range(min(vocab, out.shape[1])):
            if j >= bits.shape[1] or not bits[r, j]:
                out[r, j] = -np.inf
    return out

cases = [(31, 1, 31, [0, 1, 2]), (33, 2, 33, [1]), (1270, 40, 1270, [1, 3]), (5000, 100, 4500, [0, 2]),
         (9000, 300, 9000, [3, 0]), (100, 2, 100, [0])]  # the last: bits past the bitmask's 64
for V, words, vocab, rows in cases:
    rng = np.random.default_rng(V)
    mask = rng.integers(-2**31, 2**31, size=(4, words), dtype=np.int64).astype(np.int32)
    mask[0, 0] = -1
    logits = torch.randn(4, V)
    want = reference(logits.numpy(), mask, vocab, rows)
    launch(logits, torch.from_numpy(mask), vocab, rows)
    assert np.array_equal(logits.numpy(), want), (V, words, vocab, rows)
print("ok", len(cases))
"""


def test_triton_kernel_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["ok", "6"]


def test_triton_backend_refuses_cpu_logits():
    import numpy as np
    import torch

    from gramopt.runtime import apply_token_bitmask_inplace
    with pytest.raises(ValueError, match="CUDA"):
        apply_token_bitmask_inplace(torch.zeros(2, 40), np.zeros((2, 2), np.int32), backend="triton")
