"""Start ⇒ goal, one law at a time (egg's ``test_fn!``): for every e-graph rewrite, a start
expression and a goal expression that the rewrite alone, run by the ``Runner``, puts in one
e-class — and that are *not* in one class before it runs (so the test can fail). Every IR
pass has its golden start ⇒ goal table too (clean-ups: ``test_cleanup_passes.GOLDEN``;
inliner and the xgrammar reshapings: below and ``test_target_xgrammar``); a test checks
that no rewrite or pass is left without one.
"""

from __future__ import annotations

import pytest

from gramopt.egraph import GrammarEGraph, Runner
from gramopt.grammar import Alt, CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, Seq, alt, seq
from gramopt.rewrites import rules

a, b, c = Literal("a"), Literal("b"), Literal("c")


def star(x):
    return Repeat(x, 0, None)


def plus(x):
    return Repeat(x, 1, None)


def opt(x):
    return Repeat(x, 0, 1)


# rewrite name -> (start rules, goal rules): the rule "start" must end in one class with "goal"
LAWS = {
    "rep-nested(x*)*": ([Rule("start", star(star(a)))], [Rule("goal", star(a))]),
    "rep-nested(x+)*": ([Rule("start", star(plus(a)))], [Rule("goal", star(a))]),
    "rep-nested(x*)+": ([Rule("start", plus(star(a)))], [Rule("goal", star(a))]),
    "rep-nested(x+)+": ([Rule("start", plus(plus(a)))], [Rule("goal", plus(a))]),
    "rep-nested(x?)*": ([Rule("start", star(opt(a)))], [Rule("goal", star(a))]),
    "rep-nested(x*)?": ([Rule("start", opt(star(a)))], [Rule("goal", star(a))]),
    "rep-nested(x?)+": ([Rule("start", plus(opt(a)))], [Rule("goal", star(a))]),
    "rep-nested(x+)?": ([Rule("start", opt(plus(a)))], [Rule("goal", star(a))]),
    "rep-nested(x?)?": ([Rule("start", opt(opt(a)))], [Rule("goal", opt(a))]),
    "rep-one": ([Rule("start", seq(b, Repeat(a, 1, 1)))], [Rule("goal", seq(b, a))]),
    "rep-zero": ([Rule("start", Repeat(a, 0, 0))], [Rule("goal", Epsilon())]),
    "rep-eps": ([Rule("start", star(Epsilon()))], [Rule("goal", Epsilon())]),
    "seq-flatten": ([Rule("start", Seq((a, Seq((b, c)))))], [Rule("goal", Seq((Seq((a, b)), c)))]),
    "seq-repetition": ([Rule("start", seq(a, star(a)))], [Rule("goal", plus(a))]),
    "alt-normalize": ([Rule("start", seq(c, Alt((a, b, a))))], [Rule("goal", seq(c, Alt((b, a))))]),
    "alt-optional": ([Rule("start", seq(c, Alt((a, Epsilon()))))], [Rule("goal", seq(c, opt(a)))]),
    "alt-charclass": ([Rule("start", seq(c, Alt((a, b))))], [Rule("goal", seq(c, CharClass(((97, 98),))))]),
    # X ::= "a" Y | "" ; Y ::= "a" X | ""  and  goal ::= "a" goal | "": equal up to renaming
    "delegation-bisim": ([Rule("start", alt(seq(a, Ref("y")), Epsilon())), Rule("y", alt(seq(a, Ref("start")), Epsilon()))],
                         [Rule("goal", alt(seq(a, Ref("goal")), Epsilon()))]),
    # X ::= X "a" | "b"  →  X = "b" "a"*
    "rec-normalize": ([Rule("start", alt(seq(Ref("start"), a), b))], [Rule("goal", seq(b, star(a)))]),
}


def _classes(start, goal, rewrite_names):
    g = Grammar(tuple(start + goal), "start")
    eg = GrammarEGraph(g)
    before = eg.snapshot()
    if rewrite_names:
        Runner([r for r in rules() if r.name in rewrite_names]).run(eg)
    after = eg.snapshot()
    return (before.of_name["start"], before.of_name["goal"]), (after.of_name["start"], after.of_name["goal"]), after


