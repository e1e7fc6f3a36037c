"""xgrammar's Regex(...) macro: read into the IR exactly, refused where it cannot be."""

import itertools
from dataclasses import replace
import random
import re

import pytest

from gramopt.formats import parse
from gramopt.formats.ebnf import parse_ebnf, write_ebnf
from gramopt.formats.regex_macro import RegexMacroError, regex_to_expr
from gramopt.grammar import GrammarError
from gramopt.verify.reference import Recognizer


def ebnf_string(pattern: str) -> str:
    """``pattern`` as an xgrammar EBNF string literal."""
    return '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.mark.parametrize("macro, expected", [
    ('Regex("^[A-Za-z0-9]{15}$", json_string=true)', "[0-9A-Za-z]{15}"),
    ('Regex("abc")', '"abc"'),
    ('Regex("a|bc|")', '"a" | "bc" | ""'),
    ('Regex("(ab)+c?d*?e{2,}f{,3}")', '"ab"+ "c"? "d"* "e"{2,} "f"{0,3}'),
    ('Regex("\\\\d\\\\w\\\\s")', "[0-9] [0-9A-Z_a-z] [\\t-\\r ]"),
    ('Regex("[^\\\\d]")', "[^0-9]"),
    ('Regex(".")', "[^]"),
    ('Regex(".", flags="u")', "[^\\n]"),
    ('Regex(".", flags="s")', "[^]"),
    ('Regex("ab", flags="i")', "[Aa] [Bb]"),
    ('Regex("(?i)[a-c]x")', "[A-Ca-c] [Xx]"),
    ('Regex(".", json_string=true)', '[^\\x00-\\x1F"\\\\]'),
    ('Regex("a\\"|b", json_string=true)', '"b"'),
    ('Regex("(\\"|\\\\\\\\)*x", json_string=true)', '"x"'),
    ('Regex("é[α-ω]")', '"é" [α-ω]'),
    ('Regex("^test|acceptance|production$")', '"test" | "acceptance" | "production"'),
    ('Regex("a^b$c(^d|e$)")', '"abc" ("d" | "e")'),
])
def test_regex_translation(macro, expected):
    g = parse_ebnf(f"root ::= {macro}\n")
    assert g.rules[0].native.text == macro and g.rules[0].native.body == g.rules[0].body
    assert write_ebnf(g) == f"root ::= {macro}\n"  # the macro itself, byte for byte
    expanded = g.replace_rules([replace(r, native=None) for r in g.rules])
    assert write_ebnf(expanded) == f"root ::= {expected}\n"


@pytest.mark.parametrize("pattern, what", [
    ("(a)\\1", "backreference"),
    ("(?=a)a", "lookahead"),
    ("(?<!a)b", "lookbehind"),
    ("a\\bb", "'\\b'"),
    ("a\\Ab", "'\\A'"),
    ("(?>ab)", "atomic group"),
    ("a++", "possessive"),
    ("(?m)a", "inline flags"),
    ("(?i:a)b", "scoped inline flags"),
    ("\\p{L}", "bad escape"),
    ("[a", "unterminated character set"),
])
def test_regex_refusals(pattern, what):
    with pytest.raises(RegexMacroError, match=re.escape(what)):
        regex_to_expr(pattern)


def test_refusals_point_at_the_pattern():
    with pytest.raises(GrammarError) as e:
        parse('rule0 ::= "x"\nroot ::= "a" Regex("ab(?=c)")\n', "ebnf", path="g.ebnf")
    assert e.value.format().startswith('g.ebnf:2:20: error: in Regex("ab(?=c)"): a lookahead')
    with pytest.raises(GrammarError) as e:  # where Python's parser stops, inside the string
        parse('root ::= Regex("ab[c")\n', "ebnf", path="g.ebnf")
    assert e.value.format().startswith('g.ebnf:1:19: error: in Regex("ab[c"): bad regular '
                                       "expression: unterminated character set")


@pytest.mark.parametrize("text, message", [
    ('root ::= Regex("a", foo=true)', "named argument 'foo'"),
    ('root ::= Regex(true)', "exactly one string argument"),
    ('root ::= Regex("a" "b")', "expected ',' or ')'"),
    ('root ::= Regex("a", json_string="x")', "json_string must be a boolean"),
    ('root ::= Regex("\\"", json_string=true)', "matches no string"),
    ('root ::= Regex("a")', "Regex(...) is xgrammar EBNF"),
])
def test_bad_macros(text, message):
    dialect = "gbnf" if "xgrammar EBNF" in message else "ebnf"
    with pytest.raises(GrammarError) as e:
        parse(text + "\n", dialect)
    if dialect == "ebnf":
        assert message in str(e.value)


