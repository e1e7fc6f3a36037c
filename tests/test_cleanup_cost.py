"""What makes the clean-up rounds cheap on large grammars changes no output: an expression
node's remembered hash is its fields' hash (and is not pickled), ``rebuilds_as_is`` says
exactly when the smart constructors would rebuild a node equal, pruning returns an untouched
rule itself, ``safe_nullable`` answers as its former all-rules computation, and the factoring
memo's node bound evicts without changing a result."""

from __future__ import annotations

import pickle
from dataclasses import replace

from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.grammar import Alt, CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, Seq, alt, rebuilds_as_is, refs, seq
from gramopt.grammar.analysis import nullable_rules, productive_rules
from gramopt.grammar.expr import UNHASHED
from gramopt.transforms.cleanup import factoring
from gramopt.transforms.cleanup.common import alternatives, keep_alternatives, safe_nullable
from gramopt.transforms.cleanup.unproductive import _prune_rule, prune, remove_unproductive
from test_cleanup_support import expressions, grammars
from examples import examples

A, B, C = Literal("a"), Literal("b"), CharClass(((48, 57),))


def test_a_remembered_hash_is_the_fields_hash_and_stays_in_its_process():
    e = alt(seq(A, Repeat(alt(B, Ref("x")), 0, None)), seq(C, Ref("y")))
    assert hash(e) == hash((e.items,)) and e._hash == hash(e)
    assert hash(Repeat(A, 1, None)) == hash((A, 1, None))
    copy = pickle.loads(pickle.dumps(e))
    assert copy == e and copy._hash == UNHASHED  # recomputed where it lands
    assert hash(copy) == hash(e)
    assert replace(e, items=e.items)._hash == UNHASHED and repr(e) == repr(copy)
    assert {e: 1}[alt(seq(A, Repeat(alt(B, Ref("x")), 0, None)), seq(C, Ref("y")))] == 1


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(expressions(["R0", "R1"]), min_size=1, max_size=4), st.booleans(), st.booleans())
def test_rebuilds_as_is_is_the_constructors_verdict(items, as_alt, raw):
    """Raw nodes (``Seq``/``Alt`` built directly: one item, nested alike, ε in a sequence)
    included: ``rebuilds_as_is(e, e.items)`` holds exactly when the constructor gives ``e``."""
    make, node = (alt, Alt) if as_alt else (seq, Seq)
    e = node(tuple(items)) if raw else make(*items)
    if not isinstance(e, node):
        return
    assert rebuilds_as_is(e, list(e.items)) == (make(*e.items) == e and _normal_items(e))
    assert not rebuilds_as_is(e, list(e.items)[:-1])


def _normal_items(e) -> bool:
    kinds = (Alt,) if isinstance(e, Alt) else (Seq, Epsilon)
    return len(e.items) > 1 and not any(isinstance(i, kinds) for i in e.items)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(grammars())
def test_pruning_keeps_untouched_rules_and_equals_the_full_rebuild(g):
    productive = productive_rules(g)
    for r in g.rules:
        if r.name not in productive:
            continue
        rebuilt = keep_alternatives(r, [prune(a, productive) for a in alternatives(r.body)])
        out = _prune_rule(r, productive)
        assert out == rebuilt
        if out is r:  # kept as it is: the rebuild is equal
            assert rebuilt == r
    out = remove_unproductive(g)
    if out == g:
        assert out is g


def _safe_nullable_all_rules(grammar):
    """``safe_nullable`` as it was: every rule's reach computed (the oracle)."""
    nullable = nullable_rules(grammar)
    graph = {r.name: set(refs(r.body)) for r in grammar.rules}
    reach = {}
    for name in graph:
        seen, stack = set(), list(graph[name])
        while stack:
            n = stack.pop()
            if n not in seen and n in graph:
                seen.add(n)
                stack.extend(graph[n])
        reach[name] = seen
    return {name: {b for b in nullable if b != name and name not in reach.get(b, ())} for name in graph}


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(grammars())
def test_safe_nullable_answers_as_the_all_rules_computation_on_every_reference(g):
    """Asked of the rules a body references (all the rewrites ask), the component test gives
    the reach computation's answer."""
    new, old = safe_nullable(g), _safe_nullable_all_rules(g)
    assert new.keys() == old.keys()
    for r in g.rules:
        for b in refs(r.body):
            assert (b in new[r.name]) == (b in old[r.name]), (r.name, b)


def test_safe_nullable_distrusts_exactly_the_rules_own_component():
    g = Grammar((Rule("S", seq(Ref("A"), Ref("N"))), Rule("A", alt(seq(Literal("a"), Ref("S")), Epsilon())),
                 Rule("N", alt(Literal("n"), Epsilon()))), "S")
    safe = safe_nullable(g)
    assert "N" in safe["S"] and "A" not in safe["S"]  # A reaches S: nullable only through S's own equations
    assert "S" not in safe["A"] and "N" in safe["A"]


def test_the_factoring_memo_is_bounded_by_nodes_and_keeps_results(monkeypatch):
    monkeypatch.setattr(factoring, "_MEMO", {})
    monkeypatch.setattr(factoring, "_memo_held", 0)
    monkeypatch.setattr(factoring, "_MEMO_NODES", 40)
    words = [Rule(f"W{i}", alt(*(Literal(f"ab{i}{w}") for w in "xyz"))) for i in range(12)]
    first = [factoring._rule_memo(r, "ebnf") for r in words]
    assert factoring._memo_held <= 40 and 1 <= len(factoring._MEMO) < len(words)
    assert sum(h for _, h in factoring._MEMO.values()) == factoring._memo_held
    assert [factoring._rule_memo(r, "ebnf") for r in words] == first == [factoring._rule(r, "ebnf") for r in words]
    monkeypatch.setattr(factoring, "_MEMO_NODES", 1)  # a rule larger than the bound: the newest stays
    factoring._rule_memo(words[0], "ebnf")
    assert len(factoring._MEMO) == 1
