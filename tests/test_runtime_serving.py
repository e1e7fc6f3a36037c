"""The serving API: BatchMatcher (parallel fills equal sequential ones, bit for bit), fork,
jump-forward text (checked against the BNF oracle), max_rollback_tokens, runtime limits, and
apply_token_bitmask_inplace's backends against unpacked bits."""

from __future__ import annotations

import numpy as np
import pytest

from gramopt.grammar import CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from gramopt.runtime import (BatchMatcher, Matcher, RuntimeLimitError, RuntimeLimits, Vocab,
                             allocate_token_bitmask, compile_grammar)
from gramopt.runtime import earley as K
from gramopt.runtime.earley import plan_rows
from gramopt.runtime.tokens import TokenTable

from test_runtime_masks import GRAMMARS, TEXTS, small_vocab
from test_runtime_oracle import BnfOracle


def _rows(grammar, vocab, texts):
    """One fresh-table matcher per text that the grammar accepts as a prefix."""
    out = []
    for t in texts:
        m = Matcher(grammar, vocab)
        if not t or m.accept_bytes(t):
            out.append(m)
    return out


@pytest.mark.parametrize("name", ["expr", "negated", "ambiguous_SS", "star", "unicode_class"])
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_batch_fill_equals_sequential(name, threads):
    vocab = small_vocab()
    g = GRAMMARS[name]
    rows = _rows(g, vocab, TEXTS)
    assert len(rows) >= 2
    want = allocate_token_bitmask(len(rows), len(vocab))
    for r, m in enumerate(rows):
        m.fill_next_token_bitmask(want, r)
    # the same states over one fresh table: classes built lazily, concurrently, under its lock
    table = TokenTable(compile_grammar(g), vocab)
    fresh = []
    for m in rows:
        f = Matcher(table)
        fresh.append(f)
    for f, t in zip(fresh, [t for t in TEXTS if not t or Matcher(g, vocab).accept_bytes(t)]):
        assert not t or f.accept_bytes(t)
    rows = fresh
    got = allocate_token_bitmask(len(rows) + 3, len(vocab))
    # min_parallel_work=0: every batch goes to the threads, the first one included (whose
    # rows stop early for the JIT: their states' classes are built after the kernels)
    with BatchMatcher(threads, min_parallel_work=0) as bm:
        counters = bm.batch_fill_next_token_bitmask(rows, got)
        assert bm.last_parallel == (threads > 1)
        np.testing.assert_array_equal(got[:len(rows)], want)
        assert (got[len(rows):] == -1).all() and len(counters) == len(rows)
        rev = list(reversed(range(len(rows))))
        got2 = np.zeros_like(got)
        bm.batch_fill_next_token_bitmask(rows, got2, indices=rev)
        np.testing.assert_array_equal(got2[rev], want)