def test_empty_json_string_branch_is_dropped_not_the_whole_rule():
    g = parse_ebnf('root ::= "[" Regex("x|\\"", json_string=true) "]"\n')
    assert write_ebnf(g) == 'root ::= "[" "x" "]"\n'


# ---------------------------------------------------------------- against xgrammar itself

DIFFERENTIAL = [  # (pattern, json_string, flags, alphabet)
    ("^[A-Za-z0-9]{2}$", True, None, "aZ9-"),
    ("a|b|ab|", False, None, "abc"),
    ("(ab|a)*b?", False, None, "ab"),
    ("[^a-c]+", True, None, 'a"d\\\n'),
    (".x.", False, None, "x\n\"é"),
    (".x", False, "u", "x\n"),
    ("\\d{1,2}\\.\\w\\s?", False, None, "1.a _\t\u00a0"),
    ("[\\D]x|\\S", True, None, '1x" '),
    ("(?i)ab[c-d]", False, None, "aAbBcDe"),
    ("ab", True, "i", "aAbB"),
    ("(a|\"b)c", True, None, 'a"bc'),
    ("x{0,2}y{2,}", False, None, "xy"),
    ("[é-ë]+|z", False, None, "éëêz"),
    ("[\\\\\"]*a", False, None, '\\"a'),
    ("^ab|c$|(^d$|e)f", False, None, "abcdef^$"),  # xgrammar ignores '^' and '$' anywhere (o63514)
]


@pytest.mark.parametrize("pattern, json_string, flags, alphabet", DIFFERENTIAL)
def test_same_language_as_xgrammar(pattern, json_string, flags, alphabet):
    """Every string over a small alphabet up to length 4 (and some longer random ones) is
    accepted by gramopt's reading of the macro exactly when xgrammar accepts it."""
    testing = pytest.importorskip("xgrammar.testing")
    args = [ebnf_string(pattern)]
    if json_string:
        args.append("json_string=true")
    if flags is not None:
        args.append(f"flags={ebnf_string(flags)}")
    text = f"root ::= Regex({', '.join(args)})\n"
    ours = Recognizer(parse_ebnf(text))
    rng = random.Random(0)
    strings = ["".join(p) for n in range(5) for p in itertools.product(alphabet, repeat=n)]
    strings += ["".join(rng.choice(alphabet) for _ in range(rng.randint(5, 9))) for _ in range(40)]
    for s in strings[:400]:
        assert ours.accepts(s.encode()) == testing._is_grammar_accept_string(text, s), (text, s)


# ---------------------------------------------------------------- optimized and verified

def test_grammar_with_regex_macros_optimizes_and_verifies():
    from gramopt.passes import optimize
    text = ('root ::= "{\\"id\\": \\"" id "\\", \\"n\\": " num "}"\n'
            'id ::= Regex("^[A-Za-z0-9]{3}$", json_string=true)\n'
            'num ::= Regex("-?(0|[1-9][0-9]*)(\\\\.[0-9]+)?")\n')
    g = parse_ebnf(text)
    r = optimize(g, verify=True)  # raises on a language difference
    assert r.report.verified == "ok"
    out = Recognizer(parse_ebnf(write_ebnf(r.grammar)))
    assert out.accepts(b'{"id": "aZ9", "n": -10.25}')
    assert not out.accepts(b'{"id": "a"9", "n": 1}') and not out.accepts(b'{"id": "aZ9", "n": 01}')


@pytest.mark.slow
def test_corpus_schema_grammar_with_regex_macros():
    """maskbench-xgrammar Github_ultra-o46393 (xgrammar's converter output with Regex macros)
    optimizes, verifies, and the output accepts the corpus samples in xgrammar."""
    from corpus_location import CORPUS
    from gramopt.formats import read
    from gramopt.passes import optimize
    path = CORPUS / "ebnf" / "maskbench-xgrammar__Github_ultra-o46393.ebnf"
    if not path.exists():
        pytest.skip("corpus not found")
    testing = pytest.importorskip("xgrammar.testing")
    for target in ("generic", "xgrammar"):
        r = optimize(read(str(path)), target=target, verify=True)
        assert r.report.verified == "ok"
        text = write_ebnf(r.grammar)
        for sample in sorted(path.parent.glob(path.stem + ".sample*.txt")):
            assert testing._is_grammar_accept_string(text, sample.read_text(encoding="utf-8"))
