"""Lark reader and writer: golden tables (text → IR, text → text), located errors,
print → parse → print stability, literal escaping against lark itself, random IR → text →
IR, and random / mutated text that may only raise GrammarError."""

from corpus_location import CORPUS as _CORPUS_DIR
import re
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramopt.formats import parse, write
from gramopt.formats.lark import expr_text, imported_names, parse_lark, write_lark
from gramopt.formats.lark_text import (ci_string, ci_string_text, quote_regexp, quote_string,
                                       read_literal)
from gramopt.grammar import (Alt, CharClass, Directive, Epsilon, Grammar, GrammarError, Literal, Ref,
                             Regex, Repeat, Rule, Seq, Terminal, alt, seq)
from examples import examples

DATA = Path(__file__).resolve().parent / "data" / "lark"
a, b, c = Literal("a"), Literal("b"), Literal("c")


def body(text, name="start", **kw):
    return parse_lark(text, **kw).rule(name).body


def accepted(text, strings, **kw):
    parser = lark.Lark(text, parser="earley", **kw)
    out = []
    for s in strings:
        try:
            parser.parse(s)
            out.append(s)
        except lark.exceptions.LarkError:
            pass
    return out


# ---------------------------------------------------------------- reader: syntax → IR

SYNTAX = [
    ('start: "a"', a),
    ('start: "a" "b" | "c"', Alt((Seq((a, b)), c))),
    ('start: ("a" ("b"))', Seq((a, b))),
    ('start: ("a" | ("b" | "c"))', Alt((a, b, c))),
    ('start: "a"?', Repeat(a, 0, 1)),
    ('start: ["a" "b"]', Repeat(Seq((a, b)), 0, 1)),
    ('start: "a"*', Repeat(a, 0, None)),
    ('start: "a"+', Repeat(a, 1, None)),
    ('start: "a" ~ 3', Repeat(a, 3, 3)),
    ('start: "a" ~ 2..5', Repeat(a, 2, 5)),
    ('start: ("a"*)?', Repeat(Repeat(a, 0, None), 0, 1)),
    ('start: "abc"i', Regex("(?i:abc)")),
    ('start: "a.b"i', Regex("(?i:a\\.b)")),
    ('start: /a+b/sim', Regex("a+b", "ims")),
    ('start: /a\\/b/', Regex("a\\/b")),
    ('start: /\\d\\n/', Regex("\\d\n")),
    ('start: "a".."z"', CharClass(((0x61, 0x7A),))),
    ('start: "\\x00".."\\x1f"', CharClass(((0, 0x1F),))),
    ('start: "\\"\\\\\\t\\u00e9"', Literal('"\\\té')),
    ('start: A\nA: "a"', Terminal("A")),
    ('start: x\nx: "a"', Ref("x")),
    ('start: "a" | ""', Alt((a, Epsilon()))),  # llguidance's empty string
    ('start: "a" ()', a),
    ('start:', Epsilon()),
    ('start: | "a"', Alt((Epsilon(), a))),
    ('start: "a" ( | "b")', Seq((a, Alt((Epsilon(), b))))),
]


@pytest.mark.parametrize("text,expected", SYNTAX)
def test_reader_syntax(text, expected):
    assert body(text + "\n") == expected


def test_rule_modifiers_priorities_aliases():
    g = parse_lark('?start.2: a "x" -> one\n   | ("b" | "c") -> two\n   | "d"\n'
                   '!a: A\n_b: "b"\nA.3: "q"\nB: "r"\n')
    s = g.rule("start")
    assert (s.flags, s.priority) == ("?", 2)
    assert s.body == Alt((Seq((Ref("a"), Literal("x"))), b, c, Literal("d")))
    assert s.aliases == ("one", "two", "two", None)  # distributed over (b | c), as lark does
    assert g.rule("a").flags == "!" and g.rule("_b").flags == ""
    assert [(t.name, t.priority) for t in g.terminals] == [("A", 3), ("B", None)]
    assert parse_lark('!?start: "a"\n').rule("start").flags == "?!"


