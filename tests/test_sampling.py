"""Grammar-faithful sampling: Φ estimators, the decoding loop, speculative decoding (issue 17).

Small settings (bounded Dyck D(2,6), a 36-string JSON schema, a tiny model fit for a second),
so the whole file runs in seconds; benchmarks/faithful_bench.py measures the full tables.
"""

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gramopt.runtime import Matcher  # noqa: E402
from gramopt.decoding.model import TinyCausalLM  # noqa: E402
from gramopt.sampling import (Exact, ExactTooLarge, MonteCarlo, OneStep, Step, Uniform, ValueTree,  # noqa: E402
                              allowed_tokens, decode, make_estimator, reweight, speculative_decode)
from gramopt.sampling.law import sampler_law  # noqa: E402
from gramopt.sampling.measure import bootstrap_tv, chi_square, tv  # noqa: E402
from gramopt.sampling.train import fit  # noqa: E402
from gramopt.sampling.workloads import (bos_id, bounded_dyck, bracket_vocab, json_records, json_strings,  # noqa: E402
                                        json_vocab, sloppy_brackets, sloppy_json)

K, L = 2, 6


class Setting:
    def __init__(self, grammar, vocab, model, max_tokens):
        self.grammar, self.vocab, self.model, self.max_tokens = grammar, vocab, model, max_tokens
        self.bos = bos_id(vocab)
        self.eos = vocab.eos_ids
        self.tree = ValueTree(model, self.new_matcher(), bos=self.bos, eos_ids=self.eos, max_tokens=max_tokens)
        self.target = self.tree.target(vocab)

    def new_matcher(self):
        return Matcher(self.grammar, self.vocab)

    def decode(self, estimator, n, seed=0, **kw):
        return decode(self.model, self.new_matcher, n=n, faithful=estimator, bos=self.bos, eos_ids=self.eos,
                      max_tokens=self.max_tokens, seed=seed, **kw)


def _model(vocab, corpus, steps, seed=0, d=32):
    torch.manual_seed(seed)
    m = TinyCausalLM(len(vocab), d_model=d, n_layers=1, n_heads=4, seed=seed, max_len=64)
    fit(m, corpus, bos=bos_id(vocab), eos=vocab.eos_ids[0], steps=steps, batch=32, seed=seed)
    return m


@pytest.fixture(scope="module")
def dyck():
    torch.set_num_threads(1)
    v = bracket_vocab(K)
    return Setting(bounded_dyck(K, L), v, _model(v, sloppy_brackets(2000, K, L, seed=0), 80), L)


def _step_at_root(s: Setting, m):
    with torch.no_grad():
        logits = s.model(torch.tensor([[s.bos]]), s.model.new_cache(1))
    probs = torch.softmax(logits.double(), -1)[0].numpy()
    return Step(m, (), probs, allowed_tokens(m, s.model.vocab_size), s.eos)


# ---------------------------------------------------------------- the interface


def test_constant_phi_is_a_no_op(dyck):
    class Constant:
        name = "constant"

        def phi(self, step):
            return np.full(len(step.candidates), 3.7)

    m = dyck.new_matcher()
    step = _step_at_root(dyck, m)
    assert np.allclose(reweight(step, Constant().phi(step)), reweight(step, Uniform().phi(step)))
    a = dyck.decode(Uniform(), 200, seed=5)
    b = dyck.decode(Constant(), 200, seed=5)
    assert a.tokens == b.tokens


def test_estimators_leave_the_matcher_as_they_found_it(dyck):
    m = dyck.new_matcher()
    for t in (0, 2):  # "(["
        assert m.accept_token(t)
    before = allowed_tokens(m, len(dyck.vocab)).tolist()
    mc = MonteCarlo(dyck.model, dyck.new_matcher, k=3, horizon=4, bos=dyck.bos)
    for est in (Uniform(), OneStep(), Exact(dyck.tree), mc):
        with torch.no_grad():
            logits = dyck.model(torch.tensor([[dyck.bos, 0, 2]]), dyck.model.new_cache(1))
        probs = torch.softmax(logits.double(), -1)[0].numpy()
        step = Step(m, (0, 2), probs, np.array(before), dyck.eos)
        phi = est.phi(step)
        assert phi.shape == (len(before),) and (phi >= 0).all()
        assert m.num_tokens == 2 and allowed_tokens(m, len(dyck.vocab)).tolist() == before


