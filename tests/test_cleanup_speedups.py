"""The clean-ups' written-out helpers give what their plain definitions give (differential,
hypothesis): ``refs``, ``count_nodes``, ``_fused`` and ``_template`` against ``walk`` /
``transform``, and merge_equivalent_rules's blocks on random grammars."""

from hypothesis import given, settings, strategies as st

from gramopt.grammar import Ref, Repeat, Seq, Alt, transform, walk
from gramopt.grammar.expr import count_nodes, refs
from gramopt.transforms.cleanup.equivalent_rules import _HOLE, _fused, _template, unfolded_bodies
from gramopt.transforms.cleanup.fusion import fuse_items
from test_cleanup_support import expressions, grammars
from examples import examples

NAMES = ["R0", "R1", "R2"]


def plain_refs(e):
    seen = {}
    for node in walk(e):
        if isinstance(node, Ref):
            seen.setdefault(node.name, None)
    return list(seen)


def plain_template(body, known):
    template, named = [], []
    for e in walk(body):
        if isinstance(e, (Seq, Alt)):
            template.append((type(e), len(e.items)))
        elif isinstance(e, Repeat):
            template.append((Repeat, e.min, e.max))
        elif isinstance(e, Ref) and e.name in known:
            template.append(_HOLE)
            named.append(e.name)
        else:
            template.append(e)
    return tuple(template), tuple(named)


@settings(max_examples=examples(300), deadline=None)
@given(expressions(NAMES, depth=4), st.sampled_from([None, 0, 1, 3, 8]))
def test_walk_helpers(e, limit):
    assert refs(e) == plain_refs(e)
    n = sum(1 for _ in walk(e))
    assert count_nodes(e) == n
    assert (count_nodes(e, limit) <= limit) == (n <= limit) if limit is not None else True


@settings(max_examples=examples(300), deadline=None)
@given(expressions(NAMES, depth=4), st.sets(st.sampled_from(NAMES)))
def test_fused_and_template(e, known):
    assert _fused(e) == transform(e, lambda x: fuse_items(x) if isinstance(x, Seq) else x)
    assert _template(e, known, {}) == plain_template(e, known)


@settings(max_examples=examples(200), deadline=None)
@given(grammars())
def test_templates_of_unfolded_bodies(g):
    bodies, _ = unfolded_bodies(g)
    memo: dict = {}
    known = set(g.names)
    for name, body in bodies.items():
        assert _template(body, known, memo) == plain_template(body, known)
