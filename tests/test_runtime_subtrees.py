"""Subtree classes (runtime/subtrees.py, earley.memo_walk_frames): a U walk that reaches a
big trie node splits it by the classes of its walk set's roots below that node.

Differential: on real trajectories with the Qwen vocabulary, a second pass over the same
token table (its subtree classes built by the first pass, so big nodes split) gives masks
equal to the plain whole-trie walk's (mode="walk") and the reference recognizer's at every
step, also with charts so small that walks overflow and grow in the middle of a split; the
split makes the free-text steps of C cheap (trie nodes counted, not time); the kernels'
hash table finds every row through its growth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gramopt.formats import parse
from gramopt.runtime import Matcher
from gramopt.runtime import earley as K
from gramopt.runtime.compile import compile_grammar
from gramopt.runtime.subtrees import SubtreeClasses
from gramopt.runtime.tokens import TokenTable
from gramopt.verify.reference import Recognizer

from test_runtime_memo import allowed, reference_mask, tiny_charts, trajectory  # noqa: F401 (fixture)

DATA = Path(__file__).parent / "data" / "gbnf"


def fresh_table(name: str, vocab) -> TokenTable:
    g = parse((DATA / f"{name}.gbnf").read_text(encoding="utf-8"), "gbnf")
    return TokenTable(compile_grammar(g), vocab)


def two_passes(table: TokenTable, walk: Matcher, tokens, reference=None, check=lambda i: True):
    """Pass 1 builds subtree classes; pass 2 (a fresh matcher, same table) splits with them.
    Both passes' masks equal the plain walk's; returns pass 2's trie nodes per step."""
    nodes = []
    for p in range(2):
        m = Matcher(table)
        walk.reset()
        rec = state = None
        if reference is not None and p == 1:
            rec = Recognizer(reference)
            state = rec.initial()
        for i, t in enumerate(tokens):
            got = allowed(m)
            if p == 1:
                nodes.append(m.last_counters.trie_nodes)
            assert got == allowed(walk), (p, i)
            if rec is not None and check(i):
                assert got == reference_mask(rec, state, table.vocab), (p, i)
            assert m.accept_token(t) and walk.accept_token(t)
            if rec is not None and t not in table.vocab.eos_ids:
                for x in table.vocab.token_bytes[t]:
                    state = rec.advance(state, x)
    return nodes


def test_split_masks_equal_plain_walk_and_reference_on_c(qwen):
    table = fresh_table("llamacpp__c", qwen)
    walk = Matcher(table.cg, qwen, mode="walk")
    g = parse((DATA / "llamacpp__c.gbnf").read_text(encoding="utf-8"), "gbnf")
    toks = trajectory("llamacpp__c", qwen, 40)
    nodes = two_passes(table, walk, toks, reference=g, check=lambda i: i < 6)
    assert len(table.subtrees.rows) > 0
    # after "int" (whitespace, then an identifier): ~94k trie nodes node by node; split, a few k
    assert max(nodes) < 20_000, nodes


def test_split_masks_equal_plain_walk_on_json(qwen):
    table = fresh_table("llamacpp__json", qwen)
    walk = Matcher(table.cg, qwen, mode="walk")
    two_passes(table, walk, trajectory("llamacpp__json", qwen, 40))


def test_split_survives_chart_growth(tiny_charts, qwen):  # noqa: F811 (fixture)
    table = fresh_table("llamacpp__c", qwen)
    walk = Matcher(table.cg, qwen, mode="walk")
    two_passes(table, walk, trajectory("llamacpp__c", qwen, 12))


def test_subtree_table_finds_every_row_through_growth():
    """Rows added one by one (keys rehashed, arrays replaced) are all found by the kernels'
    probe, with their entries and AW words; a key never added is not found."""
    sub = SubtreeClasses()
    rng = np.random.default_rng(0)
    tsize = np.full(1000, 3, np.int32)
    rows = {}
    for k in range(300):
        key = (int(rng.integers(0, 50)), int(rng.integers(1, 1000)))
        if not sub.wants(key):
            continue
        aw = np.zeros(40, np.uint32)
        aw[k % 40] = k + 1
        node = np.array([key[1], key[1] + 1][: 1 + k % 2], np.int32)
        kind = np.ones(len(node), np.int32)
        rows[key] = (sub.add(key, aw, node, kind, np.ones(len(node), np.int32), tsize), k)
    for (ci, node), (s, k) in rows.items():
        key_arr, val, info, ent_node, _, _, aw_word, aw_bits = sub.arrays()
        assert K._sub_class(key_arr, val, np.int64((ci << 32) | node)) == s
        e0, e1, w0, w1, work = info[K.INFO_W * s: K.INFO_W * (s + 1)]
        assert list(ent_node[e0:e1]) == [node, node + 1][: 1 + k % 2]
        assert list(aw_word[w0:w1]) == [k % 40] and list(aw_bits[w0:w1]) == [k + 1]
        assert work == 3 * (e1 - e0)
    assert K._sub_class(sub.key, sub.val, np.int64((77 << 32) | 5)) == -1


def test_states_with_equal_classes_share_a_row(qwen):
    """tokens.TokenTable._store: a state whose classes equal another's names the same row
    (a mask ORs and walks a shared row once); rows stay content-distinct and the masks of
    a precomputed table equal the plain walk's."""
    table = fresh_table("llamacpp__c", qwen)
    table.precompute()
    rows = {c.idx for c in table.classes.values()}
    assert len(rows) < len(table.classes)  # 186 states, 78 rows
    by_row = {}
    for c in table.classes.values():
        key = (c.aw.tobytes(), c.ent_node.tobytes(), c.ent_kind.tobytes())
        assert by_row.setdefault(key, c.idx) == c.idx
    walk = Matcher(table.cg, qwen, mode="walk")
    m = Matcher(table)
    for t in trajectory("llamacpp__c", qwen, 20):
        assert allowed(m) == allowed(walk)
        assert m.accept_token(t) and walk.accept_token(t)
