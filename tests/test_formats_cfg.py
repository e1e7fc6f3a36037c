"""NLTK .cfg grammars: read as token-level (Lark-semantics) grammars, written back as
canonical BNF in NLTK syntax; the corpus grammar accepts its samples."""

from __future__ import annotations

from corpus_location import CORPUS as _CORPUS_DIR


import pytest

from gramopt.formats import parse, read, write
from gramopt.grammar import GrammarError, Literal
from gramopt.verify import Recognizer, check_equivalence

CORPUS_CFG = _CORPUS_DIR / "cfg" / "nltk__commandtalk.cfg"

TOY = """# toy
%start S
S -> NP VP | 'hello'
NP -> 'the' N | N
N -> 'dog' | "cat's"
VP -> 'runs' \\
   | 'sleeps' NP
"""


def words(rec: Recognizer, text: str):
    index = {a: i for i, a in enumerate(rec.atoms)}
    return tuple(index[Literal(w)] for w in text.split())


def test_toy_grammar_reads_as_tokens():
    g = parse(TOY, "cfg")
    assert g.dialect == "lark" and g.start == "S"
    assert [d.name for d in g.directives] == ["import", "ignore"]
    rec = Recognizer(g)
    assert rec.accepts(words(rec, "the dog sleeps cat's"))
    assert rec.accepts(words(rec, "hello"))
    assert not rec.accepts(words(rec, "the dog"))


def test_write_read_round_trip_keeps_the_language():
    g = parse(TOY, "cfg")
    text = write(g, "cfg")
    assert text.startswith("%start S\n") and "VP -> 'sleeps' NP" in text
    assert check_equivalence(g, parse(text, "cfg")).ok
    assert check_equivalence(g, parse(write(g, "lark"), "lark", start="s")).ok


def test_undefined_nonterminals_derive_nothing():
    g = parse("S -> A 'x' | 'y'\nA -> B | 'a'\n", "cfg")
    assert "B" in g.header
    rec = Recognizer(g)
    assert rec.accepts(words(rec, "a x")) and rec.accepts(words(rec, "y"))
    assert [r.name for r in g.rules] == ["S", "A"]


@pytest.mark.parametrize("text,line,col,msg", [
    ("S -> 'a\n", 1, 6, "unterminated"),
    ("S 'a'\n", 1, 1, "expected 'NAME -> "),
    ("%begin S\nS -> 'a'\n", 1, 1, "unknown directive"),
    ("# nothing\n", 1, 1, "no productions"),
    ("%start T\nS -> 'a'\n", 1, 1, "start symbol 'T'"),
])
def test_errors_are_located(text, line, col, msg):
    with pytest.raises(GrammarError) as e:
        parse(text, "cfg", path="g.cfg")
    assert (e.value.pos.line, e.value.pos.col) == (line, col) and msg in e.value.message


def test_gbnf_grammar_does_not_convert_to_nltk():
    with pytest.raises(GrammarError, match="whitespace-separated tokens"):
        write(parse('root ::= "a"\n', "gbnf"), "cfg")


@pytest.mark.skipif(not CORPUS_CFG.exists(), reason="corpus not found")
def test_corpus_commandtalk_accepts_its_samples():
    g = read(str(CORPUS_CFG))  # Latin-1 comments, 4,700 rules, undefined DYNAMIC_* nonterminals
    rec = Recognizer(g)
    samples = sorted(CORPUS_CFG.parent.glob(CORPUS_CFG.stem + ".sample*.txt"))
    assert samples
    for s in samples:
        text = s.read_text(encoding="utf-8")
        assert rec.accepts(words(rec, text)), s.name
    again = parse(write(g, "cfg"), "cfg")
    assert len(again.rules) >= len(g.rules)