def test_batch_schedule_is_by_work_units_and_rows_of_any_kind():
    """The pool is used when the rows' estimated work (earley.estimate_work: trie nodes +
    items) reaches min_parallel_work, whatever the wall time; terminated rows, walk-mode rows, the matrix
    backend's rows and a row whose chart must grow mid-mask fill as they do alone."""
    vocab = small_vocab()
    g = GRAMMARS["expr"]

    def make_rows():
        rows = _rows(g, vocab, TEXTS)[:6]
        done = Matcher(g, vocab)
        assert done.accept_bytes(b"a") and done.accept_token(vocab.eos_ids[0]) and done.is_terminated()
        walk = Matcher(g, vocab, mode="walk")
        assert walk.accept_bytes(b"(a")
        valiant = Matcher(g, vocab, backend="valiant")
        assert valiant.accept_bytes(b"(a+")
        tiny = Matcher(TokenTable(compile_grammar(g), vocab))
        tiny.chart = type(tiny.chart)(tiny.cg.n_rules, items=8, sets=4, groups=4, hash_bits=3,
                                      mask_words=vocab.n_words)  # overflows: grows in the slow path
        tiny.reset()
        tiny._packed_for = ()
        assert tiny.accept_bytes(b"((a")
        return rows + [done, walk, valiant, tiny], rows + [tiny]

    def work(kernel_rows):  # what a batch's plan reads: each kernel row's estimate
        addrs = np.array([m._A_addr for m in kernel_rows if m._kernel_vector() is not None], np.int64)
        return int(plan_rows(addrs, np.arange(len(addrs)), np.zeros(len(addrs), np.int64)))

    for parallel in (False, True):
        rows, kernel_rows = make_rows()
        want = np.zeros((len(rows), vocab.n_words), np.int32)
        for r, m in enumerate(rows):  # fresh charts: real work
            m.fill_next_token_bitmask(want, r)
        for m in kernel_rows:  # forget the masks just made: the batch's masks are not cache hits
            m.chart.S[K.I_MC_KEY][:] = -1
        w = work(kernel_rows)
        assert w > 0
        with BatchMatcher(2, min_parallel_work=w if parallel else w + 1) as bm:
            got = np.zeros_like(want)
            bm.batch_fill_next_token_bitmask(rows, got)
            assert bm.last_parallel == parallel
            np.testing.assert_array_equal(got, want)
            twice = np.zeros((len(rows) + 1, vocab.n_words), np.int32)
            bm.batch_fill_next_token_bitmask(rows + [rows[0]], twice)  # a matcher twice: in turn
            np.testing.assert_array_equal(twice[:-1], want)
            np.testing.assert_array_equal(twice[-1], want[0])


def test_batch_fill_torch_and_accept_rollback():
    torch = pytest.importorskip("torch")
    vocab = small_vocab()
    g = GRAMMARS["expr"]
    rows = [Matcher(g, vocab) for _ in range(5)]
    toks = [vocab.token_bytes.index(t) for t in (b"a", b"(", b"(a", b"1", b"12")]
    assert BatchMatcher.batch_accept_token(rows, toks) == [True] * 5
    assert BatchMatcher.batch_accept_string(rows, ["+", "a", "+", "+", "x"]) == [True, True, True, True, False]
    out = torch.zeros((5, vocab.n_words), dtype=torch.int32)
    BatchMatcher(2).batch_fill_next_token_bitmask(rows, out)
    for r, m in enumerate(rows):
        ref = np.zeros(vocab.n_words, np.int32)
        m.fill_next_token_bitmask(ref)
        assert out[r].numpy().tolist() == ref.tolist()
    BatchMatcher.batch_rollback(rows, [1, 1, 1, 1, 0])
    assert [m.num_tokens for m in rows] == [1, 1, 1, 1, 1]
    with pytest.raises(ValueError):
        BatchMatcher.batch_accept_token(rows, [1])
    with pytest.raises(ValueError):
        BatchMatcher(2).batch_fill_next_token_bitmask(rows, out, indices=[0, 0, 1, 2, 3])


def test_fork_is_independent():
    vocab = small_vocab()
    g = GRAMMARS["expr"]
    m = Matcher(g, vocab)
    assert m.accept_bytes(b"(a+")
    f = m.fork()
    assert f.accept_bytes(b"1)") and f.num_tokens == 2
    assert m.num_tokens == 1
    fresh = Matcher(g, vocab)
    fresh.accept_bytes(b"(a+")
    assert m.allowed_tokens().tolist() == fresh.allowed_tokens().tolist()
    fresh.accept_bytes(b"1)")
    assert f.allowed_tokens().tolist() == fresh.allowed_tokens().tolist()
    f.rollback(1)
    assert f.allowed_tokens().tolist() == m.allowed_tokens().tolist()


def _next_bytes(oracle, text):
    return [b for b in range(256) if oracle.is_viable_prefix(text + bytes([b]))]


JF = dict(GRAMMARS, fixed=Grammar((Rule("root", seq(Literal("{\"key\": "), alt(Literal("1"), Literal("2")),
                                                        Literal("}"))),), "root"),
          forced_unicode=Grammar((Rule("root", seq(Literal("☃é"), Repeat(Literal("x"), 0, 1))),), "root"))


