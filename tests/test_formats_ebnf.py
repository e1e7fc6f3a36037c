"""GBNF / xgrammar EBNF / Go-EBNF: golden tables for the reader and the writer,
print → parse → print stability, and random IR → text → IR."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramopt.formats import parse, write
from gramopt.formats.ebnf import format_expr, parse_ebnf, with_llamacpp_names, with_root_start, write_ebnf
from gramopt.formats.goebnf import parse_goebnf
from gramopt.grammar import (Alt, CharClass, Directive, Epsilon, Grammar, GrammarError, Literal, Ref,
                             Regex, Repeat, Rule, Seq, SourcePos, Terminal, alt, seq, walk)
from gramopt.verify.reference import Recognizer
from examples import examples

a, b, c = Literal("a"), Literal("b"), Literal("c")
ANY = CharClass((), negated=True)


def cls(*ranges, negated=False):
    return CharClass(tuple((r, r) if isinstance(r, int) else r for r in ranges), negated)


def root_body(text, dialect="ebnf"):
    return parse_ebnf(text, dialect).rule("root").body


# ---------------------------------------------------------------- reader: syntax → IR

SYNTAX = [
    ('root ::= "abc"', Literal("abc")),
    ('root ::= ""', Epsilon()),
    ('root ::= "a" "b"', Seq((a, b))),
    ('root ::= ("a" (("b")))', Seq((a, b))),
    ('root ::= "a" | "b" | "c"', Alt((a, b, c))),
    ('root ::= ("a" | ("b" | "c"))', Alt((a, b, c))),
    ('root ::= "a" ("b" "c")', Seq((a, b, c))),
    ('root ::= "a" "" "b"', Seq((a, b))),
    ('root ::= ()', Epsilon()),
    ('root ::= ( "y" | )', Alt((Literal("y"), Epsilon()))),
    ('root ::= "a"*', Repeat(a, 0, None)),
    ('root ::= "a"+', Repeat(a, 1, None)),
    ('root ::= "a"?', Repeat(a, 0, 1)),
    ('root ::= "a"{3}', Repeat(a, 3, 3)),
    ('root ::= "a"{2,}', Repeat(a, 2, None)),
    ('root ::= "a"{2,5}', Repeat(a, 2, 5)),
    ('root ::= "a"{ 2 , 5 }', Repeat(a, 2, 5)),
    ('root ::= "a"{0, -1}', Repeat(a, 0, None)),
    ('root ::= "a"{0}', Repeat(a, 0, 0)),
    ('root ::= ("a" "b")*', Repeat(Seq((a, b)), 0, None)),
    ('root ::= "a"**', Repeat(Repeat(a, 0, None), 0, None)),  # llama.cpp stacks quantifiers
    ('root ::= "a" "b"* | "c"', Alt((Seq((a, Repeat(b, 0, None))), c))),
    ('root ::= [a-z]', cls((0x61, 0x7A))),
    ('root ::= [^"\\\\]', cls(0x22, 0x5C, negated=True)),
    ('root ::= [a-]', cls(0x2D, 0x61)),
    ('root ::= [-a]', cls(0x2D, 0x61)),
    ('root ::= [a-c-e]', cls((0x61, 0x63), 0x2D, 0x65)),
    ('root ::= [\\]\\[]', cls(0x5B, 0x5D)),
    ('root ::= [\\x00-\\x1F]', cls((0, 0x1F))),
    ('root ::= [\\u00e9]', cls(0xE9)),
    ('root ::= [\\U0001F600-\\U0001F64F]', cls((0x1F600, 0x1F64F))),
    ('root ::= [+\\-]', cls(0x2B, 0x2D)),
    ('root ::= [\\^a]', cls(0x5E, 0x61)),
    ('root ::= [^]', ANY),
    ('root ::= []', CharClass(())),
    ('root ::= .', ANY),
    ('root ::= "\\n\\r\\t\\\\\\"\\\'"', Literal("\n\r\t\\\"'")),
    ('root ::= "\\x41"', Literal("A")),
    ('root ::= "\\u00e9\\U0001F600"', Literal("é\U0001F600")),
    ('root ::= "\\e\\0\\?\\/"', Literal("\x1b\x00?/")),
    ('root ::= "é😀"', Literal("é😀")),
    ('root ::= "\t"', Literal("\t")),
    ('root ::= "a" # inline\n  | "b"', Alt((a, b))),
    ('root ::= (\n  "a"\n  "b"\n)', Seq((a, b))),
    ('root ::= "a"\r\n  | "b"\r\n', Alt((a, b))),
]


@pytest.mark.parametrize("text,expected", SYNTAX)
def test_syntax_ebnf(text, expected):
    assert root_body(text, "ebnf") == expected


GBNF_SYNTAX = [
    ('root ::= | " "', Alt((Epsilon(), Literal(" ")))),
    ('root ::= "x" |', Alt((Literal("x"), Epsilon()))),
    ('root ::= "\\x41B"', Literal("AB")),  # llama.cpp: \x takes exactly two digits
    ('root ::= .*', Repeat(ANY, 0, None)),
    ('root ::= [\\[\\]]', cls(0x5B, 0x5D)),
]


@pytest.mark.parametrize("text,expected", GBNF_SYNTAX)
def test_syntax_gbnf(text, expected):
    assert root_body(text, "gbnf") == expected


def test_hex_escape_is_greedy_in_xgrammar_ebnf():
    assert root_body('root ::= "\\x41B"', "ebnf") == Literal("\u041b")


def test_rule_names_and_references():
    g = parse_ebnf('root ::= a-b_c x.y\na-b_c ::= "x"\nx.y ::= "y"\n')
    assert g.names == ["root", "a-b_c", "x.y"]
    assert g.rule("root").body == Seq((Ref("a-b_c"), Ref("x.y")))
    g = parse_ebnf('root ::= a-b_c\na-b_c ::= "x"\n', "gbnf")
    assert g.rule("root").body == Ref("a-b_c")


def test_lookahead_and_grammar_fields():
    text = ('# header line\n\n# about root\nroot ::= item (= "," | "}")  # trailing\n'
            'item ::= "a"\n   | "b"  # two\n# about tail\ntail ::= "t"\n# end\n')
    g = parse_ebnf(text.replace("item (", "item tail ("), "ebnf")
    assert g.dialect == "ebnf" and g.start == "root"
    assert g.rule("root").lookahead == Alt((Literal(","), Literal("}")))
    assert g.header == "header line"
    assert [r.comment for r in g.rules] == ["about root\ntrailing", "two", "about tail\nend"]
    assert [r.pos for r in g.rules] == [SourcePos(4, 1), SourcePos(5, 1), SourcePos(8, 1)]


def test_comment_block_directly_above_first_rule_is_its_own():
    g = parse_ebnf("# one\n# two\nroot ::= \"a\"\n")
    assert g.header == "" and g.rules[0].comment == "one\ntwo"


# ---------------------------------------------------------------- Go EBNF

GOEBNF = [
    ('a = "x" .', Literal("x")),
    ('a = .', Epsilon()),
    ('a = "" .', Epsilon()),
    ('a = "x" | "y" "z" .', Alt((Literal("x"), Seq((Literal("y"), Literal("z")))))),
    ('a = [ "x" ] { "y" } ( "z" ) .', Seq((Repeat(Literal("x"), 0, 1), Repeat(Literal("y"), 0, None),
                                           Literal("z")))),
    ('a = "0" … "9" .', cls((0x30, 0x39))),
    ('a = "0" ... "9" .', cls((0x30, 0x39))),
    ('a = `x\\n` .', Literal("x\\n")),
    ('a = "\\xc3\\xa9\\u00e9\\101\\t" .', Literal("ééA\t")),
    ('// c\na = /* inline */ "x" .', Literal("x")),
]


@pytest.mark.parametrize("text,expected", GOEBNF)
def test_syntax_goebnf(text, expected):
    g = parse_goebnf(text)
    assert g.start == "root" and g.dialect == "goebnf"
    assert g.rule("root").body == expected


def test_goebnf_start_is_first_production_renamed_root():
    g = parse_goebnf('value = "[" items "]" | root .\nitems = value { "," value } .\nroot = "r" .\n')
    assert g.names == ["root", "items", "root_1"]
    assert g.rule("items").body == Seq((Ref("root"), Repeat(Seq((Literal(","), Ref("root"))), 0, None)))
    assert g.rule("root").body == Alt((Seq((Literal("["), Ref("items"), Literal("]"))), Ref("root_1")))
    assert parse_ebnf(write_ebnf(g)) == g


# ---------------------------------------------------------------- writer: IR → text

WRITE = [
    (Literal("abc"), '"abc"'),
    (Literal('a"b\\c'), '"a\\"b\\\\c"'),
    (Literal("\t\n\r"), '"\\t\\n\\r"'),
    (Literal("\x00"), '"\\x00"'),
    (Literal("\x01AB"), '"\\x01\\x41\\x42"'),  # xgrammar's \x is greedy: escape the hex digit after it
    (Literal("\x01G"), '"\\x01G"'),
    (Literal("\x7f\x85"), '"\\x7F\\x85"'),
    (Literal("é😀"), '"é😀"'),
    (Literal("\u00a0"), '"\\xA0"'),
    (Literal("\u2028"), '"\\u2028"'),
    (Literal("\u0600"), '"\u0600"'),  # \u0600 would lose its leading zero in llguidance
    (Literal("[]'"), '"[]\'"'),  # xgrammar rejects \[ in strings, llguidance \'
    (Epsilon(), '""'),
    (Alt((a, Epsilon())), '"a" | ""'),
    (Seq((a, Alt((b, c)))), '"a" ("b" | "c")'),
    (Repeat(Seq((a, b)), 0, None), '("a" "b")*'),
    (Repeat(Alt((a, b)), 1, None), '("a" | "b")+'),
    (Repeat(a, 0, 1), '"a"?'),
    (Repeat(a, 3, 3), '"a"{3}'),
    (Repeat(a, 2, None), '"a"{2,}'),
    (Repeat(a, 2, 5), '"a"{2,5}'),
    (Repeat(a, 0, 0), '"a"{0}'),
    (Repeat(Repeat(a, 0, None), 0, None), '("a"*)*'),
    (Seq((Repeat(a, 0, None), b)), '"a"* "b"'),
    (Alt((Seq((a, b)), c)), '"a" "b" | "c"'),
    (Ref("x-y"), "x-y"),
    (cls((0x61, 0x7A), 0x5F), "[_a-z]"),
    (cls(0x61, 0x62), "[ab]"),
    (cls(0x22, 0x5C, negated=True), '[^"\\\\]'),
    (cls(0x2D, 0x5D, 0x61), "[\\]a-]"),  # a lone '-' last, ']' escaped
    (cls((0x2D, 0x2F)), "[\\x2D-/]"),
    (cls(0x5E, 0x61), "[\\x5E\\x61]"),  # a leading '^' must not negate
    (cls(0x5E, 0x61, negated=True), "[^^a]"),
    (cls((0, 0x1F)), "[\\x00-\\x1F]"),
    (cls(0x01, 0x41), "[\\x01\\x41]"),
    (cls((0xD800, 0xDFFF)), "[\\uD800-\\uDFFF]"),
    (cls((0x10000, 0x10FFFF)), "[\U00010000-\U0010FFFF]"),
    (CharClass(()), "[]"),
]


@pytest.mark.parametrize("expr,text", WRITE)
def test_writer_expressions(expr, text):
    assert format_expr(expr, "ebnf") == text
    assert parse_ebnf(f"root ::= {text}\nx-y ::= \"q\"\n").rule("root").body == expr


@pytest.mark.parametrize("expr,ebnf,gbnf", [
    (ANY, "[^]", "."),  # xgrammar 0.2.8 has no '.'; llama.cpp breaks on '[^]'
    (CharClass(()), "[]", "[^\\x00-\U0010FFFF]"),
])
def test_writer_any_and_empty_class_per_dialect(expr, ebnf, gbnf):
    assert format_expr(expr, "ebnf") == ebnf and format_expr(expr, "gbnf") == gbnf


def test_writer_whole_grammar():
    g = parse_ebnf('# head\n\n# the start\nroot ::= ws ("x" | ) (= "y")\nws ::= | " " ws  # spaces\n', "ebnf")
    assert write_ebnf(g) == ('# head\n\n# the start\nroot ::= ws ("x" | "") (= "y")\n'
                             '# spaces\nws ::= "" | " " ws\n')


def test_write_dispatch_uses_grammar_dialect():
    g = parse('root ::= "a" | ', "gbnf")
    assert write(g) == 'root ::= "a" | ""\n'
    assert write(g, "ebnf") == 'root ::= "a" | ""\n'


def test_writer_renames_start_to_root():
    g = Grammar((Rule("start", Ref("root")), Rule("root", Repeat(a, 0, None))), "start", dialect="lark")
    assert write_ebnf(g) == 'root ::= root_1\nroot_1 ::= "a"*\n'
    assert with_root_start(g).start == "root"


@pytest.mark.parametrize("grammar,dialect,message", [
    (Grammar((Rule("root", Terminal("WORD")),), "root"), "ebnf", "terminal 'WORD' cannot be written"),
    (Grammar((Rule("root", Regex("a+")),), "root"), "gbnf", "regexp /a+/ cannot be written"),
    (Grammar((Rule("root", a, lookahead=b),), "root"), "gbnf", "lookahead assertion"),
    (Grammar((Rule("root", Ref("1st")), Rule("1st", a)), "root"), "ebnf", "rule name '1st'"),
    (Grammar((Rule("root", a),), "root", terminals=(Rule("A", a),)), "ebnf", "terminal definitions"),
    (Grammar((Rule("root", a),), "root", directives=(Directive("ignore", ("WS",)),)), "ebnf", "%ignore"),
])
def test_writer_refuses_what_the_dialect_cannot_express(grammar, dialect, message):
    with pytest.raises(GrammarError, match=message.replace("+", r"\+").replace(".", r"\.")):
        write_ebnf(grammar, dialect)


def test_gbnf_names_are_written_in_llamacpp_alphabet():
    """llama.cpp's parser reads rule names of letters, digits and '-' only: '_' and '.' become
    '-', and a name that collides gets the first free number (references follow)."""
    g = Grammar((Rule("root", Seq((Ref("a_b"), Ref("a-b"), Ref("x.y")))), Rule("a_b", a), Rule("a-b", b),
                 Rule("x.y", a)), "root")
    assert write_ebnf(g, "gbnf") == 'root ::= a-b2 a-b x-y\na-b2 ::= "a"\na-b ::= "b"\nx-y ::= "a"\n'
    assert write_ebnf(g, "ebnf") == 'root ::= a_b a-b x.y\na_b ::= "a"\na-b ::= "b"\nx.y ::= "a"\n'
    assert with_llamacpp_names(with_llamacpp_names(g)) == with_llamacpp_names(g)


def test_writer_drops_lookahead_only_when_asked():
    g = Grammar((Rule("root", a, lookahead=b),), "root")
    assert write_ebnf(g, "gbnf", drop_lookahead=True) == 'root ::= "a"\n'
    assert write_ebnf(g, "ebnf") == 'root ::= "a" (= "b")\n'


# ---------------------------------------------------------------- print → parse → print

STABLE = [
    ('root ::= "a" | ( "y" | ) b{2,}\nb ::= [^\\x00-\\x1f"] .', "gbnf"),
    ('# h\n\n# c\nroot ::= ("a" ("b" | "c")*)+ "\\x01A" [\\^-a]{0, -1} (= [,}])\n', "ebnf"),
    ('value = "[" [ value { "," value } ] "]" | "0" … "9" .', "goebnf"),
]


@pytest.mark.parametrize("text,dialect", STABLE)
def test_print_parse_print_is_stable(text, dialect):
    target = "ebnf" if dialect == "goebnf" else dialect
    g = parse(text, dialect)
    once = write_ebnf(g, target)
    g2 = parse_ebnf(once, target)
    assert g2 == g
    assert write_ebnf(g2, target) == once


# ---------------------------------------------------------------- random IR → text → IR

_cp = st.integers(0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF)
_atoms = st.one_of(
    st.lists(_cp, min_size=1, max_size=6).map(lambda cps: Literal("".join(map(chr, cps)))),
    st.lists(st.tuples(st.integers(0, 0x10FFFF), st.integers(0, 300)), min_size=1, max_size=4).map(
        lambda rs: [(lo, min(lo + w, 0x10FFFF)) for lo, w in rs]).flatmap(
        lambda rs: st.builds(CharClass, st.just(tuple(rs)), st.booleans())),
    st.just(ANY), st.just(Epsilon()), st.sampled_from([Ref("root"), Ref("x-y")]),
)
_bounds = st.sampled_from([(0, None), (1, None), (0, 1), (2, 2), (3, None), (1, 4), (0, 0)])
_exprs = st.recursive(_atoms, lambda inner: st.one_of(
    st.lists(inner, min_size=2, max_size=4).map(lambda xs: seq(*xs)),
    st.lists(inner, min_size=2, max_size=4).map(lambda xs: alt(*xs)),
    st.tuples(inner, _bounds).map(lambda t: Repeat(t[0], *t[1]))), max_leaves=12)


def _nests_repeats(e) -> bool:
    return any(isinstance(x, Repeat) and isinstance(x.item, Repeat) for x in walk(e))


@settings(max_examples=examples(300), deadline=2000)
@given(body=_exprs, other=_exprs, dialect=st.sampled_from(["gbnf", "ebnf"]))
def test_random_grammars_write_and_read_back_equal(body, other, dialect):
    """IR → text → IR is the identity; GBNF respells a repetition of a repetition
    (``test_gbnf_nested_repetition_*`` check that respelling's language), so there the
    read-back has no such nest left and is the identity on grammars without one."""
    g = Grammar((Rule("root", body), Rule("x-y", other)), "root", dialect=dialect)
    text = write_ebnf(g, dialect)
    back = parse_ebnf(text, dialect)
    if dialect == "gbnf" and _nests_repeats(body) | _nests_repeats(other):
        assert not any(_nests_repeats(r.body) for r in back.rules)
    else:
        assert back == g


_COUNTS = [(0, 0), (0, 1), (0, None), (1, 1), (1, 2), (1, None), (2, 2), (2, 3), (2, None), (3, 5)]


def _totals(m, n, a, b, upto):
    """Every total of j counts in [m, n], a <= j <= b, up to ``upto`` (brute force)."""
    reach, out = {0}, set()
    for j in range(upto + 1):
        if j >= a and (b is None or j <= b):
            out |= reach
        reach = {t + k for t in reach for k in range(m, upto + 1) if n is None or k <= n if t + k <= upto}
    return out


@pytest.mark.parametrize("inner", _COUNTS)
@pytest.mark.parametrize("outer", _COUNTS)
def test_gbnf_nested_repetition_keeps_its_language(inner, outer):
    """``("a"{m,n}){a,b}`` written as GBNF and read back accepts exactly ``"a"^k`` for the
    totals ``k`` of the nest (up to length 16), and no repetition's operand is a repetition:
    llguidance's GBNF reader drops a one-item group's parentheses and then fails."""
    expr = Repeat(Repeat(a, *inner), *outer)
    g = Grammar((Rule("root", expr),), "root", dialect="gbnf")
    back = parse_ebnf(write_ebnf(g, "gbnf"), "gbnf")
    assert not _nests_repeats(back.rule("root").body)
    rec = Recognizer(back)
    assert {k for k in range(17) if rec.accepts(b"a" * k)} == _totals(*inner, *outer, 16)


_ANY = CharClass((), negated=True)


@pytest.mark.parametrize("expr, tail", [
    (Repeat(Repeat(Epsilon(), 3, None), 0, None), ""),
    (Repeat(Repeat(Repeat(Epsilon(), 0, None), 3, None), 0, None), ""),
    (Repeat(Seq((Repeat(_ANY, 0, None), Repeat(Repeat(Epsilon(), 0, None), 0, None))), 0, None), "x€y"),
], ids=["of-empty", "of-empty-twice", "empty-beside-a-repetition"])
def test_gbnf_nested_repetition_of_the_empty_word(expr, tail):
    """A nest over ``""`` is written ``""`` (``""^k = ""``), and a ``""`` it leaves in a group
    is dropped before writing, so the reader, which drops it too, finds no one-item group
    around a repetition under a repetition (hypothesis found all three in CI). The language
    stays: ``"b"`` then ``""`` (``tail`` empty) or any text (``tail`` one witness)."""
    g = Grammar((Rule("root", seq(b, expr)),), "root", dialect="gbnf")
    back = parse_ebnf(write_ebnf(g, "gbnf"), "gbnf")
    assert not _nests_repeats(back.rule("root").body)
    rec = Recognizer(back)
    assert rec.accepts(b"b") and not rec.accepts(b"") and rec.accepts(b"bb") == bool(tail)
    assert rec.accepts(("b" + tail).encode()) and not rec.accepts(("a" + tail).encode())


def test_gbnf_nested_repetition_loads_in_llguidance():
    """The respelled nests load in llguidance (its GBNF reader rejected every
    ``(x{m,n})?``-like nest as ``x{m,n}?``, llguidance 1.9.1: JSONSchemaBench o23087)."""
    llg = pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import _llguidance_grammar
    for inner in _COUNTS[1:]:
        for outer in _COUNTS[1:]:
            text = write_ebnf(Grammar((Rule("root", seq(b, Repeat(Repeat(a, *inner), *outer))),), "root",
                                      dialect="gbnf"), "gbnf")
            assert not llg.LLMatcher.validate_grammar(_llguidance_grammar("gbnf", text)), text


def test_empty_class_round_trips_through_gbnf():
    """GBNF writes the empty class as [^\\x00-\\U0010FFFF] (llama.cpp breaks on '[]'); it reads
    back as the empty class, not as a negated full range (found by hypothesis)."""
    g = parse_ebnf('root ::= "a" | x\nx ::= []\n', "gbnf")
    written = write_ebnf(g, "gbnf")
    assert "[^" in written
    assert parse_ebnf(written, "gbnf") == g
