"""The lazy paths of the runtime: the set automaton of the mask walks (earley.memo_*) and
per-state token classes built on first use.

Differential: the masks of the default mode (token classes + walks through the set
automaton) equal the plain whole-trie walk's (mode="walk", one Earley set per trie node)
and the reference recognizer's (gramopt.verify.reference, walked over the same trie), on
every step of real trajectories with the Qwen vocabulary; and, on the small grammars of
test_runtime_masks, with chart capacities so small that every walk overflows and grows
in the middle (the set automaton must survive a grow).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gramopt.formats import parse
from gramopt.runtime import Matcher, Vocab
from gramopt.runtime import chart as chart_mod
from gramopt.runtime import matcher as matcher_mod
from gramopt.runtime import tokens as tokens_mod
from gramopt.verify.reference import Recognizer

from test_runtime_masks import GRAMMARS, TEXTS, check_masks, small_vocab

DATA = Path(__file__).parent / "data" / "gbnf"



def reference_mask(rec: Recognizer, state, vocab: Vocab) -> set[int]:
    """Allowed token ids by the reference recognizer: its memoized states walked over the
    vocabulary trie (a dead prefix skips its subtree); EOS when the prefix is accepted."""
    tr = vocab.trie
    byte, depth, size, tok_start, tok_ids = tr.byte, tr.depth, tr.size, tr.tok_start, tr.tok_ids
    stack = [state] + [None] * 4100
    out: set[int] = set()
    i, n = 1, tr.n_nodes
    while i < n:
        d = int(depth[i])
        s = rec.advance(stack[d - 1], int(byte[i]))
        if s is None or not s.viable:
            i += int(size[i])
            continue
        stack[d] = s
        out.update(int(t) for t in tok_ids[tok_start[i]:tok_start[i + 1]])
        i += 1
    if rec.state_accepts(state):
        out.update(vocab.eos_ids)
    return out


def allowed(m: Matcher) -> set[int]:
    return set(m.allowed_tokens().tolist())


def trajectory(name: str, vocab: Vocab, max_tokens: int):
    from gramopt.bench.engines import Env
    text = (DATA / f"{name}.sample1.txt").read_text(encoding="utf-8")
    toks, _ = Env.create(vocab).tokenizer.trajectory(text, max_tokens)
    return toks


@pytest.mark.parametrize("name,steps", [("llamacpp__c", 40), ("llamacpp__json", 30)])
def test_memo_masks_equal_plain_walk_and_reference(name, steps, qwen):
    g = parse((DATA / f"{name}.gbnf").read_text(encoding="utf-8"), "gbnf")
    m, w = Matcher(g, qwen), Matcher(g, qwen, mode="walk")
    rec = Recognizer(g)
    state = rec.initial()
    for i, t in enumerate(trajectory(name, qwen, steps)):
        got = allowed(m)
        assert got == allowed(w), (name, i)
        if i % 4 == 0 or i < 8:  # the reference walk costs ~0.1-1 s a step in Python
            assert got == reference_mask(rec, state, qwen), (name, i)
        assert t in got
        assert m.accept_token(t) and w.accept_token(t)
        if t not in qwen.eos_ids:
            for x in qwen.token_bytes[t]:
                state = rec.advance(state, x)


@pytest.fixture
def tiny_charts(monkeypatch):
    """Charts that start with room for a few items/sets, so walks overflow and grow."""
    class TinyChart(chart_mod.Chart):
        def __init__(self, n_rules, items=4, sets=2, groups=2, hash_bits=2, **kw):
            super().__init__(n_rules, items, sets, groups, hash_bits, **kw)
    monkeypatch.setattr(matcher_mod, "Chart", TinyChart)
    monkeypatch.setattr(tokens_mod, "Chart", TinyChart)
    matcher_mod._TABLES.clear()
    yield
    matcher_mod._TABLES.clear()


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_memo_walk_survives_growth(name, tiny_charts):
    check_masks(GRAMMARS[name], small_vocab(), TEXTS)


def test_tiny_chart_on_c_trajectory(tiny_charts, qwen):
    g = parse((DATA / "llamacpp__c.gbnf").read_text(encoding="utf-8"), "gbnf")
    m, w = Matcher(g, qwen), Matcher(g, qwen, mode="walk")
    for i, t in enumerate(trajectory("llamacpp__c", qwen, 12)):
        assert allowed(m) == allowed(w), i
        assert m.accept_token(t) and w.accept_token(t)


def test_set_automaton_shares_sets(qwen):
    """After a type name (whitespace, then an identifier) the walk visits ~10^5 trie nodes but builds a handful of Earley
    sets: the kernels repeat (the point of the set automaton)."""
    from gramopt.runtime.compile import compile_grammar
    from gramopt.runtime.tokens import TokenTable
    g = parse((DATA / "llamacpp__c.gbnf").read_text(encoding="utf-8"), "gbnf")
    m = Matcher(TokenTable(compile_grammar(g), qwen))  # its own table: no subtree classes yet
    assert m.accept_bytes(b"int")
    m.compute_mask()
    c = m.last_counters
    assert c.trie_nodes > 10_000 and c.sets < c.trie_nodes / 100, c


def test_token_classes_built_lazily(qwen):
    """Matcher() classifies no state; a mask classifies only the roots it meets; the
    ahead-of-time warm-up (precompute) classifies all, and the masks do not change."""
    g = parse((DATA / "llamacpp__json.gbnf").read_text(encoding="utf-8"), "gbnf")
    matcher_mod._TABLES.clear()
    m = Matcher(g, qwen)
    assert len(m.table.classes) == 0
    first = allowed(m)
    assert 1 <= len(m.table.classes) <= 4
    warm = Matcher(m.cg, qwen, precompute=True)
    assert len(warm.table.classes) == len(warm.table.root_states()) > len(m.table.classes)
    assert allowed(warm) == first


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_mask_cache_across_rollbacks(name):
    """Random walks with rollbacks: the mask cache (keyed by set contents, not positions)
    never serves a mask of a set that was rolled back and rebuilt differently."""
    random_walk_with_rollbacks(GRAMMARS[name], name, 120, 0.3, None)


def random_walk_with_rollbacks(g, seed, steps: int, p_back: float, max_back: int | None):
    """A random decode over small_vocab with rollbacks (of at most ``max_back`` tokens, or
    any number): every mask equal to the plain walk's (mode="walk")."""
    import random
    rng = random.Random(seed)
    v = small_vocab()
    m, w = Matcher(g, v), Matcher(g, v, mode="walk")
    for _ in range(steps):
        got = m.allowed_tokens()
        assert set(got.tolist()) == allowed(w)
        choices = [int(t) for t in got if t not in v.eos_ids]
        if m.num_tokens and (not choices or rng.random() < p_back):
            k = rng.randint(1, min(max_back or m.num_tokens, m.num_tokens))
            m.rollback(k)
            w.rollback(k)
            continue
        if not choices:
            break
        t = rng.choice(choices)
        assert m.accept_token(t) and w.accept_token(t)


