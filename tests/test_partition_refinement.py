"""Hopcroft-style partition refinement (``grammar.refinement``) against naive refinement,
its specification, in both its homes: the e-graph's bisimulation
(``rewrites.delegation.coarsest_partition``) and the clean-up's equal rules
(``transforms.cleanup.equivalent_rules._blocks``): the same blocks, numbered alike, on
random inputs and on the corpus; chains of 10,000 (10,000 naive rounds)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from gramopt.egraph import GrammarEGraph
from gramopt.egraph.lower import ENode
from gramopt.formats import read
from gramopt.grammar import GrammarError
from gramopt.rewrites import delegation
from gramopt.rewrites.delegation import coarsest_partition, signature
from gramopt.grammar import Grammar, Literal, Ref, Rule, alt, seq
from gramopt.transforms.cleanup import equivalent_rules
from examples import examples
from test_cleanup_support import grammars


def naive_partition(classes) -> dict[int, int]:
    """Every signature, every round, until the number of blocks stops growing (the algorithm
    ``coarsest_partition`` replaced)."""
    block = {c: 0 for c in classes}
    n_blocks = 1
    while True:
        sigs: dict[object, int] = {}
        new: dict[int, int] = {}
        for c, nodes in classes.items():
            sig = frozenset((n.kind, n.data, tuple(block[ch] for ch in n.children))
                            for n in nodes if n.kind != "R")
            new[c] = sigs.setdefault((block[c], sig), len(sigs))
        block = new
        if len(sigs) == n_blocks:
            return block
        n_blocks = len(sigs)


@st.composite
def class_graphs(draw) -> dict[int, list[ENode]]:
    """1–12 classes, each with 1–3 e-nodes over two tokens, ε, rule names, and Seq / Alt /
    Rep nodes whose children are any classes (cycles included)."""
    n = draw(st.integers(1, 12))
    ids = st.integers(0, n - 1)
    node = st.one_of(
        st.builds(ENode, st.just("Tok"), st.integers(0, 1)),
        st.just(ENode("Eps", None)),
        st.builds(ENode, st.just("R"), st.sampled_from(["A", "B"])),
        st.builds(lambda k, ch: ENode(k, None, tuple(ch)), st.sampled_from(["Seq", "Alt"]),
                  st.lists(ids, min_size=1, max_size=3)),
        st.builds(lambda ch, lo: ENode("Rep", (lo, -1), (ch,)), ids, st.integers(0, 1)),
    )
    return {c: draw(st.lists(node, min_size=1, max_size=3)) for c in range(n)}


@settings(max_examples=examples(600), deadline=None)
@given(class_graphs())
def test_the_same_blocks_as_naive_refinement(classes):
    assert coarsest_partition(classes) == naive_partition(classes)


def test_equal_cycles_share_a_block_and_a_different_tail_splits_them():
    # A ::= "x" A | "y"   B ::= "x" B | "y"   C ::= "x" C | "z"
    tok = {"x": ENode("Tok", 0), "y": ENode("Tok", 1), "z": ENode("Tok", 2)}
    classes = {0: [ENode("Alt", None, (1, 6))], 1: [ENode("Seq", None, (5, 0))],
               2: [ENode("Alt", None, (3, 6))], 3: [ENode("Seq", None, (5, 2))],
               4: [ENode("Alt", None, (8, 7))], 8: [ENode("Seq", None, (5, 4))],
               5: [tok["x"]], 6: [tok["y"]], 7: [tok["z"]]}
    block = coarsest_partition(classes)
    assert block[0] == block[2] != block[4]
    assert block[1] == block[3] != block[8]
    assert block == naive_partition(classes)


def chain(n: int) -> dict[int, list[ENode]]:
    """Class i = "x" class i+1, the last "y": n distinct languages, told apart one level per
    naive round."""
    classes = {i: [ENode("Seq", None, (n, i + 1))] for i in range(n - 1)}
    classes[n - 1] = [ENode("Tok", 1)]
    classes[n] = [ENode("Tok", 0)]
    return classes


def test_a_chain_of_10000_classes_takes_three_signatures_a_class(monkeypatch):
    """Naive refinement computes 10,000 rounds of 10,001 signatures here (10^8). Here each
    class's is computed in round 1, once when "x" leaves the block of the chain, once when its
    successor does: at most 3 a class."""
    calls = []
    monkeypatch.setattr(delegation, "signature", lambda nodes, block: calls.append(1) or signature(nodes, block))
    classes = chain(10_000)
    block = coarsest_partition(classes)
    assert len(set(block.values())) == len(classes)
    assert len(calls) <= 3 * len(classes)
    assert naive_partition(chain(300)) == coarsest_partition(chain(300))


@pytest.mark.slow  # every corpus grammar's e-graph through the quadratic reference: 16 s; random ones above by default
def test_the_same_blocks_as_naive_refinement_on_the_corpus(corpus):
    paths = sorted(p for p in corpus.rglob("*") if p.suffix in (".gbnf", ".ebnf", ".lark", ".cfg"))
    assert paths
    compared = 0
    for p in paths:
        try:
            g = read(str(p))
        except GrammarError:  # the corpus keeps grammars gramopt refuses
            continue
        classes = GrammarEGraph(g).snapshot().classes
        compared += 1
        assert coarsest_partition(classes) == naive_partition(classes), p.name
    assert compared > len(paths) // 2


# ---------------------------------------------------------------- equal rules (clean-up)


def naive_blocks(grammar) -> dict[str, int]:
    """``equivalent_rules._blocks`` as it was: every signature, every round."""
    bodies = equivalent_rules.unfolded_bodies(grammar)[0]
    names, known = grammar.names, set(grammar.names)
    templates, shape, named, memo = {}, {}, {}, {}
    for r in grammar.rules:
        template, named[r.name] = equivalent_rules._template(bodies[r.name], known, memo)
        shape[r.name] = templates.setdefault(template, len(templates))
    pinned = [r.name for r in grammar.rules if r.pinned]
    block = {n: 0 for n in names} | {n: i for i, n in enumerate(pinned, 1)}
    count = 1 + len(pinned)
    while True:
        sigs, new = {}, {}
        for n in names:
            new[n] = sigs.setdefault((block[n], shape[n], tuple(block[m] for m in named[n])), len(sigs))
        block = new
        if len(sigs) == count:
            return block
        count = len(sigs)


@settings(max_examples=examples(300), deadline=None)
@given(grammars(), st.lists(st.booleans(), max_size=4))
def test_equal_rules_the_same_blocks_as_naive_refinement(grammar, pins):
    rules = tuple(replace(r, lookahead=Literal("z")) if pin else r  # an assertion pins a rule
                  for r, pin in zip(grammar.rules, pins + [False] * len(grammar.rules)))
    g = Grammar(rules, grammar.start, dialect=grammar.dialect)
    assert [r.pinned for r in g.rules] == (pins + [False] * 4)[:len(g.rules)]
    assert equivalent_rules.blocks(g) == naive_blocks(g)


def test_equal_rules_on_a_chain_of_10000_rules():
    n = 10_000  # r_i ::= "x" r_{i+1} | "y": all different (their lengths differ)
    chain = Grammar(tuple(Rule(f"r{i}", alt(seq(Literal("x"), Ref(f"r{i + 1}")), Literal("y"))) for i in range(n))
                    + (Rule(f"r{n}", Literal("y")),), "r0")
    assert len(set(equivalent_rules.blocks(chain).values())) == n + 1


@pytest.mark.slow  # the corpus through the quadratic reference; random grammars above by default
def test_equal_rules_the_same_blocks_as_naive_refinement_on_the_corpus(corpus):
    compared = 0
    for p in sorted(p for p in corpus.rglob("*") if p.suffix in (".gbnf", ".ebnf", ".lark", ".cfg")):
        try:
            g = read(str(p))
        except GrammarError:
            continue
        assert equivalent_rules.blocks(g) == naive_blocks(g), p.name
        compared += 1
    assert compared > 100
