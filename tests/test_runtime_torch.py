"""Torch application of packed masks (CPU; CUDA when available) and the logits processor;
``import gramopt`` / ``gramopt.runtime`` must not import torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gramopt.grammar import Grammar, Literal, Repeat, Rule, alt, seq
from gramopt.runtime import Matcher, Vocab


def test_import_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import gramopt, gramopt.runtime, gramopt.costmodels\n"
            "from gramopt.runtime import Matcher, Vocab\n"
            "assert 'numba' in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


torch = pytest.importorskip("torch")
from gramopt.runtime import GrammarLogitsProcessor, apply_token_bitmask  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vocab", [31, 32, 33, 100, 1000])
def test_apply_matches_unpacked_bits(device, vocab):
    rng = np.random.default_rng(vocab)
    words = (vocab + 31) // 32
    mask = rng.integers(-2**31, 2**31, size=(3, words), dtype=np.int64).astype(np.int32)
    logits = torch.randn(3, vocab, device=device)
    ref = logits.clone().cpu().numpy()
    out = apply_token_bitmask(logits, mask)
    assert out is logits
    bits = np.unpackbits(mask.view(np.uint8), axis=-1, bitorder="little")[:, :vocab].astype(bool)
    ref[~bits] = -np.inf
    np.testing.assert_array_equal(out.cpu().numpy(), ref)
    one = torch.randn(vocab, device=device)
    apply_token_bitmask(one, torch.from_numpy(mask[1]))
    assert torch.isinf(one.cpu()).numpy().tolist() == (~bits[1]).tolist()


def test_fill_into_torch_tensor():
    v = Vocab.from_bytes([b"a", b"b", b"ab"], eos=3)
    g = Grammar((Rule("root", seq(Literal("a"), Repeat(Literal("b"), 0, None))),), "root")
    m = Matcher(g, v)
    t = torch.zeros((2, 1), dtype=torch.int32)
    m.fill_next_token_bitmask(t, 1)
    assert t[1, 0].item() == 0b101 and t[0, 0].item() == 0
    n = np.zeros(1, np.int32)
    m.fill_next_token_bitmask(n)
    assert n[0] == 0b101


def test_logits_processor_greedy_decoding_stays_in_language():
    v = Vocab.from_bytes([b"a", b"b", b"c", b"ab", b"ba", b"x"], eos=6)
    g = Grammar((Rule("root", seq(Literal("a"), Repeat(alt(Literal("b"), Literal("a")), 2, 4), Literal("c"))),),
                "root")
    m = Matcher(g, v)
    proc = GrammarLogitsProcessor([m])
    ids = torch.tensor([[5, 5]])  # a "prompt" of two tokens
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        scores = torch.randn(1, len(v), generator=gen)
        scores = proc(ids, scores)
        t = int(scores.argmax(-1))
        ids = torch.cat([ids, torch.tensor([[t]])], dim=1)
        if t == 6:
            break
    text = b"".join(v.token_bytes[t] for t in ids[0, 2:].tolist())
    assert ids[0, -1].item() == 6
    assert text.startswith(b"a") and text.endswith(b"c") and 4 <= len(text) <= 6


def test_logits_processor_batched_sampling_with_finished_rows():
    """Batch of 6 rows sampled (not greedy) until every row stopped: rows finish at
    different steps, and the loop keeps feeding finished rows the EOS id as padding (as
    transformers' generate does). No NaN probabilities, every row a sentence."""
    v = Vocab.from_bytes([b"a", b"b", b"c", b"ab", b"ba", b"x"], eos=6)
    g = Grammar((Rule("root", seq(Literal("a"), Repeat(alt(Literal("b"), Literal("a")), 0, 6), Literal("c"))),),
                "root")
    batch = 6
    proc = GrammarLogitsProcessor([Matcher(g, v) for _ in range(batch)])
    ids = torch.full((batch, 1), 5)
    done = torch.zeros(batch, dtype=torch.bool)
    gen = torch.Generator().manual_seed(1)
    finished_at = [None] * batch
    for step in range(40):
        scores = proc(ids, torch.randn(batch, len(v), generator=gen))
        probs = torch.softmax(scores, -1)
        assert not torch.isnan(probs).any()
        t = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        t = torch.where(done, torch.tensor(6), t)  # padding = EOS for finished rows
        ids = torch.cat([ids, t[:, None]], dim=1)
        for r in range(batch):
            if not done[r] and t[r].item() == 6:
                finished_at[r] = step
        done |= t == 6
        if done.all():
            break
    assert done.all() and len(set(finished_at)) > 1  # rows finished at different steps
    for r in range(batch):
        row = ids[r, 1:].tolist()
        text = b"".join(v.token_bytes[x] for x in row[:row.index(6)])
        assert text.startswith(b"a") and text.endswith(b"c") and set(text[1:-1]) <= set(b"ab")