@pytest.mark.parametrize("name", sorted(JF))
def test_jump_forward_is_forced(name):
    """Each jump-forward byte is the only viable next byte and the text before it is not in
    the language; where it stops there is a choice (two bytes, or stop vs. go on) or an end."""
    g = JF[name]
    oracle = BnfOracle(g)
    m = Matcher(g, small_vocab())
    if oracle.empty:
        assert m.find_jump_forward_bytes() == b""
        return
    texts = TEXTS + [b"", "☃".encode(), b"{\"key\": 1"]
    for text in texts:
        m.reset()
        if text and not m.accept_bytes(text):
            continue
        n_before = m.chart.n_sets
        forced = m.find_jump_forward_bytes()
        assert m.chart.n_sets == n_before  # state unchanged
        for i, b in enumerate(forced):
            cur = text + forced[:i]
            assert not oracle.accepts(cur) and _next_bytes(oracle, cur) == [b], (text, forced, i)
        end = text + forced
        assert oracle.accepts(end) or len(_next_bytes(oracle, end)) != 1, (text, forced)


def test_jump_forward_string_examples():
    m = Matcher(JF["fixed"], small_vocab())
    assert m.find_jump_forward_string() == '{"key": '
    m.accept_string('{"key": ')
    assert m.find_jump_forward_string() == ""
    m.accept_string("2")
    assert m.find_jump_forward_string() == "}"
    u = Matcher(JF["forced_unicode"], small_vocab())
    assert u.find_jump_forward_string() == "☃é"
    assert u.accept_bytes("☃".encode()[:1])
    assert u.find_jump_forward_bytes() == "☃é".encode()[1:] and u.find_jump_forward_string() == ""


def test_max_rollback_tokens():
    vocab = small_vocab()
    m = Matcher(GRAMMARS["right_rec"], vocab, max_rollback_tokens=2)
    a = vocab.token_bytes.index(b"a")
    for _ in range(3):
        assert m.accept_token(a)
    assert m.num_tokens == 3
    with pytest.raises(ValueError, match="max_rollback_tokens=2"):
        m.rollback(3)
    m.rollback(2)
    assert m.num_tokens == 1
    with pytest.raises(ValueError, match="max_rollback_tokens"):
        m.rollback(1)


def test_runtime_limit_is_a_clear_error_and_keeps_state():
    vocab = Vocab.from_bytes([b"a", b"a" * 64], eos=2)
    g = GRAMMARS["ambiguous_SS"]  # S -> S S | a | b: Θ(n) items per set, Θ(n²) in the chart
    m = Matcher(g, vocab, limits=RuntimeLimits(max_items=1 << 16))
    with pytest.raises(RuntimeLimitError, match="max_items=65536"):
        for _ in range(1000):
            assert m.accept_token(1)
    n = m.num_tokens
    assert n > 0 and m.chart.n_sets == 1 + 64 * n  # the failing step was not applied
    assert set(m.allowed_tokens().tolist()) >= {0, 2}


def test_matcher_takes_a_hugging_face_tokenizer():
    from test_runtime_vocab import _tiny_hf_tokenizer
    tk = _tiny_hf_tokenizer()
    g = Grammar((Rule("root", seq(Literal("a"), Repeat(Literal("b"), 0, None))),), "root")
    m = Matcher(g, tk)
    assert m.vocab is Matcher(g, tk).vocab  # built once per tokenizer
    assert m.vocab.token_bytes[:4] == [b"a", b"b", b"ab", b" "]
    assert m.allowed_tokens().tolist() == [0, 2]
    assert m.accept_token(2) and m.allowed_tokens().tolist() == [1]


# ---------------------------------------------------------------- bitmask kernels

torch = pytest.importorskip("torch")
from gramopt.runtime import apply_token_bitmask_inplace  # noqa: E402

BACKENDS = ["cpu", "torch", "auto"]


