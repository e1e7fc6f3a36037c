"""Structural analyses and ambiguity warnings on small grammars with known answers."""

from gramopt.grammar import (CharClass, Epsilon, Grammar, Literal, Ref, Repeat, Rule, alt, seq)
from gramopt.grammar.ambiguity import ambiguity_findings, self_concatenations
from gramopt.grammar.analysis import first_sets, structure
from gramopt import analyze


def g(*rules, start=None):
    rs = tuple(Rule(n, b) for n, b in rules)
    return Grammar(rs, start or rs[0].name)


a, b, plus = Literal("a"), Literal("b"), Literal("+")


def test_nullable_productive_reachable():
    gr = g(("S", seq(Ref("A"), Ref("B"))),
           ("A", alt(a, Epsilon())),
           ("B", Repeat(b, 0, None)),
           ("U", seq(a, Ref("U"))),  # unproductive and unreachable
           ("R", b))  # unreachable
    s = structure(gr)
    assert s.nullable == ("S", "A", "B")
    assert s.unproductive == ("U",)
    assert s.unreachable == ("U", "R")
    assert s.reachable == ("S", "A", "B")


def test_left_recursion_direct_and_indirect():
    gr = g(("S", alt(seq(Ref("S"), a), b)),  # direct
           ("X", seq(Ref("N"), Ref("Y"), a)),  # X → N Y a with N nullable: Y at left edge
           ("Y", alt(seq(Ref("X"), b), a)),  # Y → X b: indirect through X
           ("N", alt(Epsilon(), a)),
           ("Z", seq(a, Ref("Z"))), start="S")
    s = structure(gr)
    assert s.directly_left_recursive == ("S",)
    assert s.left_recursive == ("S", "X", "Y")


def test_unguarded_cycle():
    gr = g(("S", alt(Ref("T"), a)),
           ("T", seq(Ref("N"), Ref("S"), Ref("N"))),  # T ⇒ S with N ⇒ ε
           ("N", Repeat(b, 0, None)))
    assert structure(gr).unguarded_cycles == (("S", "T"),)
    guarded = g(("S", alt(seq(a, Ref("S")), a)))
    assert structure(guarded).unguarded_cycles == ()


def test_first_sets():
    gr = g(("S", seq(Ref("A"), b)), ("A", alt(Repeat(CharClass(((48, 57),)), 0, None), Literal("x"))))
    f = first_sets(gr)
    assert f["A"].ranges == ((48, 57), (120, 120)) and f["A"].nullable
    assert f["S"].ranges == ((48, 57), (98, 98), (120, 120)) and not f["S"].nullable


def test_ambiguity_forms():
    g4 = g(("S0", alt(Ref("S"), Epsilon())), ("S", alt(seq(Ref("S"), Ref("S")), a, b)))
    kinds = {(f.kind, f.rule) for f in ambiguity_findings(g4)}
    assert ("self-concat", "S") in kinds
    assert self_concatenations(g4) == ["S"]
    # X → X X with its left recursion removed, X → a X*: the same splits (a·(a)(a), a·(a a))
    star = g(("X", seq(a, Repeat(Ref("X"), 0, None))))
    assert self_concatenations(star) == ["X"] and ("self-concat", "X") in {(f.kind, f.rule) for f in ambiguity_findings(star)}
    bracketed = g(("X", seq(a, Repeat(Ref("X"), 0, None), b)))  # delimited: one split only
    assert self_concatenations(bracketed) == []
    e = g(("E", alt(seq(Ref("E"), plus, Ref("E")), Literal("1"))))
    assert [f.kind for f in ambiguity_findings(e)] == ["binary-operator", "overlap"]
    assert self_concatenations(e) == []
    dup = g(("S", alt(a, b, a)))
    assert "duplicate" in {f.kind for f in ambiguity_findings(dup)}
    nul = g(("S", alt(Repeat(a, 0, 1), Repeat(b, 0, None))))
    assert "nullable-alts" in {f.kind for f in ambiguity_findings(nul)}
    rep = g(("S", Repeat(Repeat(a, 0, 1), 0, None)))
    assert "nullable-repeat" in {f.kind for f in ambiguity_findings(rep)}
    ov = g(("S", alt(CharClass(((48, 57),)), seq(CharClass(((49, 57),)), Literal("0")))))
    assert [f.kind for f in ambiguity_findings(ov)] == ["overlap"]


def test_unambiguous_grammar_has_no_findings():
    g1 = g(("S", alt(seq(a, Ref("S"), b), Epsilon())))
    assert ambiguity_findings(g1) == []


def test_analyze_report_fields():
    g2 = g(("S", alt(seq(a, Ref("A"), b), Epsilon())), ("A", alt(seq(a, Ref("A"), b), Epsilon())))
    r = analyze(g2)
    assert (r.kappa, r.rules, r.nonterminals, r.productions) == (15, 2, 2, 4)
    assert '"kappa": 15' in r.to_json()
    assert "kappa" in r.format()


def test_inlined_depth():
    from gramopt.formats import parse
    from gramopt.grammar.analysis import inlined_depth
    cases = {  # GBNF => the depth with every non-recursive reference's body one level below it
        'root ::= "a"\n': 1,
        'root ::= "a" ("a" ("a")?)?\n': 5,                        # seq, opt, seq, opt, "a"
        'root ::= a\na ::= b\nb ::= "x"\n': 3,                      # a reference is a level
        'root ::= "a" b\nb ::= "c" | "d" b\n': 5,                   # b's own reference is a leaf
        'root ::= a a\na ::= "x" b\nb ::= "y" a | "z"\n': 4,        # a and b: one component, refs leaves
        "".join(f'r{i} ::= "a" r{i + 1}\n' for i in range(100)).replace("r0 ::=", "root ::=") + 'r100 ::= "b"\n': 201,
    }
    for text, want in cases.items():
        assert inlined_depth(parse(text, "gbnf")) == want, text
    lark = parse('start: A b\nb: B | "x" b\nA: B "y"\nB: "z"\n', "lark")
    assert inlined_depth(lark) == 5  # terminals inline like rules: start, A, its seq, B