def test_mask_cache_hits_inside_a_string(qwen):
    """Inside a JSON string each step's set differs by position only: the masks come from
    the cache (no trie node walked) and equal the plain walk's."""
    g = parse((DATA / "llamacpp__json.gbnf").read_text(encoding="utf-8"), "gbnf")
    m, w = Matcher(g, qwen), Matcher(g, qwen, mode="walk")
    assert m.accept_bytes(b'{"name": "Al') and w.accept_bytes(b'{"name": "Al')
    m.compute_mask()
    for piece in (b"i", b"ce", b" B", b"ob"):
        assert m.accept_bytes(piece) and w.accept_bytes(piece)
        assert allowed(m) == allowed(w)
        assert m.last_counters.trie_nodes == 0


def test_token_classes_shared_across_grammars():
    """A state whose reachable sub-network another grammar has too takes its classes from
    the shared cache (by signature), and the masks stay the oracle's."""
    from gramopt.grammar import Literal, Ref, Repeat, Rule, Grammar, alt, seq, CharClass
    digits = Repeat(CharClass(((ord("0"), ord("9")),)), 1, None)
    s1 = Grammar((Rule("root", seq(Literal("("), Ref("N"), Literal(")"))), Rule("N", digits)), "root")
    s2 = Grammar((Rule("root", alt(seq(Literal("-"), Ref("Num")), Literal("a"))), Rule("Num", digits)), "root")
    v = small_vocab()
    Matcher(s1, v, precompute=True)
    m2 = Matcher(s2, v, precompute=True)
    assert m2.table.shared_hits >= 1
    check_masks(s2, v, TEXTS + [b"-1", b"-12", b"-121"])