@pytest.mark.parametrize("name", list(LAWS))
def test_start_reaches_goal(name):
    start, goal = LAWS[name]
    (s0, g0), (s1, g1), _ = _classes(start, goal, {name})
    assert s0 != g0, "start and goal are one class before the rewrite runs: the test proves nothing"
    assert s1 == g1, f"{name} did not put start and goal in one class"


def test_rec_intro_offers_the_left_recursive_form():
    """rec-intro: X = x*  →  X = X x | ε: the class of x* gains the node Alt(Seq(X, x), ε)."""
    g = Grammar((Rule("start", star(a)),), "start")
    eg = GrammarEGraph(g)
    Runner([r for r in rules() if r.name == "rec-intro"]).run(eg)
    snap = eg.snapshot()
    x = snap.of_name["start"]
    seqs = {d for n in snap.classes[x] if n.kind == "Alt" for d in n.children
            if any(m.kind == "Seq" and m.children[0] == x for m in snap.classes[d])}
    assert seqs, "no X x | ε alternative in the class of x*"


def test_every_rewrite_has_a_law():
    names = {r.name for r in rules()}
    assert names - set(LAWS) == {"rec-intro"}  # its own test above


def test_every_ir_pass_has_a_golden_table():
    """Every IR pass of the registry production runs (``transforms.registry.PASSES``: not the
    e-graph passes, whose rewrites have their laws above, nor the composite ``cleanup`` and
    ``target`` passes) has a start ⇒ goal table."""
    from test_cleanup_passes import GOLDEN
    from gramopt.transforms.registry import CLEANUP, INLINE, PASSES, RESHAPE
    covered = {name for name, p in PASSES.items() if p.kind == CLEANUP and p.step is not None
               and p.step.__wrapped__ in GOLDEN}  # (production runs each clean-up behind its memo)
    covered |= {"inline", "cleanup-equivalent-rules"}  # test_inline_law, test_equivalent_rules_law below
    covered |= set(RESHAPE_GOLDEN)  # test_reshape_law below
    covered |= {"reshape-deep-groups"}  # test_deep_groups_law (no text reads back that deep)
    ir = {name for name, p in PASSES.items() if p.kind in (CLEANUP, INLINE, RESHAPE) and name != "cleanup"}
    assert ir <= covered, ir - covered


def test_inline_law():
    """S ::= "a" B "c" ; B ::= "b" "b"  ⇒  S ::= "a" "b" "b" "c" (κ does not grow)."""
    from gramopt.transforms.registry import PASSES
    g = Grammar((Rule("S", seq(a, Ref("B"), c)), Rule("B", seq(b, b))), "S")
    assert PASSES["inline"](g) == Grammar((Rule("S", seq(a, b, b, c)),), "S")
    rec = Grammar((Rule("S", seq(a, Ref("B"))), Rule("B", alt(seq(b, Ref("B")), c))), "S")
    assert PASSES["inline"](rec) == rec  # a self-recursive rule is never inlined


def test_equivalent_rules_law():
    """S ::= A B ; A ::= "a" A | "" ; B ::= "a" B | ""  ⇒  B merged into A (equal up to renaming)."""
    from gramopt.transforms.registry import PASSES
    g = Grammar((Rule("S", seq(Ref("A"), Ref("B"))), Rule("A", alt(seq(a, Ref("A")), Epsilon())),
                 Rule("B", alt(seq(a, Ref("B")), Epsilon()))), "S")
    out = PASSES["cleanup-equivalent-rules"](g)
    assert [r.name for r in out.rules] == ["S", "A"] and out.rule_map["S"].body == seq(Ref("A"), Ref("A"))