def test_directives_and_imports():
    g = parse_lark('start: WS? NUM INT x\nx: "x"\n%import common (WS, INT)\n%import common.NUMBER -> NUM\n'
                   '%import common.DIGIT -> DIGIT\n%ignore WS\n%ignore /[ \\t]+/ | "#"\n%declare _INDENT _DEDENT\n')
    assert g.directives == (
        Directive("import", ("common", "WS")), Directive("import", ("common", "INT")),
        Directive("import", ("common", "NUMBER", "NUM")), Directive("import", ("common", "DIGIT")),
        Directive("ignore", ("WS",)), Directive("ignore", ('/[ \\t]+/ | "#"',)),
        Directive("declare", ("_INDENT", "_DEDENT")))
    # the imported terminals are in the IR, with lark's inlined bodies
    assert {t.name for t in g.terminals} == {"WS", "INT", "NUM", "DIGIT"}
    assert g.terminals[[t.name for t in g.terminals].index("DIGIT")].body == CharClass(((0x30, 0x39),))
    assert imported_names(g) == {"WS", "INT", "NUM", "DIGIT"}
    out = write_lark(g)
    assert "%import common (WS, INT)\n%import common.NUMBER -> NUM\n%import common.DIGIT\n" in out
    assert "DIGIT:" not in out and parse_lark(out) == g


def test_relative_import_uses_the_path():
    path = DATA / "main.lark"
    g = parse_lark(path.read_text(), path=str(path))
    assert g.directives == (Directive("import", (".sub", "item")),)
    assert g.rule("item").body == Seq((Terminal("sub__WORD"), Repeat(Seq((Literal(","), Terminal("sub__WORD"))))))
    assert write_lark(g) == 'start: "[" item "]"\n\n%import .sub.item\n'
    assert accepted(str(path.read_text()), ["[ab,c]", "[]"], import_paths=[str(DATA)]) == ["[ab,c]"]
    with pytest.raises(GrammarError, match="relative %import needs the grammar's file path"):
        parse_lark(path.read_text())


def test_import_loader_hook():
    def loader(base_path, grammar_path):  # lark's import_paths protocol
        if grammar_path == "lib.lark":
            return "lib.lark", 'X: "x"\n'
        raise OSError(grammar_path)

    g = parse_lark("start: X\n%import lib.X\n", import_paths=[loader])
    assert g.terminals == (Rule("X", Literal("x")),)


def test_templates_are_expanded():
    text = '_sep{x, s}: x (s x)*\nstart: _sep{a, ","} _sep{A, ";"} _sep{a, ","}\na: "a"\nA: "A"\n'
    g = parse_lark(text)
    assert g.names == ["start", "a", "_sep__a__lit", "_sep__a__lit_2"]
    assert g.rule("start").body == Seq((Ref("_sep__a__lit"), Ref("_sep__a__lit_2"), Ref("_sep__a__lit")))
    assert g.rule("_sep__a__lit_2").body == Seq((Terminal("A"), Repeat(Seq((Literal(";"), Terminal("A"))))))
    strings = ["a", "a,aA", "a,aA;Aa", "aAa,a", "aA;", ""]
    assert accepted(write_lark(g), strings) == accepted(text, strings) == ["a,aA;Aa", "aAa,a"]


def test_template_passed_as_argument_and_nested():
    text = ('_pair{f, x}: f{x} f{x}\n_opt{x}: x?\nstart: _pair{_opt, "a"} "b"\n')
    g = parse_lark(text)
    strings = ["b", "ab", "aab", "aaab"]
    assert accepted(write_lark(g), strings) == accepted(text, strings) == ["b", "ab", "aab"]


def test_override_and_extend():
    g = parse_lark('start: a INT\na: "x" -> p\n%extend a: "y" -> q\n%import common.INT\n%override INT: "1"\n')
    assert g.rule("a").body == Alt((Literal("y"), Literal("x"))) and g.rule("a").aliases == ("q", "p")
    assert g.directives[-1] == Directive("override", ("INT",))
    out = write_lark(g)
    assert '%override INT: "1"' in out and parse_lark(out) == g


def test_start_rule_and_libraries():
    assert parse_lark('main: "a"\n', start="main").start == "main"
    lib = parse_lark('A: "a"\nrule: A\n', start="")
    assert lib.start == "" and lib.names == ["rule"]
    with pytest.raises(GrammarError, match="missing start rule 'start'"):
        parse_lark('main: "a"\n')
    with pytest.raises(GrammarError, match="missing start rule 'start'"):
        parse('A: "a"\n', "lark", "lib.lark")  # the formats layer reads normal grammars only