def test_shared_classes_tell_apart_where_a_byte_range_ends():
    """Regression: signatures once listed byte runs without the no-edge runs, so [a-c] and
    [a-d] looked alike and one rule's classes served the other (Japanese classes)."""
    from gramopt.grammar import CharClass, Grammar, Literal, Ref, Repeat, Rule, alt, seq
    g = Grammar((Rule("root", alt(seq(Literal("1"), Ref("A")), seq(Literal("2"), Ref("B")))),
                 Rule("A", Repeat(CharClass(((ord("a"), ord("c")),)), 1, None)),
                 Rule("B", Repeat(CharClass(((ord("a"), ord("d")),)), 1, None))), "root")
    v = Vocab.from_bytes([b"1", b"2", b"a", b"c", b"d", b"e", b"ad", b"cd", b"1a", b"2d"], eos=10)
    matcher_mod._TABLES.clear()
    check_masks(g, v, [b"", b"1", b"2", b"1a", b"2a", b"2d", b"2ad", b"1c"])


# ------------------------------------------------------------ content names (earley._canonize)
#
# ``(x+)*`` across rules (SMILES: ``smiles ::= atom (chain | branch)*``, ``chain ::= (bond?
# atom)+``) keeps one chain item per earlier position, each with its own origin; the sets'
# contents grew with the text, so neither the mask cache nor the set automaton ever met a
# set again (336 walk sets and ~13k Earley items per mask, 28 ms p95). Items are named by
# what they read of their origin (the waiter group of their rule), so those chain items
# share one name and sets repeat.

def _smiles_like() -> "Grammar":
    from gramopt.grammar import Grammar, Literal, Ref, Repeat, Rule, alt, seq
    atom = alt(Literal("a"), Literal("b"), seq(Literal("("), Ref("smiles"), Literal(")")))
    return Grammar((Rule("root", Ref("smiles")),
                    Rule("smiles", seq(Ref("atom"), Repeat(alt(Ref("chain"), Ref("branch")), 0, None))),
                    Rule("chain", Repeat(seq(Repeat(Ref("bond"), 0, 1), Ref("atom")), 1, None)),
                    Rule("branch", seq(Literal("("), Repeat(seq(Repeat(Ref("bond"), 0, 1), Ref("smiles")), 1, None),
                                       Literal(")"))),
                    Rule("bond", alt(Literal("-"), Literal("+"))),
                    Rule("atom", atom)), "root")


def test_ambiguous_repetition_masks_equal_oracle():
    from test_runtime_oracle import BnfOracle
    g = _smiles_like()
    texts = [b"", b"a", b"ab", b"aba", b"abab-a", b"a(b", b"a(b)", b"a(b)ab", b"a(a(b)a)b", b"a-(+b)a",
             b"((a))", b"a(ab-a(b)", b"ababababab", b"a(a(a(a"]
    check_masks(g, small_vocab(), texts, BnfOracle(g))


def test_ambiguous_repetition_random_walks_with_rollbacks():
    """The mask cache and the set automaton name sets by content across positions: random
    decodes with rollbacks must keep every mask equal to the plain walk's."""
    random_walk_with_rollbacks(_smiles_like(), 7, 300, 0.2, 4)


def test_smiles_masks_equal_plain_walk_and_reference(qwen):
    """transformers-cfg's SMILES grammar on its first sample: every mask equals the plain
    walk's and (every 3rd step) the reference recognizer's; the walks build a bounded
    number of Earley sets (they grew with the text before sets were named by content)."""
    from corpus_location import CORPUS
    from gramopt.bench.engines import Env
    stem = CORPUS / "ebnf" / "transformers-cfg__SMILES_generic"
    g = parse((stem.parent / (stem.name + ".ebnf")).read_text(encoding="utf-8"), "ebnf")
    toks, _ = Env.create(qwen).tokenizer.trajectory(
        (stem.parent / (stem.name + ".sample1.txt")).read_text(encoding="utf-8"), 60)
    m, w = Matcher(g, qwen), Matcher(g, qwen, mode="walk")
    rec = Recognizer(g)
    state = rec.initial()
    most_sets = 0
    for i, t in enumerate(toks):
        got = allowed(m)
        most_sets = max(most_sets, m.last_counters.sets)
        assert got == allowed(w), i
        if i % 3 == 0:
            assert got == reference_mask(rec, state, qwen), i
        assert m.accept_token(t) and w.accept_token(t)
        if t not in qwen.eos_ids:
            for x in qwen.token_bytes[t]:
                state = rec.advance(state, x)
    assert most_sets < 120, most_sets
