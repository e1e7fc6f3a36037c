"""The matrix (Valiant/CYK) backend against the Earley runtime: masks equal bit for bit.

Every step of every trajectory compares the two packed masks whole (every token and the
stop token), then both accept the same token. Default suite: the runtime's mask grammars,
random grammars (hypothesis), and the ambiguous suite (G4, E → E+E | E*E | (E) | n, the
English PP-attachment CFG) on short texts with a vocabulary whose tokens span several
terminals. Slow: every corpus gbnf/ebnf grammar with samples and commandtalk, Qwen tokens.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.bench import ambiguous as amb
from gramopt.grammar import Grammar
from gramopt.runtime import Matcher, RuntimeGrammarError, Vocab
from gramopt.runtime.matrix import ValiantMatcher, build_cnf

from corpus_location import CORPUS
from test_runtime_masks import GRAMMARS, HYP_TOKENS, grammars, small_vocab


def same_masks(g: Grammar, vocab: Vocab, tokens=None, walks: int = 4, steps: int = 40, seed: int = 0):
    """Replay ``tokens`` (or random walks over allowed tokens) on both backends, comparing
    the whole mask before every step; returns the number of masks compared."""
    e = Matcher(g, vocab)
    m = Matcher(g, vocab, backend="valiant")
    a = np.zeros(vocab.n_words, np.int32)
    b = np.zeros(vocab.n_words, np.int32)
    rng = random.Random(seed)
    compared = 0
    for w in range(1 if tokens is not None else walks):
        e.reset()
        m.reset()
        for i in range(len(tokens) if tokens is not None else steps):
            e.fill_next_token_bitmask(a)
            m.fill_next_token_bitmask(b)
            compared += 1
            if not np.array_equal(a, b):
                ea, ma = _ids(a, len(vocab)), _ids(b, len(vocab))
                raise AssertionError(f"step {i}: Earley only {sorted(ea - ma)[:8]}, matrix only "
                                     f"{sorted(ma - ea)[:8]}")
            if tokens is not None:
                t = tokens[i]
            else:
                allowed = sorted(_ids(a, len(vocab)))
                if not allowed:
                    break
                t = rng.choice(allowed)
            assert e.accept_token(t) == m.accept_token(t), (i, t)
            assert e.is_terminated() == m.is_terminated()
            if e.is_terminated():
                break
    return compared


def _ids(mask: np.ndarray, n: int) -> set[int]:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:n]
    return set(np.nonzero(bits)[0].tolist())


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_runtime_grammars_same_masks(name):
    assert same_masks(GRAMMARS[name], small_vocab(), walks=6, steps=25) > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(), st.integers(0, 1000))
def test_random_grammars_same_masks(g, seed):
    v = Vocab.from_bytes(HYP_TOKENS, eos=len(HYP_TOKENS))
    same_masks(g, v, walks=2, steps=8, seed=seed)


AMBIGUOUS_TOKENS = [b"a", b"b", b"ab", b"ba", b"aa", b"bab", b"aaaa", b"n", b"+", b"*", b"(", b")", b"n+",
                    b"+n", b"(n", b"n)", b"*(", b")*", b"((", b"))", b"n*n", b" the", b" man", b" saw",
                    b" with", b" a", b" telescope", b" in", b" park", b" and", b" dog", b" the man",
                    b" old", b" John", b" slept", b" on", b" hill", b" the park", b" ", b"the", b"e",
                    b" t", b"he", b" w", b"ith", b" or", b" Mary", b" big", b" liked",
                    *(bytes([c]) for c in range(ord("c"), ord("z") + 1) if c != ord("n"))]


def ambiguous_vocab() -> Vocab:
    return Vocab.from_bytes(AMBIGUOUS_TOKENS, eos=len(AMBIGUOUS_TOKENS))


def _tokenize(vocab: Vocab, text: bytes) -> list[int]:
    """Greedy longest match over the vocabulary, then the stop token."""
    ids = {t: i for i, t in enumerate(vocab.token_bytes) if t}
    out, i = [], 0
    while i < len(text):
        n = max(k for k in range(1, 12) if text[i:i + k] in ids)
        out.append(ids[text[i:i + n]])
        i += n
    return out + [vocab.eos_ids[0]]


@pytest.mark.parametrize("name,text", [
    ("G4", amb.g4_text(40, seed=1)),
    ("expr", amb.expr_text(40, seed=2)),
    ("english", amb.english_text(14, seed=3)),
])
def test_ambiguous_suite_same_masks(name, text):
    g = amb.parse_text({"G4": amb.G4, "expr": amb.EXPR, "english": amb.ENGLISH}[name])
    v = ambiguous_vocab()
    assert same_masks(g, v, tokens=_tokenize(v, text.encode())) > 10
    assert same_masks(g, v, walks=3, steps=30, seed=5) > 0


def cache_same_masks(g: Grammar, vocab: Vocab, walks: int = 3, steps: int = 30, seed: int = 0) -> int:
    """The mask cache (classes.py) against the full trie walk, whole masks, random walks
    (rolling back now and then, so cached entries meet a changed table)."""
    full = ValiantMatcher(g, vocab, cache=False)
    fast = ValiantMatcher(g, vocab)
    rng = random.Random(seed)
    compared = 0
    for _ in range(walks):
        full.reset()
        fast.reset()
        for i in range(steps):
            a = full.compute_mask().copy()
            b = fast.compute_mask()
            compared += 1
            assert np.array_equal(a, b), (i, sorted(_ids(a, len(vocab)) ^ _ids(b, len(vocab)))[:8])
            allowed = sorted(_ids(a, len(vocab)) - set(vocab.eos_ids[:i % 7 != 6]))  # stop 1 in 7
            if not allowed:
                break
            if full.num_tokens > 2 and rng.random() < 0.15:
                full.rollback(2)
                fast.rollback(2)
                continue
            t = rng.choice(allowed)
            assert full.accept_token(t) and fast.accept_token(t)
            if full.is_terminated():
                break
    return compared


@pytest.mark.parametrize("name", ["G4", "expr", "english"])
def test_mask_cache_equals_full_walk(name):
    g = amb.parse_text({"G4": amb.G4, "expr": amb.EXPR, "english": amb.ENGLISH}[name])
    assert cache_same_masks(g, ambiguous_vocab(), walks=4, steps=40, seed=11) > 20


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars(), st.integers(0, 1000))
def test_random_grammars_mask_cache(g, seed):
    cache_same_masks(g, Vocab.from_bytes(HYP_TOKENS, eos=len(HYP_TOKENS)), walks=2, steps=10, seed=seed)


def test_mask_cache_walks_only_undecided_tokens():
    """E → … | ( E ) | n: after "+" the seed is E; "n)" finishes an E and goes on, so
    whether it is allowed depends on an open parenthesis (undecided: walked), while "n+"
    is a prefix of an E (decided, from the cache). "n+" and "(n+" meet the same entry."""
    from gramopt.runtime.matrix.classes import token_classes
    g = amb.parse_text(amb.EXPR)
    v = ambiguous_vocab()
    ids = {t: i for i, t in enumerate(v.token_bytes)}
    m = ValiantMatcher(g, v)
    cls = token_classes(m.cnf, v.trie, v.n_words)
    assert cls.entry(m.table.seed_key()).sub is None  # at 0 the seed is the start: nothing follows
    assert m.accept_token(ids[b"n+"])
    key = m.table.seed_key()
    e = cls.entry(key)
    assert e.sub is not None and ids[b"n)"] in e.sub.tok_ids and ids[b"n+"] not in e.sub.tok_ids
    assert (e.aw[ids[b"n+"] >> 5] >> (ids[b"n+"] & 31)) & 1
    assert ids[b"n)"] not in m.allowed_tokens()
    m.rollback(1)
    assert m.accept_token(ids[b"(n"]) and m.accept_token(ids[b"+"])
    assert m.table.seed_key() == key and cls.entry(key) is e
    assert ids[b"n)"] in m.allowed_tokens()
    assert m.fill_next_token_bitmask(np.zeros(v.n_words, np.int32)).trie_nodes > 0  # walks "n)"


def test_g4_table_holds_sets_not_derivations():
    """After t symbols of G4 every span is an S: t(t+1)/2 cells however many parses."""
    g = amb.parse_text(amb.G4)
    m = ValiantMatcher(g, ambiguous_vocab())
    assert m.accept_bytes(b"abba" * 10)
    tab = m.table
    cnf = m.cnf
    s = cnf.names.index("S")
    cells = 0
    for t in range(1, tab.n + 1):
        for e in range(tab.col_start[t], tab.col_start[t + 1]):
            if tab.ent_nt[e] == s:
                bits = tab.pool[tab.ent_off[e]:tab.ent_off[e] + (t + 63) // 64]
                cells += int(np.unpackbits(bits.view(np.uint8)).sum())
    assert cells == 40 * 41 // 2


def test_matcher_api_and_rollback():
    g = amb.parse_text(amb.EXPR)
    v = ambiguous_vocab()
    ids = {t: i for i, t in enumerate(v.token_bytes)}
    m = Matcher(g, v, backend="valiant", cache=False)  # the full walk: counters show the work
    assert isinstance(m, ValiantMatcher)
    eos = v.eos_ids[0]
    assert m.accept_token(ids[b"(n"]) and not m.accept_token(eos) and not m.accept_token(ids[b"("])
    before = m.allowed_tokens().tolist()
    assert m.accept_token(ids[b")"]) and m.can_terminate()
    m.rollback(1)
    assert m.allowed_tokens().tolist() == before
    assert not m.accept_token(ids[b"n)"])  # "(nn)"
    assert m.accept_token(ids[b"+n"]) and m.accept_token(ids[b")"]) and m.accept_token(eos)
    assert m.is_terminated()
    assert not m.accept_token(ids[b"n"])
    m.rollback(1)
    assert not m.is_terminated() and m.accept_token(ids[b"+n"])
    with pytest.raises(ValueError):
        m.rollback(99)
    out = np.zeros((2, v.n_words), np.int32)
    c = m.fill_next_token_bitmask(out, 1)
    assert out[0].sum() == 0 and (out[1][eos >> 5] >> (eos & 31)) & 1
    assert c.trie_nodes > 0 and c.columns > 0
    with pytest.raises(ValueError, match="backend"):
        Matcher(g, v, backend="cyk")


def test_torch_bitmask_target():
    torch = pytest.importorskip("torch")
    g = amb.parse_text(amb.G4)
    v = ambiguous_vocab()
    m = Matcher(g, v, backend="valiant")
    out = torch.zeros(v.n_words + 1, dtype=torch.int32)
    m.fill_next_token_bitmask(out)
    assert out[:v.n_words].numpy().tobytes() == m.compute_mask().view(np.int32).tobytes()


def test_cnf_keeps_prefix_semantics_under_nullable_and_units():
    """ε and unit handling: a nullable start accepts ε; an ε-only rule disappears."""
    g = amb.parse_text('root ::= A B "c" | ""\nA ::= "a" | ""\nB ::= A A | E\nE ::= ""\n')
    cnf = build_cnf(g)
    assert cnf.start_nullable and "E" not in cnf.names
    m = ValiantMatcher(g, ambiguous_vocab())
    assert m.can_terminate()
    assert same_masks(g, small_vocab(), walks=4, steps=6) > 0


def test_lark_grammar_refused():
    from gramopt.formats import parse
    g = parse('start: "a" WORD\n%import common.WORD\n', "lark")
    with pytest.raises(RuntimeGrammarError):
        Matcher(g, ambiguous_vocab(), backend="valiant")


# ---------------------------------------------------------------- slow: the corpus


def _corpus_grammars():
    if not CORPUS.is_dir():
        return []
    paths = sorted(p for ext in ("gbnf", "ebnf") for p in (CORPUS / ext).glob(f"*.{ext}"))
    return [p for p in paths if list(p.parent.glob(p.stem + ".sample*.txt"))]


@pytest.mark.slow
@pytest.mark.parametrize("path", _corpus_grammars(), ids=lambda p: p.name)
def test_corpus_samples_same_masks(path):
    from gramopt.bench.engines import Env
    from gramopt.formats import read
    from gramopt.grammar import GrammarError
    try:
        g = read(str(path))
    except GrammarError as e:
        pytest.skip(f"gramopt's reader refuses it: {str(e).splitlines()[0]}")
    try:
        Matcher(g, small_vocab())
    except RuntimeGrammarError as e:
        pytest.skip(f"the Earley runtime refuses it: {e}")
    env = Env.create(Vocab.qwen())
    for s in sorted(path.parent.glob(path.stem + ".sample*.txt"))[:2]:
        tokens, _ = env.tokenizer.trajectory(s.read_text(encoding="utf-8"), 150)
        same_masks(g, env.vocab, tokens=tokens)


@pytest.mark.slow
@pytest.mark.skipif(not (CORPUS / amb.COMMANDTALK).exists(), reason="corpus absent")
def test_commandtalk_same_masks():
    from gramopt.bench.engines import Env
    from gramopt.formats import read
    g = amb.words_as_bytes(read(str(CORPUS / amb.COMMANDTALK)))
    env = Env.create(Vocab.qwen())
    text = " draw a line from nine five five one to nine five five two"
    tokens, _ = env.tokenizer.trajectory(text, 100)
    same_masks(g, env.vocab, tokens=tokens)


# ---------------------------------------------------------------- the recommendation


def test_analyze_recommends_matrix_runtime_when_ambiguity_stays():
    from gramopt.summary import analyze
    a = analyze(amb.parse_text(amb.G4))
    assert a.sac_growth["ambiguous"] and a.sac_growth["growing"]
    assert a.sac_growth["last_third"] > 10 * a.sac_growth["first_third"]  # t²/2 per symbol
    assert 'backend="valiant"' in a.format("g4.gbnf")
    plain = analyze(amb.parse_text('root ::= "[" (item ("," item)*)? "]"\nitem ::= [a-z]+ | root\n'))
    assert plain.sac_growth is None or not plain.sac_growth["ambiguous"]
    assert "valiant" not in plain.format("list.gbnf")


def test_engine_adapter_and_bench_name():
    from gramopt.bench.engines import DRIVERS, ENGINES
    from gramopt.engines import Env
    assert "gramopt-valiant" in DRIVERS and "gramopt-valiant" not in ENGINES  # opt-in
    v = ambiguous_vocab()
    eng = DRIVERS["gramopt-valiant"](Env(v))
    h, _ = eng.timed_compile(amb.parse_text(amb.EXPR))
    ids = {t: i for i, t in enumerate(v.token_bytes)}
    times = eng.run(h, [ids[b"(n"], ids[b"+n"], ids[b")"], v.eos_ids[0]])
    assert len(times) == 4


def test_optimize_report_says_when_ambiguity_stays(tmp_path, capsys):
    """G4 through the clean-up passes only keeps S → S S (the generic target: no guard, no
    fix-ups; the default target's guard now prefers its fixed-up reference, S without left
    recursion): the report says it stays ambiguous and names the matrix runtime. (Without the
    language check: G4's, ~3 CPU s on the reference recognizer, is test_optimize_exact's.)"""
    from gramopt.cli.optimize import optimize_file
    p = tmp_path / "g.gbnf"
    p.write_text('root ::= S\nS ::= S S | "a" | "b"\n')
    from gramopt.optimizer import Options
    assert optimize_file(str(p), None, Options(target="generic", passes=("cleanup",), verify=False),
                         report=True) == 0
    out = capsys.readouterr().out
    assert "stays ambiguous" in out and "valiant" in out


@pytest.mark.parametrize("device", ["torch", "cuda"])
@pytest.mark.parametrize("name", ["G4", "expr", pytest.param("english", marks=pytest.mark.slow)])
def test_torch_table_same_masks(device, name):
    """The dense torch formulation (CPU here; CUDA when a GPU is present) against numba."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = amb.parse_text({"G4": amb.G4, "expr": amb.EXPR, "english": amb.ENGLISH}[name])
    v = ambiguous_vocab()
    text = {"G4": amb.g4_text(8, 3), "expr": amb.expr_text(8, 4), "english": amb.english_text(4, 5)}[name]
    a = ValiantMatcher(g, v, cache=False)
    b = ValiantMatcher(g, v, device=device, cache=False)
    c = ValiantMatcher(g, v, device=device)  # the mask cache over the torch table's seeds
    for t in _tokenize(v, text.encode()):
        assert a.table.seed_key() == b.table.seed_key()
        assert a.allowed_tokens().tolist() == b.allowed_tokens().tolist() == c.allowed_tokens().tolist()
        assert a.accept_token(t) and b.accept_token(t) and c.accept_token(t)
    for m in (a, b, c):
        m.rollback(3)
    assert a.allowed_tokens().tolist() == b.allowed_tokens().tolist() == c.allowed_tokens().tolist()