def test_comments_are_kept():
    g = parse_lark("// the header\n\n// about start\n// two lines\nstart: A // inline: dropped\n# terminal\nA: \"a\"\n")
    assert g.header == "the header"
    assert g.rule("start").comment == "about start\ntwo lines"
    assert g.terminals[0].comment == "terminal"
    assert write_lark(g) == '// the header\n\n// about start\n// two lines\nstart: A\n\n// terminal\nA: "a"\n'


# ---------------------------------------------------------------- writer: golden text

WRITES = [
    ('start: "a" "b" | "c"\n', 'start: "a" "b" | "c"\n'),
    ('start: ("a" | "b") "c"+\n', 'start: ("a" | "b") "c"+\n'),
    ('start: ("a" "b")* ["c"]\n', 'start: ("a" "b")* ["c"]\n'),  # [x] kept: None in the tree when absent
    ('start: ("a"?)+ "b" ~ 2 "c" ~ 0..3\n', 'start: ("a"?)+ "b" ~ 2 "c" ~ 0..3\n'),
    ('start: "x"i /y\\/z/i "a".."f"\n', 'start: "x"i /y\\/z/i "a".."f"\n'),
    ('start: x\nx: "a" -> one | "b"\n', 'start: x\nx: "a" -> one\n | "b"\n'),
    ('?start.3: | "a"\n', '?start.3:  | "a"\n'),
    ('start: "a" ( | "b") ""\n', 'start: "a" (| "b")\n'),
    ('start: "tab\\there\\n"\n', 'start: "tab\\there\\n"\n'),
    ('start: /a/ "\\\\"\nA.2: ("a" | B)+\nB: "b"\n%ignore A\n',
     'start: /a/ "\\\\"\n\nA.2: ("a" | B)+\nB: "b"\n\n%ignore A\n'),
]


@pytest.mark.parametrize("text,expected", WRITES)
def test_writer_golden(text, expected):
    g = parse_lark(text)
    out = write_lark(g)
    assert out == expected
    assert parse_lark(out) == g and write_lark(parse_lark(out)) == out  # print → parse → print
    lark.Lark(out)  # lark loads what we print


@pytest.mark.parametrize("text", [t for t, _ in SYNTAX] + [t for t, _ in WRITES])
def test_print_parse_print_is_stable(text):
    g = parse_lark(text + "\n")
    out = write_lark(g)
    assert parse_lark(out) == g
    assert write_lark(parse_lark(out)) == out


def test_case_insensitive_string_keeps_lexer_priority():
    """A keyword "select"i must stay a string (lark gives it priority over NAME under LALR)."""
    text = 'start: "select"i NAME\nNAME: /[a-z]+/\n%ignore " "\n'
    out = write_lark(parse_lark(text))
    assert '"select"i' in out
    lark.Lark(out, parser="lalr").parse("SELECT foo")
    assert ci_string_text(ci_string("a.b")) == "a.b" and ci_string_text(Regex("(?i:a.b)")) is None


# ---------------------------------------------------------------- other dialects → Lark


def test_gbnf_written_as_lark():
    g = parse('root ::= "[" item ("," item)* "]" ws\nitem ::= [a-c]+ | "\\"" [^"]* "\\""\n'
              'ws ::= [ \\t\\n]*\n', "gbnf")
    out = write(g, "lark")
    assert out.startswith('start: "[" item ("," item)* "]" ws\n')
    assert '/[^"]/' in out.replace('\\x22', '"')
    strings = ["[a,bc]", "[a, b]", '["x y",a]\n', "[]", "[d]"]
    assert accepted(out, strings) == ["[a,bc]", '["x y",a]\n']


def test_other_dialect_names_become_lark_names():
    g = Grammar((Rule("json-value", Ref("Obj")), Rule("Obj", Literal("{}")), Rule("start", Literal("s"))),
                "json-value", dialect="ebnf")
    out = write_lark(g)
    assert out == 'start: obj\nobj: "{}"\nstart_: "s"\n'


def test_lookahead_cannot_be_written():
    g = parse('root ::= "a" b\nb ::= "b" (= "c")\n', "ebnf")
    with pytest.raises(GrammarError, match="rule 'b' has a lookahead assertion, which Lark cannot express"):
        write_lark(g)


