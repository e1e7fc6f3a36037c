"""Verification stays bounded on large counted repetitions: ``x{m,n}`` that both grammars
hold is checked as one letter (``verify.letters``, Bekić's lemma), a difference found over
the letters is re-judged on the grammars themselves, and the coverage check stores no
context as a string (``verify.coverage``)."""

from __future__ import annotations

from gramopt.formats import parse
from gramopt.verify import check_equivalence
from gramopt.verify.coverage import coverage_sentences, shortest
from gramopt.verify.letters import abstract, concrete_text
from gramopt.verify.reference import Recognizer

MAXLENGTH = r'''
root ::= "\"" chars{4,32767} "\""
chars ::= [^"\\]
'''
INLINED = r'''
root ::= "\"" [^"\\]{4,32767} "\""
'''
ARRAY = r'''
root ::= "[" value items{0,9999} "]" | "[" "]"
items ::= "," value
value ::= "0" | [1-9] [0-9]* | root
'''


def test_a_32767_repetition_is_proved_equal_as_a_letter():
    res = check_equivalence(parse(MAXLENGTH, "gbnf"), parse(INLINED, "gbnf"))
    assert res.ok and res.stats["letters"] == {"repetitions": 1, "items": 0}
    assert any(isinstance(s, dict) and s.get("exact") for s in res.stats.values())
    assert res.stats["work"] < 10_000


def test_a_repetition_whose_item_names_rules_compares_the_items_too():
    changed = ARRAY.replace('value ::= "0" | [1-9] [0-9]* | root', 'value ::= "0" | [1-9] [0-9]* | root | "n"')
    ok = check_equivalence(parse(ARRAY, "gbnf"), parse(ARRAY.replace('"," value', '"," (value)'), "gbnf"))
    assert ok.ok and ok.stats["letters"]["items"] == 1
    res = check_equivalence(parse(ARRAY, "gbnf"), parse(changed, "gbnf"))
    assert not res.ok and res.counterexample.data.startswith((b"[n", b"n"))


def test_a_difference_over_the_letters_is_spelled_in_bytes():
    a = parse('root ::= "x" "a"{20,40}', "gbnf")
    b = parse('root ::= "y" "a"{20,40}', "gbnf")
    res = check_equivalence(a, b)
    assert not res.ok and res.stats["letters"]["repetitions"] == 1
    cex = res.counterexample
    assert isinstance(cex.data, bytes)
    assert Recognizer(a).is_viable_prefix(cex.data) != Recognizer(b).is_viable_prefix(cex.data) or \
        Recognizer(a).accepts(cex.data) != Recognizer(b).accepts(cex.data)


def test_a_difference_of_the_letters_only_falls_back_to_the_grammars():
    # a{0,30} a  versus  a{31}: equal languages, different letters
    a = parse('root ::= "a"{0,30} | "a"{0,30} "a"', "gbnf")
    b = parse('root ::= "a"{0,30} | "a"{31}', "gbnf")
    res = check_equivalence(a, b)
    assert res.ok and "inconclusive" in res.stats["letters"]


def test_a_changed_bound_is_a_difference():
    a = parse('root ::= "a"{4,100}', "gbnf")
    b = parse('root ::= "a"{4,99}', "gbnf")
    res = check_equivalence(a, b)
    assert not res.ok and res.counterexample.data == b"a" * 100


def test_letters_are_only_for_shared_repetitions():
    assert abstract(parse('root ::= "a"{4,100}', "gbnf"), parse('root ::= "a"{4,99}', "gbnf")) is None
    assert abstract(parse('root ::= "a"{4,10}', "gbnf"), parse('root ::= "a"{4,10}', "gbnf")) is None
    ab = abstract(parse(MAXLENGTH, "gbnf"), parse(INLINED, "gbnf"))
    assert len(ab.repeats) == 1 and ab.tagged == ()
    assert concrete_text(ab, (34, 256, 34)) == b'"' + b"\x00" * 4 + b'"'


def test_coverage_of_a_long_chain_stores_no_long_context():
    """The contexts of a 5,000-helper chain are back-pointers: their lengths grow, the
    table does not hold them."""
    g = Recognizer(parse('root ::= "a"{0,5000} "b"', "gbnf")).g
    sh = shortest(g)
    assert max(sh.left) >= 4999
    assert all(isinstance(e, tuple) and len(e) == 3 for e in sh.edge if e is not None)
    sentences = coverage_sentences(g)
    assert next(sentences) == tuple(b"b")


def test_a_repetition_node_kept_while_the_rules_it_names_change():
    """The optimizer rewrote ``int`` (the ``sign`` helper inlined) and kept ``items{0,9999}``:
    the node pairs as written, and a tag compares its items."""
    a = parse('''
root ::= "[" int items{0,9999} "]"
items ::= "," int
int ::= "0" | sign [1-9] [0-9]*
sign ::= "" | "-"
''', "gbnf")
    b = parse('''
root ::= "[" ("0" | "-"? [1-9] [0-9]*) items{0,9999} "]"
items ::= "," int
int ::= "0" | "-"? [1-9] [0-9]*
''', "gbnf")
    res = check_equivalence(a, b)
    assert res.ok and res.stats["letters"] == {"repetitions": 1, "items": 1}
    bad = parse('''
root ::= "[" ("0" | "-"? [1-9] [0-9]*) items{0,9999} "]"
items ::= "," int
int ::= "0" | "-"? [0-9] [0-9]*
''', "gbnf")
    res = check_equivalence(a, bad)
    assert not res.ok and "inconclusive" in res.stats["letters"]