RESHAPE_GOLDEN = {  # pass: (start, goal), xgrammar EBNF
    "reshape-left-recursion": ('root ::= root "b" | "a"', 'root ::= "a" "b"*'),
    "reshape-inline-regular": ('root ::= ws "x" ws "y"\nws ::= [ \\t]*', 'root ::= [\\t ]* "x" [\\t ]* "y"'),
    "reshape-star-rules": ('root ::= "\\"" ( [^"\\\\] | "\\\\" [nt] )* "\\""',
                           'root ::= "\\"" root_until\n'
                           'root_until ::= "\\"" | [^"\\\\] root_until | "\\\\" [nt] root_until'),
    # the portable target's: a leaf rule read through, the group distributed (xgrammar's fast star)
    "reshape-flat-stars": ('root ::= "{" s "}"\ns ::= "\\"" ( [^"\\\\] | "\\\\" e )* "\\""\ne ::= [nt] | "u" [0-9]{4}',
                           'root ::= "{" s "}"\ns ::= "\\"" ("\\\\" [nt] | "\\\\" "u" [0-9]{4} | [^"\\\\])* "\\""'),
    # ... and a character rule written flat where it is used outside a repetition (a bounded string)
    "reshape-flat-characters": ('root ::= "{" s "}"\ns ::= "\\"" c c (c c?)? "\\""\nc ::= [^"\\\\] | "\\\\" [nt]',
                                'root ::= "{" s "}"\ns ::= "\\"" ("\\\\" [nt] | [^"\\\\]) ("\\\\" [nt] | [^"\\\\]) '
                                '(("\\\\" [nt] | [^"\\\\]) ("\\\\" [nt] | [^"\\\\])?)? "\\""'),
    # a counted repetition of a group written out (the clean-ups' c c c* is c{3,}; xgrammar's cliff)
    "reshape-counted-groups": ('root ::= "x" ("a" | "bc"){3,} [0-9]{2,}', 'root ::= "x" ("a" | "bc") ("a" | "bc") ("a" | "bc") '
                               '("a" | "bc")* [0-9]{2,}'),
    "reshape-root-wrapper": ('root ::= "a" root "b" | ""', 'root ::= root_rec\nroot_rec ::= "a" root_rec "b" | ""'),
    "reshape-rule-names": ('root ::= a_b a_b\na_b ::= "x"', 'root ::= a-b a-b\na-b ::= "x"'),
    # the portable target's: any character as all three engines read it ([^] / . / a full class)
    "reshape-any-char": ('root ::= "\\\\" [^] | [\\x00-\\U0010FFFF] "!" | [^a]',
                         'root ::= "\\\\" ([^\\n] | "\\n") | ([^\\n] | "\\n") "!" | [^a]'),
    "reshape-lookaheads": ('root ::= a "b" a "c"\na ::= [a-z]+', 'root ::= a "b" a "c"\na ::= [a-z]+ (= [bc])'),
    # llama.cpp's fix-up (targets/llamacpp.py): empty alternatives first, the widest last
    "reshape-empty-first": ('root ::= "a"* "b"+ "c"?', 'root ::= root-star "b" root-star-2 ("" | "c")\n'
                            'root-star ::= "" | "a" root-star\nroot-star-2 ::= "" | "b" root-star-2'),
    "reshape-widest-last": ('root ::= [a-z] | "x" | ""', 'root ::= "" | "x" | [a-z]'),
}


def test_deep_groups_law():
    """root ::= "a" ("a" ("a" …)?)? 60 levels deep  ⇒  no body deeper than 48: the deepest
    groups are rules of their own (root-1 …), as the reader lifts them; the language is the
    same. A body within the bound is left alone."""
    from gramopt.grammar.expr import MAX_PASS_DEPTH, depth
    from gramopt.transforms.registry import PASSES
    from gramopt.verify import check_equivalence
    body = Epsilon()
    for _ in range(30):  # each level: a sequence in an optional
        body = Repeat(seq(a, body), 0, 1)
    g = Grammar((Rule("root", seq(b, body)),), "root", dialect="gbnf")
    assert depth(g.rule("root").body) > MAX_PASS_DEPTH
    out = PASSES["reshape-deep-groups"](g)
    assert [r.name for r in out.rules][:2] == ["root", "root-1"] and len(out.rules) == 2
    assert all(depth(r.body) <= MAX_PASS_DEPTH for r in out.rules)
    assert check_equivalence(g, out).ok
    shallow = Grammar((Rule("root", seq(b, Repeat(seq(a, Repeat(a, 0, 1)), 0, 1))),), "root", dialect="gbnf")
    assert PASSES["reshape-deep-groups"](shallow) is shallow


@pytest.mark.parametrize("name", sorted(RESHAPE_GOLDEN))
def test_reshape_law(name):
    """Each reshaping on its own, start ⇒ goal (the passes of ``gramopt.transforms.reshape``)."""
    import gramopt
    from gramopt.transforms.registry import PASSES
    start, goal = RESHAPE_GOLDEN[name]
    out = PASSES[name](gramopt.parse(start + "\n", dialect="ebnf"))
    assert gramopt.write(out, "ebnf").strip() == goal