def test_char_classes_as_ranges_or_regexps():
    cases = {CharClass(((0x30, 0x39),)): '"0".."9"',
             CharClass(((0x61, 0x63), (0x78, 0x78))): "/[a-cx]/",
             CharClass(((0x22, 0x22), (0x5C, 0x5C)), negated=True): '/[^\\x22\\\\]/',
             CharClass(((0x5C, 0x5C),)): "/[\\\\]/",  # lark misreads "\\".."\\" as two characters
             CharClass(((0x5E, 0x7A),)): "/[\\^-z]/"}  # and "^".."z" as [^-z]
    for cc, text in cases.items():
        assert expr_text(cc) == text
        (rx,) = lark.Lark(f"start: {text}\n").terminals
        for cp in range(0x80):
            assert (re.fullmatch(rx.pattern.to_regexp(), chr(cp)) is not None) == any(
                lo <= cp <= hi for lo, hi in cc.code_points()), (text, cp)


# ---------------------------------------------------------------- errors

ERRORS = [
    # (text, message fragment, line, column)
    ("", "empty grammar", 1, 1),
    ('start: a b\na: "x"\n', "'b' used but not defined", 1, 10),
    ('start: "a"\nstart: "b"\n', "defined more than once", 2, 1),
    ('start "a"\n', "missing colon", 1, 7),
    ('start: ("a"\n', "expected one of: _RPAR", 1, 12),
    ("start: /[a/\n", "bad regular expression /[a/", 1, 8),
    ('start: "\\x4"\n', "bad escape sequence", 1, 8),
    ('a: "x"\n', "missing start rule 'start'", 1, 1),
    ('start: ("a" -> q | "b")\n', "alias (-> name) inside parentheses", 1, 16),
    ('start: A\nA: "a" -> q\n', "alias (-> name) in a terminal", 2, 11),
    ('start: _a\n_a: "x" -> y\n', "cannot have aliases", 2, 1),
    ('start: A\nA: a\na: "x"\n', "Rules aren't allowed inside terminals", 2, 4),
    ('start: "z".."a"\n', "first character after the second", 1, 8),
    ('start: "^".."z"\n', "lark compiles the range", 1, 8),
    ('start: "ab".."z"\n', "must be one character", 1, 8),
    ('start: "a" ~ 3..1\n', "bad repetition range", 1, 12),
    ('start: "a" ~ 1000000\n', "too large", 1, 12),
    ('_t{x}: x\nstart: _t{"a", "b"}\n', "Wrong number of template arguments", 1, 1),
    ('_t{x}: _t{_t{x}} | x\nstart: _t{"a"}\n', "expands without end", 1, 8),
    ("%import nosuch.X\nstart: X\n", "cannot import 'nosuch.lark'", 1, 9),
    ("%declare foo\nstart: foo\n", "%declare of the rule 'foo' is not supported", 1, 10),
    ('start: "a"\n%ignore WS\n', "marked to ignore but were not defined", 2, 9),
    ('start: A\nA: ""\n', "terminal 'A' is empty", 2, 1),
    ('start: "a"\n\x00', "unexpected character", 2, 1),
    ('start: "a"\n%ignore \n', "%ignore needs an argument", 2, 1),
]


@pytest.mark.parametrize("text,fragment,line,col", ERRORS)
def test_errors_are_located(text, fragment, line, col):
    with pytest.raises(GrammarError) as info:
        parse(text, "lark", "g.lark")
    e = info.value
    assert fragment in e.message
    assert (e.pos.line, e.pos.col) == (line, col)
    assert e.format().startswith(f"g.lark:{line}:{col}: error: ")


# ---------------------------------------------------------------- literals vs lark itself

_STRING_TOKEN = re.compile(r'"(\\"|\\\\|[^"\n])*?"i?')
_REGEXP_TOKEN = re.compile(r"/(?!/)(\\/|\\\\|[^/])*?/[imslux]*")
_TRICKY = st.sampled_from(list("\\/\"'nxuU0a5c\ntr{} ") + ["\x00", "\ud800", "é", "\U0001F600"])


@settings(max_examples=examples(300), deadline=None)
@given(st.text(min_size=1) | st.text(_TRICKY, min_size=1))
def test_quote_string_is_lark_inverse(text):
    q = quote_string(text)
    assert _STRING_TOKEN.fullmatch(q)
    assert read_literal(q, "STRING") == (text, "")


