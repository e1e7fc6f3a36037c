"""The e-graph engine: batched lowering, congruence merges, runner limits, well-founded
extraction."""


from gramopt.egraph import Extractor, GrammarEGraph, Limits, Runner, StopReason
from gramopt.grammar import Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from gramopt.rewrites import rules

a, b = Literal("a"), Literal("b")


def test_lowering_500_rules_is_batched():
    n = 500
    g = Grammar(tuple(Rule(f"r{i}", alt(seq(Literal("x"), Ref(f"r{(i + 1) % n}")),
                                        seq(Literal("y"), Ref(f"r{(i * 7) % n}"), Literal("z")), Epsilon()))
                      for i in range(n)), "r0")
    # Timing lives in benchmarks/optimizer_bench.py (lowering of this grammar); here: shape.
    snap = GrammarEGraph(g).snapshot()
    assert len(snap.of_name) == n


def test_equal_rules_merge_by_congruence():
    g = Grammar((Rule("S", alt(seq(a, Ref("A"), b), Epsilon())),
                 Rule("A", alt(seq(a, Ref("A"), b), Epsilon())),
                 Rule("X", Ref("S"))), "S")
    snap = GrammarEGraph(g).snapshot()
    assert snap.of_name["S"] == snap.of_name["A"] == snap.of_name["X"]


def test_runner_saturates_and_reports():
    g = Grammar((Rule("S", Repeat(Repeat(a, 0, None), 0, None)),), "S")
    eg = GrammarEGraph(g)
    rep = Runner(rules()).run(eg)
    assert rep.stop_reason is StopReason.SATURATED
    assert rep.to_json()["stop_reason"] == "saturated"


def test_runner_iteration_limit():
    g = Grammar((Rule("S", alt(seq(Ref("S"), Ref("S")), a, b)),), "S")
    rep = Runner(rules(), Limits(iterations=1)).run(GrammarEGraph(g))
    assert rep.stop_reason is StopReason.ITERATION_LIMIT and rep.iterations == 1


def test_extraction_never_picks_unproductive_recursion():
    # the class of a+ contains S S; S ::= S S alone would be the empty language
    g = Grammar((Rule("S", alt(seq(Ref("S"), Ref("S")), a)),), "S")
    eg = GrammarEGraph(g)
    Runner(rules()).run(eg)
    out = Extractor(eg).extract().grammar
    from gramopt.verify.reference import Recognizer
    r = Recognizer(out)
    assert r.accepts(b"a") and r.accepts(b"aaaa") and not r.accepts(b"")


def _rounds_nullable(snap):
    """Nullable classes as they were computed: rounds over every class until none changes."""
    from gramopt.egraph.rewrite import node_nullable
    out, changed = set(), True
    while changed:
        changed = False
        for c, nodes in snap.classes.items():
            if c not in out and any(node_nullable(n, out) for n in nodes):
                out.add(c)
                changed = True
    return out


def test_nullable_classes_the_least_fixpoint_of_the_rounds():
    from hypothesis import given, settings
    from examples import examples
    from gramopt.egraph.lower import ENode, Snapshot
    from gramopt.egraph.rewrite import nullable_classes
    from test_partition_refinement import class_graphs

    @settings(max_examples=examples(600), deadline=None)
    @given(class_graphs())
    def same(classes):
        snap = Snapshot(classes, {}, {}, 0)
        assert nullable_classes(snap) == _rounds_nullable(snap)

    same()
    n = 10_000  # a chain: class i = class i+1 ?; the last one ε
    chain = {i: [ENode("Alt", None, (i + 1, n + 1))] for i in range(n)} | {n: [ENode("Eps", None)], n + 1: [ENode("Tok", 0)]}
    assert nullable_classes(Snapshot(chain, {}, {}, 0)) == set(range(n + 1))


def _lowered(g: Grammar, max_nodes: int, monkeypatch):
    """(the snapshot, every lowering command) of ``g`` with ``MAX_TERM_NODES = max_nodes``."""
    import gramopt.egraph.lower as lower
    monkeypatch.setattr(lower, "MAX_TERM_NODES", max_nodes)
    sent: list[str] = []
    run_commands = lower.GrammarEGraph.run_commands
    monkeypatch.setattr(lower.GrammarEGraph, "run_commands", lambda self, cs: (sent.extend(cs), run_commands(self, cs))[1])
    return GrammarEGraph(g).snapshot(), sent


def _built(command: str) -> int:
    """The e-nodes one lowering command builds (its constructor calls)."""
    return sum(command.count(k) for k in ("(Tok ", "(Eps)", "(Seq ", "(Alt ", "(Rep ", "(R "))


def test_a_large_rule_is_lowered_in_bounded_pieces_to_the_same_egraph(monkeypatch):
    """A rule of ~1,500 e-nodes (egglog's memory for one command grows superlinearly with
    its term: ``MAX_TERM_NODES``) is sent as pieces of at most 64 e-nodes each, bound to handles first, and the
    e-graph read back is the one lowering it whole gives: same classes, same ids, same nodes."""
    body = alt(*(seq(Literal(f"w{i}"), Repeat(alt(a, seq(b, Ref("S"))), 0, None), Ref("T")) for i in range(150)))
    g = Grammar((Rule("S", body), Rule("T", alt(a, Epsilon()))), "S")
    whole, sent_whole = _lowered(g, 10**9, monkeypatch)
    pieces, sent = _lowered(g, 64, monkeypatch)
    assert max(map(_built, sent_whole)) > 1_000
    assert max(map(_built, sent)) <= 64 and any(c.startswith("(set (W ") for c in sent)
    assert (pieces.classes, pieces.names, pieces.of_name, pieces.n_nodes) == \
        (whole.classes, whole.names, whole.of_name, whole.n_nodes)


