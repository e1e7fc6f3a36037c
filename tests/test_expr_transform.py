"""``transform`` keeps what it does not change, and rebuilds (normalizes) what the smart
constructors would; FOLLOW computed once per occurrence equals the per-round recomputation."""

from __future__ import annotations

from pathlib import Path

from gramopt.formats import read
from gramopt.grammar import Alt, CharClass, Epsilon, Literal, Ref, Repeat, Seq, alt, rename_refs, seq, transform
from gramopt.grammar.analysis import first_of_expr, first_sets, nullable_expr, nullable_rules
from gramopt.grammar.follow import follow_sets
from gramopt.grammar.expr import normalize_ranges

A, B, C = Literal("a"), Literal("b"), CharClass(((48, 57),))


def test_an_unchanged_tree_comes_back_as_the_same_object():
    e = alt(seq(A, Repeat(alt(B, Ref("x")), 0, None)), seq(C, Ref("y")))
    assert transform(e, lambda x: x) is e
    assert rename_refs(e, {}) is e and rename_refs(e, {"z": "w"}) is e
    renamed = rename_refs(e, {"x": "w"})
    assert renamed == alt(seq(A, Repeat(alt(B, Ref("w")), 0, None)), seq(C, Ref("y")))
    assert renamed.items[1] is e.items[1]  # the untouched branch is shared


def test_a_tree_the_constructors_would_rebuild_is_normalized():
    nested = Seq((Seq((A, B)), C))
    assert transform(nested, lambda x: x) == Seq((A, B, C))
    assert transform(Seq((A, Epsilon(), B)), lambda x: x) == Seq((A, B))
    assert transform(Alt((Alt((A, B)), C)), lambda x: x) == Alt((A, B, C))
    assert transform(Seq((A,)), lambda x: x) == A
    assert transform(Seq([A, B]), lambda x: x) == Seq((A, B))  # a list of items becomes a tuple


def _follow_by_rounds(g):
    """FOLLOW recomputed from scratch every round (the definition, unoptimized)."""
    nullable = nullable_rules(g)
    first_ranges = {n: set(f.ranges) for n, f in first_sets(g, nullable).items()}
    ranges = {r.name: set() for r in g.rules}
    end = {r.name: r.name == g.start for r in g.rules}

    def first(e):
        out = set()
        first_of_expr(e, False, nullable, first_ranges, {}, out, set())
        return out

    def occ(e, after, after_end, found):
        if isinstance(e, Ref):
            found.append((e.name, set(after), after_end))
        elif isinstance(e, Seq):
            rs, en = set(after), after_end
            for item in reversed(e.items):
                occ(item, rs, en, found)
                rs, en = (rs | first(item), en) if nullable_expr(item, nullable) else (first(item), False)
        elif isinstance(e, Alt):
            for item in e.items:
                occ(item, after, after_end, found)
        elif isinstance(e, Repeat) and e.max != 0:
            occ(e.item, after | first(e.item) if e.max is None or e.max > 1 else after, after_end, found)

    changed = True
    while changed:
        changed = False
        for r in g.rules:
            found = []
            occ(r.body, ranges[r.name], end[r.name], found)
            for name, rs, e in found:
                if name in ranges and (not rs <= ranges[name] or (e and not end[name])):
                    ranges[name] |= rs
                    end[name] = end[name] or e
                    changed = True
    return {n: (normalize_ranges(ranges[n]) if ranges[n] else (), end[n]) for n in ranges}


def test_follow_sets_equal_the_per_round_definition():
    from gramopt.egraph import Limits
    from gramopt.passes import optimize
    no_engine_check = Limits(engine_check_steps=0)  # any xgrammar form will do: not 22 CPU s of masks on json
    for p in sorted((Path(__file__).parent / "data" / "gbnf").glob("*.gbnf")):
        g = read(str(p))
        for form in (g, optimize(g, target="xgrammar", verify=False, fast=True, limits=no_engine_check).grammar):
            got = {n: (f.ranges, f.end) for n, f in follow_sets(form).items()}
            assert got == _follow_by_rounds(form), p