@settings(max_examples=examples(300), deadline=None)
@given(st.text(min_size=1) | st.text(_TRICKY, min_size=1), st.sampled_from(["", "i", "ms", "imx"]))
def test_quote_regexp_is_lark_inverse(pattern, flags):
    q = quote_regexp(pattern, flags)
    assert _REGEXP_TOKEN.fullmatch(q)
    assert read_literal(q, "REGEXP") == (pattern, flags)


# ---------------------------------------------------------------- random IR → text → IR

_ATOMS = st.sampled_from([Literal("a"), Literal('q"\\'), Literal("é\n"), Regex("[0-9]+"), Regex("x|y", "i"),
                          ci_string("Sel.ect"), Terminal("T_A"), Terminal("T_B"), CharClass(((0x61, 0x7A),)),
                          Ref("r0"), Ref("r1"), Ref("r2")])
_REPEATS = st.sampled_from([(0, 1), (0, None), (1, None), (0, 0), (3, 3), (1, 4)])


def _exprs():
    return st.recursive(
        _ATOMS | st.just(Epsilon()),
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
            st.tuples(inner, _REPEATS).map(lambda t: Repeat(t[0], *t[1])),
        ),
        max_leaves=8,
    )


@st.composite
def _grammars(draw):
    rules = []
    for name in ("r0", "r1", "r2"):
        e = draw(_exprs())
        n = len(e.items) if isinstance(e, Alt) else 1
        aliases = tuple(draw(st.lists(st.sampled_from([None, "al", "b2"]), min_size=n, max_size=n)))
        rules.append(Rule(name, e, flags=draw(st.sampled_from(["", "?", "!"])),
                          priority=draw(st.sampled_from([None, 2, -1])),
                          aliases=aliases if any(aliases) else ()))
    terms = (Rule("T_A", draw(st.sampled_from([Literal("a"), Regex("a+"), seq(Literal("x"), Repeat(Regex("[0-9]"), 1, None))]))),
             Rule("T_B", Literal("b"), priority=3))
    return Grammar(tuple(rules), "r0", terms, (Directive("ignore", ("T_B",)),), dialect="lark")


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_grammars())
def test_random_ir_round_trips(g):
    out = write_lark(g)
    assert parse_lark(out, start="r0") == g
    assert write_lark(parse_lark(out, start="r0")) == out


# ---------------------------------------------------------------- random and mutated text

_CORPUS = _CORPUS_DIR / "lark"
_SEEDS = ['?start.2: a "x"i b* -> foo\n | (c | "d") ~ 2..3 [e] -> bar\n!a: A\n_sep{x, s}: x (s x)*\n'
          'b: _sep{a, ","} | ""\nc: "a".."z"\ne: /re\\/x/i\nA.3: "q" | B ~ 2\nB: "b"\n%ignore /[ ]+/\n'
          '%declare C\n%import common (WS, INT)\n%import common.NUMBER -> NUM\n%extend a: "z"\n']
for _name in ("lark__lark.lark", "outlines__json.lark", "syncode__calc.lark"):
    if (_CORPUS / _name).exists():
        _SEEDS.append((_CORPUS / _name).read_text(encoding="utf-8")[:3000])
_ALPHABET = list('abAB_?!.:|()[]{}~*+-> "/\\i\n%#,019') + [
    "%import ", "%ignore ", "%declare ", "%override ", "%extend ", "common.", " -> ", '"x"', "/x/", "..",
    "{x}", "_t{a}", "WS", "start", "\x00", "é", "\r\n"]


def _tokens(n):
    return st.lists(st.sampled_from(_ALPHABET), max_size=n).map("".join)


@st.composite
def _mutated(draw):
    text = draw(st.sampled_from(_SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 30)))
        piece = draw(_tokens(6))
        text = draw(st.sampled_from([text[:i] + text[j:], text[:i] + piece + text[i:],
                                     text[:j] + text[i:j] + text[j:], text[:i] + piece + text[j:]]))
    return text


@settings(max_examples=examples(400), deadline=3000, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=200), _tokens(60), _mutated()), start=st.sampled_from([None, ""]))
def test_reader_raises_only_grammar_error(text, start):
    try:
        g = parse_lark(text, start=start)
    except GrammarError as e:
        assert e.pos is not None and e.pos.line >= 1 and e.pos.col >= 1 and e.message
        return
    out = write_lark(g)  # what reads also writes and reads back
    assert parse_lark(out, start=start) == g