def _reference(logits: np.ndarray, mask: np.ndarray, vocab: int, rows) -> np.ndarray:
    out = logits.copy()
    bits = np.unpackbits(mask.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    for r in rows:
        for j in range(min(vocab, out.shape[1])):
            if j >= bits.shape[1] or not bits[r, j]:
                out[r, j] = -np.inf
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vocab,words,vs,indices", [(31, 1, None, None), (32, 1, None, None),
                                                    (33, 2, None, [1]), (100, 4, 90, None),
                                                    (1000, 20, None, [0, 2]), (130, 4, 120, [2, 0])])
def test_apply_token_bitmask_inplace(backend, vocab, words, vs, indices):
    rng = np.random.default_rng(vocab + words)
    mask = rng.integers(-2**31, 2**31, size=(3, words), dtype=np.int64).astype(np.int32)
    mask[0, 0] = -1
    logits = torch.randn(3, vocab, dtype=torch.float32)
    want = _reference(logits.numpy(), mask, vocab if vs is None else vs,
                      range(3) if indices is None else indices)
    apply_token_bitmask_inplace(logits, torch.from_numpy(mask), vocab_size=vs, indices=indices,
                                backend=backend)
    np.testing.assert_array_equal(logits.numpy(), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_apply_one_row_and_strided(backend):
    mask = np.array([0b1011, -1], np.int32)
    one = torch.zeros(40)
    apply_token_bitmask_inplace(one, mask, backend=backend)
    assert torch.isinf(one).nonzero().flatten().tolist() == [2] + list(range(4, 32))
    wide = torch.zeros(2, 80)
    view = wide[:, ::2]  # non-contiguous (2, 40)
    apply_token_bitmask_inplace(view, np.stack([mask, mask]), backend=backend)
    assert torch.isinf(wide[1, ::2]).nonzero().flatten().tolist() == [2] + list(range(4, 32))
    assert not torch.isinf(wide[:, 1::2]).any()


def test_apply_bad_input():
    with pytest.raises(ValueError, match="backend"):
        apply_token_bitmask_inplace(torch.zeros(4), np.zeros(1, np.int32), backend="nope")
    with pytest.raises(ValueError, match="int32"):
        apply_token_bitmask_inplace(torch.zeros(4), np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="'cpu'"):
        apply_token_bitmask_inplace(torch.zeros(4, dtype=torch.bfloat16), np.zeros(1, np.int32), backend="cpu")
    x = torch.zeros(4, dtype=torch.bfloat16)
    apply_token_bitmask_inplace(x, np.array([0b0101], np.int32))
    assert torch.isinf(x).tolist() == [False, True, False, True]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("backend", ["torch", "auto", "triton"])
def test_apply_cuda(backend):
    if backend == "triton":
        pytest.importorskip("triton")
    rng = np.random.default_rng(0)
    mask = rng.integers(-2**31, 2**31, size=(4, 40), dtype=np.int64).astype(np.int32)
    logits = torch.randn(4, 1270)
    want = _reference(logits.numpy(), mask, 1270, [1, 3])
    dev = logits.cuda()
    apply_token_bitmask_inplace(dev, torch.from_numpy(mask).cuda(), indices=[1, 3], backend=backend)
    np.testing.assert_array_equal(dev.cpu().numpy(), want)


def test_batch_work_estimate_reads_the_mask_cache():
    """What BatchMatcher's plan sums (earley.plan_rows): a row's last mask's work, or 0
    when its mask cache holds the mask it is asked for."""
    def work(m):
        m._kernel_vector()
        return int(plan_rows(np.array([m._A_addr], np.int64), np.arange(1), np.zeros(1, np.int64)))

    m = Matcher(TokenTable(compile_grammar(GRAMMARS["expr"]), small_vocab()))
    assert m.accept_bytes(b"(a")
    assert work(m) == 0  # a fresh matcher: no last mask
    c = m.fork().fill_next_token_bitmask(np.zeros(m.vocab.n_words, np.int32))  # m's cache stays empty
    m._delta[:] = 0  # as if m had made that mask last
    m._delta[[K.C_TRIE, K.C_ITEMS]] = [c.trie_nodes, c.items]
    w = work(m)
    assert w == c.trie_nodes + c.items > 0
    m.compute_mask()
    assert work(m) == 0  # now its mask cache holds this mask