def test_onestep_is_the_current_mass_allowed_after_each_candidate(dyck):
    m = dyck.new_matcher()
    step = _step_at_root(dyck, m)
    phi = OneStep().phi(step)
    for y, f in zip(step.candidates.tolist(), phi):
        if y in dyck.eos:
            assert f == 1.0
            continue
        m.accept_token(y)
        want = step.probs[allowed_tokens(m, len(dyck.vocab))].sum()
        m.rollback(1)
        assert f == pytest.approx(want)


def test_onestep_cache_gives_the_uncached_values(dyck):
    """The ids cached per parse state give the values a fresh walk gives, along a whole
    exact-law walk of the tree (every viable prefix); prefixes share states; a matcher of
    another grammar empties the cache instead of reading it."""
    cached = OneStep()
    law_a, _ = sampler_law(dyck.tree, cached, dyck.new_matcher(), dyck.vocab, eps=0.0)
    law_b, _ = sampler_law(dyck.tree, cached, dyck.new_matcher(), dyck.vocab, eps=0.0)  # all hits
    assert law_a == law_b
    assert 1 < len(cached._states) < dyck.tree.n_nodes // 2  # states, not prefixes

    fresh = OneStep(cache_ids=0)
    law_c, _ = sampler_law(dyck.tree, fresh, dyck.new_matcher(), dyck.vocab, eps=0.0)
    assert law_a == law_c and not fresh._states
    other = Matcher(bounded_dyck(K, L - 2), dyck.vocab)
    step = _step_at_root(dyck, other)
    assert np.allclose(cached.phi(step), fresh.phi(step))
    assert len(cached._states) == 1 + K  # emptied: the other grammar's root and its K opening brackets


def test_onestep_cut_to_max_candidates_looks_ahead_at_the_likeliest():
    """With more candidates than ``max_candidates``, the likeliest look ahead (cached or not)
    and the others get the current mask's mass; the cut follows each step's probabilities."""
    v = bracket_vocab(K)
    m = Matcher(bounded_dyck(K, L), v)
    cand = allowed_tokens(m, len(v))
    live = [y for y in cand.tolist() if y not in v.eos_ids]
    for cached, (a, b) in itertools.product((OneStep(max_candidates=1), OneStep(max_candidates=1, cache_ids=0)),
                                            (live, live[::-1])):
        probs = np.full(len(v), 0.01)
        probs[a] = 0.5
        step = Step(m, (), probs / probs.sum(), cand, v.eos_ids)
        phi = cached.phi(step)
        m.accept_token(a)
        want = step.probs[allowed_tokens(m, len(v))].sum()
        m.rollback(1)
        assert phi[cand.tolist().index(a)] == pytest.approx(want)
        assert phi[cand.tolist().index(b)] == pytest.approx(step.probs[cand].sum())


def test_onestep_precompute_covers_every_state(dyck):
    """After ``precompute`` a whole exact-law walk meets no new state and gives the values
    of the uncached walk; the state budget stops it early."""
    pre = OneStep()
    n = pre.precompute(dyck.new_matcher())
    assert n == len(pre._states) > 1
    law_a, _ = sampler_law(dyck.tree, pre, dyck.new_matcher(), dyck.vocab, eps=0.0)
    assert len(pre._states) == n
    law_b, _ = sampler_law(dyck.tree, OneStep(cache_ids=0), dyck.new_matcher(), dyck.vocab, eps=0.0)
    assert law_a == law_b
    assert OneStep().precompute(dyck.new_matcher(), max_states=3) <= 3


