"""The compile path (runtime/compile.py) leaves little for Python's garbage collector.

A compile that allocates many tracked container objects (lists, tuples, dicts, sets: one
or more per automaton state) triggers collections, and now and then a full one, which
walks the whole heap (numba, the vocabulary, torch when loaded: 50-250 ms) inside
``Matcher()``. These tests count work units, not seconds: the collections of generation
0 the compile triggers (one per ``THRESHOLD`` net allocations of tracked objects) and the
tracked objects it leaves alive (its cache of rule automata included).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from corpus_location import CORPUS
from gramopt.formats import parse
from gramopt.runtime import compile as compile_mod
from gramopt.runtime.compile import compile_grammar

THRESHOLD = 500

HARD = CORPUS / "ebnf" / "maskbench-xgrammar__Github_hard-o58762.ebnf"  # 241 rules, 4,024 states
HARD_GBNF = CORPUS / "gbnf" / "maskbench-llamacpp__Github_hard-o58762.gbnf"
CALFLOW = CORPUS / "ebnf" / "transformers-cfg__calflow.ebnf"  # 47 rules, one of 380 DFA states


def _work(path):
    """(generation-0 collections during compile_grammar at THRESHOLD, tracked objects it
    left alive, the compiled grammar), compiled from a cold cache of rule automata."""
    g = parse(path.read_text(encoding="utf-8"), path.suffix[1:])
    old = gc.get_threshold()
    saved = dict(compile_mod._BODY_CACHE)
    compile_mod._BODY_CACHE.clear()
    runs = [0]

    def count(phase, info):
        if phase == "start" and info["generation"] == 0:
            runs[0] += 1

    gc.collect()
    before = len(gc.get_objects())
    gc.set_threshold(THRESHOLD, 1 << 30, 1 << 30)  # only generation 0 runs (it is cheap)
    gc.callbacks.append(count)
    try:
        cg = compile_grammar(g)
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*old)
    left = len(gc.get_objects()) - before
    compile_mod._BODY_CACHE.clear()
    compile_mod._BODY_CACHE.update(saved)
    return runs[0], left, cg


@pytest.mark.parametrize("path", [HARD, HARD_GBNF], ids=["ebnf", "gbnf"])
def test_compile_allocates_per_rule_not_per_state(path):
    """Github_hard's compile: with lists of tuples per state it ran 59 (ebnf) / 40 (gbnf)
    generation-0 collections at this threshold and left 4,325 / 3,113 objects; with arrays,
    3 / 1 and ~1 object per rule (the cached automaton; its tuple of names is untracked
    once a collection has seen it)."""
    runs, left, cg = _work(path)
    assert cg.n_states > 3000
    assert runs <= 12, f"{runs} generation-0 collections: the compile allocates per state again"
    assert left <= 4 * cg.n_rules + 200, f"{left} tracked objects left alive for {cg.n_rules} rules"


def test_cached_automata_are_arrays():
    """The cache of rule bodies holds their automata as numpy arrays (untracked by the collector)."""
    path = HARD_GBNF
    compile_grammar(parse(path.read_text(encoding="utf-8"), "gbnf"))
    for e in list(compile_mod._BODY_CACHE.values())[-20:]:
        d = e.dfa
        for a in (d.final, d.b, d.r):
            assert isinstance(a, np.ndarray) and not gc.is_tracked(a)


def test_large_rule_builds_its_automaton_without_garbage():
    """calflow: a few rules with hundreds of states each. With NFA states as lists of lists
    and subsets as frozensets, determinizing them ran 28 generation-0 collections at this
    threshold; with flat int lists and bytes keys, none (the few it may run are slack)."""
    runs, left, cg = _work(CALFLOW)
    assert cg.n_states > 3000
    assert runs <= 4, f"{runs} generation-0 collections while determinizing"
    assert left <= 4 * cg.n_rules + 200
