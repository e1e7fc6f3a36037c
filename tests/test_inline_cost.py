"""The inliner's cheap trial (``transforms/inline.py``): the κ change of an inlining computed
from counts (``inline_delta``) equals the change of the rewrite itself, and the inliner
decides exactly as one that rewrites every user to measure it (``_reference_round`` below,
the former implementation) — same grammar, same names, same budget charged."""

from dataclasses import replace

from hypothesis import HealthCheck, given, settings, strategies as st

from gramopt.costmodels.kappa import expr_syms, rule_kappa
from gramopt.grammar import (MAX_PASS_DEPTH, Alt, CharClass, Epsilon, Expr, Grammar, Literal, Ref, Repeat, Rule, Seq,
                             alt, depth, refs, seq, transform)
from gramopt.transforms import inline
from gramopt.transforms.inline import ALWAYS_MAX_KAPPA, Budget, inline_delta, inline_rules, is_leaf, uses_in
from examples import examples

NAMES = ["S", "A", "B", "C"]
BOUNDS = [(0, None), (1, None), (3, None), (0, 0), (0, 1), (1, 2), (2, 2), (2, 5)]


def exprs(depth: int, raw: bool):
    """Expressions over ``NAMES``; with ``raw`` also nodes built without the smart
    constructors (a ``Seq`` holding a ``Seq`` or ε, an ``Alt`` holding an ``Alt``, one-item
    nodes), which ``transform`` reshapes."""
    leaf = st.one_of(st.sampled_from([Literal("a"), Literal("bcd"), CharClass(((48, 57),)), Epsilon()]),
                     st.sampled_from(NAMES).map(Ref))
    if depth == 0:
        return leaf
    sub = exprs(depth - 1, raw)
    kinds = [leaf,
             st.lists(sub, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
             st.lists(sub, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
             st.tuples(sub, st.sampled_from(BOUNDS)).map(lambda t: Repeat(t[0], *t[1]))]
    if raw:
        kinds += [st.lists(sub, min_size=1, max_size=3).map(lambda xs: Seq(tuple(xs))),
                  st.lists(sub, min_size=1, max_size=3).map(lambda xs: Alt(tuple(xs)))]
    return st.one_of(*kinds)


def grammars(raw: bool):
    return st.tuples(st.lists(exprs(3, raw), min_size=4, max_size=4), st.sampled_from(["ebnf", "lark"])).map(
        lambda t: Grammar(tuple(Rule(n, b) for n, b in zip(NAMES, t[0])), "S", dialect=t[1]))


def _rewrite_delta(user: Expr, name: str, body, dialect: str) -> int:
    def sub(e):
        return body if isinstance(e, Ref) and e.name == name else e
    rule = Rule("U", user)
    return rule_kappa(replace(rule, body=transform(user, sub)), dialect) - rule_kappa(rule, dialect)


@settings(max_examples=examples(250), deadline=None, suppress_health_check=list(HealthCheck))
@given(exprs(4, raw=True), exprs(3, raw=True), st.sampled_from(NAMES), st.sampled_from(["ebnf", "lark"]))
def test_counted_delta_is_the_rewrites_delta(user, body, name, dialect):
    uses = uses_in(user)
    assert uses.depth == depth(user)
    assert set(uses.refs) == set(refs(user))
    got = inline_delta(uses, name, body, expr_syms(body, dialect == "lark"))
    if got is None:  # only where the docstring says the counts are not exact
        assert not uses.normal or isinstance(body, Epsilon)
    else:
        assert got == _rewrite_delta(user, name, body, dialect)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(exprs(4, raw=False), exprs(3, raw=False), st.sampled_from(NAMES))
def test_bodies_the_constructors_build_are_counted(user, body, name):
    """What readers and passes build (through ``seq`` / ``alt``) is ``normal``: the counts
    serve every trial but an ε body's."""
    uses = uses_in(user)
    assert uses.normal
    if not isinstance(body, Epsilon):
        assert inline_delta(uses, name, body, expr_syms(body)) == _rewrite_delta(user, name, body, "ebnf")


def test_weights_by_hand():
    """Spot checks of the table: ``B{2,5}`` counts B's symbols 2 + 3 times, ``B{3,}`` 2 + 2,
    ``B*`` once; an alternation spliced into an alternation saves 4."""
    bcd = Literal("bcd")  # 3 symbols: 2 more than the reference
    for bounds, times in [((2, 5), 5), ((3, None), 4), ((0, None), 1), ((2, 2), 2), ((0, 0), 0)]:
        user = seq(Literal("x"), Repeat(Ref("B"), *bounds))
        assert inline_delta(uses_in(user), "B", bcd, (3, 0)) == 2 * times == _rewrite_delta(user, "B", bcd, "ebnf")
    two = alt(Literal("p"), Literal("q"))  # κ of `B ::= "p" | "q"` is 2 + 2 + 2 = 6
    assert inline_delta(uses_in(alt(Literal("x"), Ref("B"))), "B", two, expr_syms(two)) == 6 - 4
    assert inline_delta(uses_in(seq(Literal("x"), Ref("B"))), "B", two, expr_syms(two)) == 6
    assert inline_delta(uses_in(Ref("B")), "B", two, expr_syms(two)) == 6 - 4


# ---------------------------------------------------------------- the former inliner, as the oracle


def _reference_round(grammar, always, budget):
    """The inliner's round as it was before the counted trial: every user rewritten and its
    κ recounted for every candidate."""
    pinned = {grammar.start} | {a for d in grammar.directives for a in d.args}
    rules = {r.name: r for r in grammar.rules}
    kap = {n: rule_kappa(r, grammar.dialect) for n, r in rules.items()}
    users_of: dict = {}
    for n, r in rules.items():
        for m in refs(r.body):
            users_of.setdefault(m, {})[n] = None
    inlined = []
    for name in list(rules):
        if name in pinned or name not in rules or name in refs(rules[name].body):
            continue
        body = rules[name].body
        users = [u for u in list(users_of.get(name, ())) if u in rules and u != name]
        if not budget.charge(kap[name] + sum(kap[u] for u in users)):
            break

        def sub(e, body=body, name=name):
            return body if isinstance(e, Ref) and e.name == name else e

        new = {u: replace(rules[u], body=transform(rules[u].body, sub)) for u in users}
        if any(depth(rules[u].body) + depth(body) - 1 > MAX_PASS_DEPTH and depth(r.body) > MAX_PASS_DEPTH
               for u, r in new.items()):
            continue
        delta = sum(rule_kappa(r, grammar.dialect) - kap[u] for u, r in new.items()) - kap[name]
        if delta <= 0 or (always is not None and kap[name] <= ALWAYS_MAX_KAPPA and always(rules[name])):
            for u, r in new.items():
                rules[u] = r
                kap[u] = rule_kappa(r, grammar.dialect)
                for m in refs(body):
                    users_of.setdefault(m, {})[u] = None
            del rules[name]
            inlined.append(name)
    if not inlined:
        return grammar, []
    return grammar.replace_rules(rules[r.name] for r in grammar.rules if r.name in rules), inlined


def _reference_inline(grammar, always, budget):
    inlined = []
    while not budget.spent:
        grammar, names = _reference_round(grammar, always, budget)
        if not names:
            break
        inlined += names
    return grammar, inlined


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(grammars(raw=True), st.booleans(), st.sampled_from([None, 0, 5, 20, 60, 200]))
def test_inliner_decides_as_the_rewriting_oracle(g, leaves, limit):
    always = is_leaf if leaves else None
    mine, ref = Budget() if limit is None else Budget(limit), Budget() if limit is None else Budget(limit)
    got, names = inline_rules(g, always=always, budget=mine)
    want, want_names = _reference_inline(g, always, ref)
    assert names == want_names
    assert got == want
    assert (mine.used, mine.spent) == (ref.used, ref.spent)


def test_a_deep_chain_measures_exact_depths():
    """A chain of rules nesting one level each: the depth bound trips and the exact depth
    of the rewritten users decides, as in the oracle."""
    n = MAX_PASS_DEPTH + 6
    rules = [Rule(f"R{i}", seq(Literal("a"), alt(Ref(f"R{i + 1}"), Literal("b")))) for i in range(n)]
    g = Grammar(tuple(rules) + (Rule(f"R{n}", Literal("z")),), "R0")
    got = inline_rules(g, always=is_leaf)
    want = _reference_inline(g, is_leaf, Budget())
    assert got == want
    assert max(depth(r.body) for r in got[0].rules) <= MAX_PASS_DEPTH
    assert inline.uses_in(got[0].rules[0].body).depth == depth(got[0].rules[0].body)