def test_state_keys_name_futures():
    """Equal ``Matcher.state_key`` after two prefixes: equal masks after every next token (the
    property OneStep's per-state cache stands on); bounded Dyck's prefixes share few states."""
    v = bracket_vocab(K)
    m = Matcher(bounded_dyck(K, L), v)
    seen: dict[int, list] = {}

    def walk(depth):
        key = m.state_key()
        assert key >= 0
        after = []
        for y in allowed_tokens(m, len(v)).tolist():
            if y not in v.eos_ids:
                assert m.accept_token(y)
                after.append((y, allowed_tokens(m, len(v)).tolist()))
                m.rollback(1)
        assert seen.setdefault(key, after) == after
        if depth < L:
            for y, _ in after:
                m.accept_token(y)
                walk(depth + 1)
                m.rollback(1)

    walk(0)
    assert len(seen) < 137 // 2  # D(2,6) has 137 viable prefixes


# ---------------------------------------------------------------- exact Φ


def _brute_force_z(s: Setting) -> float:
    """Σ over every string of L (enumerated over all token sequences) of p(s·EOS)."""
    total = 0.0
    for n in range(0, s.max_tokens + 1):
        for seq in itertools.product(range(2 * K), repeat=n):
            m = s.new_matcher()
            if not all(m.accept_token(t) for t in seq) or not m.accept_token(s.eos[0]):
                continue
            ids = torch.tensor([[s.bos, *seq]])
            with torch.no_grad():
                logp = torch.log_softmax(s.model.sequence_logits(ids).double(), -1)[0]
            total += float(torch.exp(sum(logp[i, t] for i, t in enumerate([*seq, s.eos[0]]))))
    return total


def test_exact_phi_is_the_probability_of_the_language(dyck):
    assert dyck.tree.phi[0] == pytest.approx(_brute_force_z(dyck), rel=1e-5)  # float32 model
    assert sum(dyck.target.values()) == pytest.approx(1.0)
    assert set(dyck.target) <= {t for t in dyck.target if bounded_dyck_ok(t)}


def bounded_dyck_ok(text: bytes) -> bool:
    stack = []
    for c in text.decode():
        if c in "([":
            stack.append(c)
        elif not stack or "([".index(stack.pop()) != ")]".index(c):
            return False
    return not stack and len(text) <= L


def test_exact_sampler_law_is_the_target_and_uniform_is_not(dyck):
    law, pruned = sampler_law(dyck.tree, Exact(dyck.tree), dyck.new_matcher(), dyck.vocab, eps=0.0)
    assert pruned == 0.0 and tv(law, dyck.target) < 1e-12
    proj, _ = sampler_law(dyck.tree, Uniform(), dyck.new_matcher(), dyck.vocab, eps=0.0)
    one, _ = sampler_law(dyck.tree, OneStep(), dyck.new_matcher(), dyck.vocab, eps=0.0)
    assert tv(proj, dyck.target) > 0.2
    assert tv(one, dyck.target) < tv(proj, dyck.target)


def test_exact_decoding_matches_the_target_chi_square(dyck):
    n = 1500
    exact = dyck.decode(Exact(dyck.tree), n, seed=11)
    assert set(exact.finished) == {"eos"}
    _, _, p = chi_square(exact.texts(dyck.vocab), dyck.target)
    assert p > 0.01
    _, _, p_uniform = chi_square(dyck.decode(Uniform(), n, seed=11).texts(dyck.vocab), dyck.target)
    assert p_uniform < 1e-6  # the test can fail: masked sampling is told apart


def test_exact_node_budget():
    v = bracket_vocab(K)
    m = TinyCausalLM(len(v), d_model=16, n_layers=1, seed=0)
    with pytest.raises(ExactTooLarge):
        ValueTree(m, Matcher(bounded_dyck(K, L), v), bos=bos_id(v), eos_ids=v.eos_ids, max_tokens=L, max_nodes=50)