def test_lowering_in_pieces_keeps_the_egraph_of_random_grammars(monkeypatch):
    """Pieces of at most 2 e-nodes (every composite node split) give the snapshot of whole
    terms on random grammars: creation order, hence class ids, unchanged."""
    from hypothesis import given, settings
    from examples import examples
    from test_cleanup_support import grammars

    @settings(max_examples=examples(150), deadline=None)
    @given(grammars())
    def same(g):
        whole, _ = _lowered(g, 10**9, monkeypatch)
        pieces, sent = _lowered(g, 2, monkeypatch)
        assert max(map(_built, sent)) <= 2
        assert (pieces.classes, pieces.names, pieces.of_name, pieces.n_nodes) == \
            (whole.classes, whole.names, whole.of_name, whole.n_nodes)

    same()


def _saturated(g: Grammar, max_nodes: int, monkeypatch):
    """(snapshot after saturating, the runner's report, the extracted grammar) of ``g`` with
    ``MAX_TERM_NODES = max_nodes``, every rewrite family."""
    import gramopt.egraph.lower as lower
    monkeypatch.setattr(lower, "MAX_TERM_NODES", max_nodes)
    from gramopt.egraph.extract import ExtractionError
    eg = GrammarEGraph(g)
    rep = Runner(rules(), Limits(iterations=6)).run(eg)
    try:
        out = Extractor(eg).extract().grammar
    except ExtractionError as e:  # (an unproductive class: the same error both ways)
        out = str(e)
    return eg.snapshot(), rep, out


def test_witnesses_named_by_handles_saturate_to_the_same_egraph(monkeypatch):
    """The rewrites' unions name classes by witness terms; past ``MAX_TERM_NODES`` a witness is
    a handle bound first. With every witness over 2 e-nodes a handle, random grammars saturate
    to the same e-graph, fire the same rewrites (a handle stands for one term structure, so
    the runner's de-duplication by text is unchanged) and extract the same grammar."""
    from hypothesis import given, settings
    from examples import examples
    from test_cleanup_support import grammars

    @settings(max_examples=examples(60), deadline=None)
    @given(grammars())
    def same(g):
        snap_a, rep_a, out_a = _saturated(g, 10**9, monkeypatch)
        snap_b, rep_b, out_b = _saturated(g, 2, monkeypatch)
        assert (snap_b.classes, snap_b.names, snap_b.n_nodes) == (snap_a.classes, snap_a.names, snap_a.n_nodes)
        assert (rep_b.fired, rep_b.iterations, rep_b.stop_reason) == (rep_a.fired, rep_a.iterations, rep_a.stop_reason)
        assert out_b == out_a

    same()


def test_the_runners_union_keys_are_its_spelled_out_texts(monkeypatch):
    """The runner sends a union once: its key (``term_key``, ``class_structure``) is equal for
    two unions exactly when their texts with every witness spelled out are (the de-duplication
    by text it replaced). Checked on random grammars: key → text and text → key are functions."""
    from hypothesis import given, settings
    from examples import examples
    from test_cleanup_support import grammars
    import gramopt.egraph.runner as runner
    from gramopt.egraph.rewrite import render, term_key

    @settings(max_examples=examples(60), deadline=None)
    @given(grammars())
    def keyed(g):
        texts: dict[int, set[str]] = {}

        def spy(term, eg):
            k = term_key(term, eg)
            texts.setdefault(k, set()).add(render(term, eg))  # (whole: MAX_TERM_NODES is 64)
            return k
        monkeypatch.setattr(runner, "term_key", spy)
        eg = GrammarEGraph(g)
        Runner(rules(), Limits(iterations=6)).run(eg)
        for c in eg.snapshot().classes:
            if len(eg.witness(c)) < 400:  # spelled out
                texts.setdefault(eg.class_structure(c), set()).add(eg.witness(c))
        assert all(len(t) == 1 for t in texts.values())
        assert len({next(iter(t)) for t in texts.values()}) == len(texts)

    keyed()
    # by hand: bounds, order and kind tell terms apart; ε in a sequence and one-item groups do
    # not; a class's key is its witness term's
    eg = GrammarEGraph(Grammar((Rule("S", Repeat(seq(a, b), 0, None)),), "S"))
    ta, tb = ("tok", a), ("tok", b)
    keys = [term_key(t, eg) for t in (("rep", ta, 0, -1), ("rep", ta, 0, 1), ("rep", ta, 1, -1), ("seq", (ta, tb)),
                                      ("seq", (tb, ta)), ("alt", (ta, tb)), ta, tb, ("eps",))]
    assert len(set(keys)) == len(keys)
    assert term_key(("seq", (ta, ("eps",))), eg) == term_key(ta, eg)
    assert term_key(("seq", (ta, ("eps",), tb)), eg) == term_key(("seq", (ta, tb)), eg)
    snap = eg.snapshot()
    ab = next(c for c, ns in snap.classes.items() if ns[0].kind == "Seq")
    assert term_key(("c", ab), eg) == term_key(("seq", (ta, tb)), eg)
    assert term_key(("c", snap.of_name["S"]), eg) != term_key(("rep", ("seq", (ta, tb)), 0, -1), eg)  # (R "S")
