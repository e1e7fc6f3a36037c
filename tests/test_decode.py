"""The decoding loop: the seeded transformer and its KV cache, sampling, masked generation
(every sampled text is a viable prefix, EOS only where the grammar accepts), determinism,
overlap, and the CUDA path (skipped without a GPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gramopt.formats import parse  # noqa: E402
from gramopt.runtime import Matcher, Vocab  # noqa: E402
from gramopt.decoding.loop import (EngineGuide, GramoptEngine, Sampling, generate, kernel_nogil,  # noqa: E402
                                    resolve_device, sample)
from gramopt.decoding.model import HFCausalLM, TinyCausalLM, unigram_prior  # noqa: E402
from gramopt.verify import Recognizer  # noqa: E402

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ARITH = r'''
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
'''

SHORT = r'''root ::= "(" root ")" | "x" | "yy"'''


def small_vocab() -> Vocab:
    """256 single bytes, a few multi-byte tokens that cross rule boundaries, EOS last."""
    extra = [b"ab", b"a1", b"1+", b"+2", b"= ", b" (", b"()", b"((", b"))", b"x)", b"yy", b"y)", b"\n\n",
             b"12", b"_x", b"= x\n"]
    return Vocab.from_bytes([bytes([b]) for b in range(256)] + extra, eos=256 + len(extra))


@pytest.fixture(scope="module")
def vocab():
    return small_vocab()


@pytest.fixture(scope="module")
def arith():
    return parse(ARITH, "gbnf")


def _run(model, grammar, vocab, *, steps=40, seed=0, batch=3, sampling=Sampling(top_k=20), overlap=True,
         min_tokens=0):
    guide = EngineGuide([GramoptEngine(Matcher(grammar, vocab)) for _ in range(batch)])
    return generate(model, guide, steps=steps, n_words=vocab.n_words, sampling=sampling, seed=seed,
                    bos=vocab.eos_ids[0], overlap=overlap, eos_ids=vocab.eos_ids, min_tokens=min_tokens)


# ---------------------------------------------------------------- model


def test_kv_cache_matches_full_forward():
    """Decoding token by token through the cache gives the logits of one full forward."""
    m = TinyCausalLM(300, d_model=32, n_layers=2, n_heads=4, seed=3)
    ids = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(1))
    full_cache = m.new_cache(2)
    m(ids[:, :5], full_cache)
    whole = m(ids[:, 5:], full_cache)
    step_cache = m.new_cache(2)
    for i in range(9):
        last = m(ids[:, i:i + 1], step_cache)
    assert step_cache.length == full_cache.length == 9
    torch.testing.assert_close(last, whole, rtol=1e-4, atol=1e-4)
    # causal: the next-token logits after 5 tokens do not depend on what a longer input holds later
    other = ids.clone()
    other[:, 5:] = (other[:, 5:] + 1) % 300
    c1, c2 = m.new_cache(2), m.new_cache(2)
    m(ids, c1)
    m(other, c2)
    torch.testing.assert_close(c1.k[1][:, :, :5], c2.k[1][:, :, :5])


def test_seeded_weights():
    a, b, c = (TinyCausalLM(100, d_model=16, n_heads=2, seed=s) for s in (7, 7, 8))
    assert torch.equal(a.embed.weight, b.embed.weight)
    assert not torch.equal(a.embed.weight, c.embed.weight)
    x = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(a(x, a.new_cache(1)), b(x, b.new_cache(1)))


def test_prior_shifts_logits():
    prior = unigram_prior([[5, 5, 5, 6]], 10, weight=1.0)
    assert int(prior.argmax()) == 5 and prior[5] == 0 and prior[0] < prior[6] < 0
    m = TinyCausalLM(10, d_model=8, n_heads=2, seed=0, token_prior=prior * 100)
    assert int(m(torch.tensor([[1]]), m.new_cache(1)).argmax()) == 5
    with pytest.raises(ValueError):
        TinyCausalLM(10, d_model=8, n_heads=2, token_prior=torch.zeros(9))


def test_hf_adapter_protocol():
    """HFCausalLM keeps past_key_values between calls and returns the last position."""

    class Out:
        def __init__(self, logits, past):
            self.logits, self.past_key_values = logits, past

    class FakeHF(torch.nn.Module):
        class config:
            vocab_size = 12

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.calls = []

        def forward(self, input_ids, past_key_values=None, use_cache=True):
            self.calls.append(past_key_values)
            seen = (past_key_values or 0) + input_ids.shape[1]
            logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], 12)
            logits[:, -1, seen] = 1.0
            return Out(logits, seen)

    fake = FakeHF()
    m = HFCausalLM(fake)
    past = m.new_cache(1)
    assert m.vocab_size == 12
    assert int(m(torch.tensor([[1, 2]]), past).argmax()) == 2
    assert int(m(torch.tensor([[3]]), past).argmax()) == 3
    assert fake.calls == [None, 2]


# ---------------------------------------------------------------- sampling


def test_sample_greedy_topk_and_mask():
    g = torch.Generator().manual_seed(0)
    logits = torch.tensor([[0.0, 3.0, 1.0, -1.0], [2.0, 0.0, 5.0, 4.0]])
    assert sample(logits, Sampling(greedy=True), g).tolist() == [1, 2]
    assert sample(logits, Sampling(top_k=1), g).tolist() == [1, 2]
    masked = logits.clone()
    masked[:, 1:3] = float("-inf")
    for _ in range(50):
        t = sample(masked, Sampling(temperature=5.0, top_k=2), g).tolist()
        assert t[0] in (0, 3) and t[1] in (0, 3)
    with pytest.raises(ValueError):
        Sampling(temperature=0.0)


# ---------------------------------------------------------------- generation


def test_generated_text_is_viable_and_eos_only_when_accepted(vocab, arith):
    model = TinyCausalLM(len(vocab), d_model=32, n_heads=4, seed=1)
    ref = Recognizer(arith)
    for seed in range(3):
        gen = _run(model, arith, vocab, steps=48, seed=seed, batch=3)
        for row, text in zip(gen.tokens, gen.texts(vocab)):
            assert ref.is_viable_prefix(text)
            if row and row[-1] in vocab.eos_ids:
                assert ref.accepts(text)
        assert gen.steps >= 1 and gen.n_tokens > 0


def test_eos_terminates_rows(vocab):
    g = parse(SHORT, "gbnf")
    model = TinyCausalLM(len(vocab), d_model=16, n_heads=2, seed=0)
    gen = _run(model, g, vocab, steps=200, batch=4, sampling=Sampling(temperature=2.0))
    ref = Recognizer(g)
    for row, text, fin in zip(gen.tokens, gen.texts(vocab), gen.finished):
        if fin == "eos":
            assert row[-1] == vocab.eos_ids[0] and ref.accepts(text)
    assert "eos" in gen.finished


def test_min_tokens_blocks_stop(vocab):
    g = parse(r'root ::= "x"+', "gbnf")
    model = TinyCausalLM(len(vocab), d_model=16, n_heads=2, seed=0)
    gen = _run(model, g, vocab, steps=12, batch=2, min_tokens=12, sampling=Sampling(greedy=True))
    assert all(len(r) == 12 and vocab.eos_ids[0] not in r for r in gen.tokens)
    assert gen.finished == ["steps", "steps"]


def test_deterministic_and_overlap_invariant(vocab, arith):
    """Same seed → same tokens; computing masks in the worker thread changes nothing."""
    model = TinyCausalLM(len(vocab), d_model=32, n_heads=4, seed=2)
    a = _run(model, arith, vocab, seed=5, overlap=True)
    b = _run(model, arith, vocab, seed=5, overlap=False)
    c = _run(model, arith, vocab, seed=6, overlap=True)
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens
    assert len(a.mask_s) == len(a.forward_s) == len(a.phase_s) == a.steps
    assert 0.0 <= a.hidden_fraction <= 1.0 and b.hidden_fraction == 0.0


def test_padded_model_vocab_is_masked(vocab, arith):
    """A model with more logits than tokens: the extra columns are never sampled."""
    model = TinyCausalLM(len(vocab) + 37, d_model=16, n_heads=2, seed=4)
    gen = _run(model, arith, vocab, steps=30, sampling=Sampling(temperature=3.0))
    assert max(t for r in gen.tokens for t in r) < len(vocab)


def test_mask_kernels_release_the_gil():
    assert all(kernel_nogil().values()), kernel_nogil()


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError):
            resolve_device("cuda")


@CUDA
@pytest.mark.cuda
def test_generate_on_cuda(vocab, arith):
    model = TinyCausalLM(len(vocab), d_model=32, n_heads=4, seed=1, device="cuda")
    ref = Recognizer(arith)
    for overlap in (True, False):
        gen = _run(model, arith, vocab, steps=48, seed=0, batch=4, overlap=overlap)
        for text in gen.texts(vocab):
            assert ref.is_viable_prefix(text)
    a = _run(model, arith, vocab, seed=3, overlap=True)
    b = _run(model, arith, vocab, seed=3, overlap=False)
    assert a.tokens == b.tokens