@pytest.fixture(scope="module")
def records():
    torch.set_num_threads(1)
    v = json_vocab()
    return Setting(json_records(), v, _model(v, sloppy_json(1000, seed=0), 40, d=16), 40)


def test_exact_on_a_finite_json_language_sums_tokenizations(records):
    s = records
    assert set(s.target) == {t.encode() for t in json_strings()}
    assert s.tree.accepting.sum() > len(s.target)  # several tokenizations per string
    law, _ = sampler_law(s.tree, Exact(s.tree), s.new_matcher(), s.vocab, eps=0.0)
    assert tv(law, s.target) < 1e-9


def test_onestep_error_is_bounded_by_the_one_step_drift(records):
    """OneStep's Φ̂(x·y) and the one-step lookahead with the next distribution, Φ1(x·y) (from
    the tree; MonteCarlo(k, 1) computes the same), are masses of one set under p(· | x) and
    p(· | x·y): they differ by at most the TV between the two, at every viable prefix of the
    JSON language (onestep.py's docstring); and the bound is nearly reached there."""
    t = records.tree
    seen = []

    class Recording(OneStep):
        def phi(self, step):
            out = super().phi(step)
            seen.append((step.prefix, step.candidates, out))
            return out

    sampler_law(t, Recording(), records.new_matcher(), records.vocab, eps=0.0)
    assert len(seen) == t.n_nodes
    worst = 0.0
    for prefix, cand, phi in seen:
        x = t.node(prefix)
        for y, f in zip(cand.tolist(), phi.tolist()):
            if y in t.eos_ids:
                continue
            c = t.node((*prefix, y))
            a, b = t.child_start[c], t.child_start[c + 1]
            phi1 = (t.eos_p[c] if t.accepting[c] else 0.0) + t.child_p[a:b].sum()
            drift = 0.5 * np.abs(t.probs[x] - t.probs[c]).sum()
            assert abs(f - phi1) <= drift + 1e-9
            worst = max(worst, abs(f - phi1))
    assert worst > 0.5  # position-specific next tokens: the proxy is far off somewhere
    for prefix, cand, phi in seen[::50]:  # ids aligned with p: a fresh matcher's mask after x·y
        fresh = records.new_matcher()
        assert all(fresh.accept_token(t) for t in prefix)
        for y, f in zip(cand.tolist(), phi.tolist()):
            if y not in t.eos_ids:
                assert fresh.accept_token(y)
                assert f == pytest.approx(t.probs[t.node(prefix)][fresh.allowed_tokens()].sum(), abs=1e-12)
                fresh.rollback(1)
    m = records.new_matcher()
    step = Step(m, (), t.probs[0], allowed_tokens(m, len(records.vocab)), records.eos)
    mc = MonteCarlo(records.model, records.new_matcher, k=1, horizon=1, bos=records.bos).phi(step)
    for y, f in zip(step.candidates.tolist(), mc.tolist()):
        if y not in t.eos_ids:
            c = t.node((y,))
            a, b = t.child_start[c], t.child_start[c + 1]
            assert f == pytest.approx((t.eos_p[c] if t.accepting[c] else 0.0) + t.child_p[a:b].sum(), rel=1e-6)


# ---------------------------------------------------------------- Monte Carlo


def test_montecarlo_to_the_end_is_unbiased(dyck):
    m = dyck.new_matcher()
    step = _step_at_root(dyck, m)
    exact = Exact(dyck.tree).phi(step)
    mc = MonteCarlo(dyck.model, dyck.new_matcher, k=400, horizon=L, bos=dyck.bos, seed=1).phi(step)
    live = ~np.isin(step.candidates, dyck.eos)
    assert np.allclose(mc[live], exact[live], rtol=0.15)
    assert make_estimator("mc", model=dyck.model, new_matcher=dyck.new_matcher, k=2, horizon=1).name == "mc(k=2,h=1)"


# ---------------------------------------------------------------- speculative


@pytest.fixture(scope="module")
def draft(dyck):
    return _model(dyck.vocab, sloppy_brackets(2000, K, L, seed=7), 20, seed=7, d=16)


def test_speculative_with_exact_phi_matches_the_target(dyck, draft):
    n = 500
    out, stats = speculative_decode(dyck.model, draft, dyck.new_matcher, n=n, target_phi=Exact(dyck.tree),
                                    gamma=3, bos=dyck.bos, eos_ids=dyck.eos, max_tokens=L, seed=4)
    assert stats.rounds > 0 and 0 < stats.accepted <= stats.drafted
    assert stats.tokens == sum(len(t) for t in out.tokens) + n
    _, _, p = chi_square(out.texts(dyck.vocab), dyck.target)
    assert p > 0.01


def test_speculative_against_the_masked_target_keeps_its_bias(dyck, draft):
    proj, _ = sampler_law(dyck.tree, Uniform(), dyck.new_matcher(), dyck.vocab, eps=0.0)
    out, _ = speculative_decode(dyck.model, draft, dyck.new_matcher, n=500, target_phi=Uniform(), gamma=3,
                                bos=dyck.bos, eos_ids=dyck.eos, max_tokens=L, seed=4)
    texts = out.texts(dyck.vocab)
    assert chi_square(texts, proj)[2] > 0.01
    assert bootstrap_tv(texts, dyck.target)[1] > 0.2


def test_decode_takes_the_estimator_by_name(dyck):
    by_name = dyck.decode("exact", 100, seed=3)
    assert by_name.tokens == dyck.decode(Exact(dyck.tree), 100, seed=3).tokens
    assert dyck.decode("none", 50, seed=3).tokens == dyck.decode(Uniform(), 50, seed=3).tokens
    with pytest.raises(ValueError):
        dyck.decode("bogus", 1)


def _backends() -> list[str]:
    """'earley', and 'valiant' (the matrix recognizer, same Matcher API) once the runtime has it."""
    try:
        Matcher(bounded_dyck(1, 2), bracket_vocab(1), backend="valiant")
    except (TypeError, ValueError, ImportError):
        return ["earley"]
    return ["earley", "valiant"]


@pytest.mark.parametrize("backend", _backends())
def test_every_matcher_backend_gives_the_same_sampler(dyck, backend):
    kw = {} if backend == "earley" else {"backend": backend}

    def new_matcher():
        return Matcher(dyck.grammar, dyck.vocab, **kw)

    tree = ValueTree(dyck.model, new_matcher(), bos=dyck.bos, eos_ids=dyck.eos, max_tokens=L)
    assert tree.n_nodes == dyck.tree.n_nodes and np.allclose(tree.phi, dyck.tree.phi)
    for est in ("onestep", "exact"):
        got = decode(dyck.model, new_matcher, n=60, faithful=est, bos=dyck.bos, eos_ids=dyck.eos, max_tokens=L,
                     seed=9)
        assert got.tokens == dyck.decode(est, 60, seed=9).tokens


def test_generate_hook_samples_the_target(dyck):
    from gramopt.decoding.loop import EngineGuide, GramoptEngine, generate
    from gramopt.sampling import FaithfulLogits

    def run(faithful, n=600):
        engines = [GramoptEngine(dyck.new_matcher()) for _ in range(n)]
        hook = None if faithful is None else FaithfulLogits([e.matcher for e in engines], faithful, eos_ids=dyck.eos)
        gen = generate(dyck.model, EngineGuide(engines), steps=L + 1, n_words=dyck.vocab.n_words, bos=dyck.bos,
                       seed=2, overlap=False, reweight=hook)
        assert set(gen.finished) == {"eos"}
        return [b"".join(dyck.vocab.token_bytes[t] for t in row if t not in dyck.eos) for row in gen.tokens]

    assert chi_square(run(Exact(dyck.tree)), dyck.target)[2] > 0.01
    assert chi_square(run(None), dyck.target)[2] < 1e-6
