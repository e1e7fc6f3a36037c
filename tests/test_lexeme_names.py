"""The extractor names no shared expression that llguidance would read as one lexeme where the
input wrote it inline (``Target.names_lexemes``, ``Extractor(name_lexemes=False)``): its
GBNF reader turns a leaf rule into one greedy lexeme, and ``"[" [ ]* "]"`` named beside
``"[" [ ]* item …`` made it refuse ``"`` after ``[ `` (Github_hard---o21157, 129 Qwen tokens)."""

from __future__ import annotations

import dataclasses

import pytest

from gramopt import targets
from gramopt.formats import parse, write
from gramopt.grammar import Ref, walk
from gramopt.passes import optimize

# three arrays that share the empty-array alternative; item and num are not regular (parser
# rules in llguidance, so the arrays are too)
ARRAYS = r'''root ::= "{" a "," b "," c "}"
a ::= "[" [ ]* item ("," item)* [ ]* "]" | "[" [ ]* "]"
b ::= "[" [ ]* num ("," num)* [ ]* "]" | "[" [ ]* "]"
c ::= "[" [ ]* a ("," a)* [ ]* "]" | "[" [ ]* "]"
item ::= "<" item ">" | "0"
num ::= "(" num ")" | [1-9]
'''

# the o21157 shape, minimal: the empty array as a rule of its own (what the extractor wrote)
INLINE = r'''root ::= "x" arr
arr ::= "[" [ ]* item ("," item)* [ ]* "]" | "[" [ ]* "]"
item ::= "\"" chars
chars ::= "\"" | [a-z] chars
'''
NAMED = INLINE.replace('| "[" [ ]* "]"', "| empty") + 'empty ::= "[" [ ]* "]"\n'


def _portable(**changes):
    return dataclasses.replace(targets.get("portable"), guard=None, checked_in=(), **changes)


def _new_rules(original, out) -> set[str]:
    return {r.name for r in out.rules} - {r.name for r in original.rules}


def _leaf(out, name: str) -> bool:
    return not any(isinstance(e, Ref) for e in walk(out.rule_map[name].body))


def _in_llguidance(src: str, dialect: str, texts: list[bytes]):
    """llguidance's first mask difference from the input (byte vocabulary, along ``texts``) of
    ``_saturated``'s two forms: (as written, with lexemes named)."""
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(src, dialect)
    return tuple(engine_difference(g, out, texts=texts) for out in _saturated(g))


def _saturated(g):
    """``g`` through saturate as the portable target writes it, and as it would write it if it
    named lexemes (``names_lexemes=True``, what the default target did before)."""
    return (optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar,
            optimize(g, target=_portable(names_lexemes=True), passes=["saturate"], verify=False).grammar)


@pytest.mark.parametrize("target", ["portable", "llguidance"])
def test_targets_checked_in_llguidance_name_no_lexemes(target):
    t = targets.get(target)
    assert "llguidance" in t.checked_in and not t.names_lexemes


def test_no_target_checked_in_llguidance_names_lexemes():
    for t in targets.TARGETS.values():
        assert "llguidance" not in t.checked_in or not t.names_lexemes, t.name


def test_the_shared_empty_array_stays_inline_under_the_default_target():
    """start ⇒ goal: each array keeps `"[" [ ]* "]"` written inline; with names_lexemes the
    same extraction names it as one leaf rule (the check can fail)."""
    g = parse(ARRAYS, "gbnf")
    out = optimize(g, target=_portable(), verify=False).grammar
    assert not any(_leaf(out, n) for n in _new_rules(g, out))
    # each of the three arrays keeps its empty array written in place (b and c, which are no
    # lexemes, may be inlined into the start: ``INLINE_LEXICAL``)
    assert write(out, "gbnf").count('"[" [ ]* "]"') == 3
    named = optimize(g, target=_portable(names_lexemes=True), verify=False).grammar
    assert any(_leaf(named, n) for n in _new_rules(g, named)), "the extractor names it without the field"


def test_a_shared_expression_with_a_parser_rule_may_still_be_named():
    """Only leaves are kept inline: a shared sequence that references a rule which is not
    regular is a parser rule in llguidance, and the default target may still name it."""
    text = ('root ::= "{" a "," a2 "," a3 "}"\n'
            + "".join(f'{n} ::= "<" [ ]* num [ ]* "," [ ]* num [ ]* ">" | "{n}"\n' for n in ("a", "a2", "a3"))
            + 'num ::= "(" num ")" | "0"\n')  # not regular: a parser rule in llguidance
    g = parse(text, "gbnf")
    out = optimize(g, target=_portable(), verify=False).grammar
    assert _new_rules(g, out) and not any(_leaf(out, n) for n in _new_rules(g, out))




def test_llguidance_lexes_the_named_empty_array_differently():
    """Stepped in llguidance byte by byte: the named empty array refuses `"` after `x[ `,
    the inline one allows it (the engine behaviour the field guards against)."""
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    d = engine_difference(parse(INLINE, "gbnf"), parse(NAMED, "gbnf"), texts=[b'x[ "a"]'])
    assert d is not None and d.prefix == b"x[ " and d.only_original == [ord('"')]


def test_the_default_targets_output_steps_like_its_input_in_llguidance():
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(ARRAYS, "gbnf")
    out = optimize(g, target=_portable(), verify=False).grammar
    texts = [b'{[ <0>],[ 1],[ [ 0]]}', b'{[],[ ],[ [] ]}']
    assert engine_difference(g, out, texts=texts) is None
    named = optimize(g, target=_portable(names_lexemes=True), verify=False).grammar
    assert engine_difference(g, named, texts=texts) is not None


# an object's empty alternative written inline, and a rule of the same body (a leaf: one
# llguidance lexeme) referenced as a value elsewhere: the e-graph merges the two
OBJECTS = r'''root ::= "{" [ ]* "\"a\"" [ ]* ":" [ ]* obj [ ]* "," [ ]* "\"f\"" [ ]* ":" [ ]* fields [ ]* "}"
obj ::= "{" [ ]* "\"b\"" [ ]* ":" [ ]* item [ ]* "}" | "{" [ ]* "}"
fields ::= "{" [ ]* "}"
item ::= "<" item ">" | "0"
'''


def test_an_input_lexeme_is_referenced_only_where_the_input_referenced_it():
    """start ⇒ goal (``Extractor._copied_lexemes``): saturate merges obj's `"{" [ ]* "}"` into
    fields' class; obj keeps it inline (a reference there is one greedy lexeme in llguidance,
    which after `{ ` refuses the `"` of a member: seven Kubernetes schemas), root keeps its
    reference. Without llguidance (names_lexemes) obj names the merged class (a leaf rule), as
    the default target did before."""
    g = parse(OBJECTS, "gbnf")
    out = optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar
    assert "fields" not in [n for e in walk(out.rule_map["obj"].body) if isinstance(e, Ref) for n in [e.name]]
    assert '"{" [ ]* "}"' in write(out, "gbnf").split("obj ::=")[1].splitlines()[0]
    assert any(isinstance(e, Ref) and e.name == "fields" for e in walk(out.rule_map["root"].body))
    merged = optimize(g, target=_portable(names_lexemes=True), passes=["saturate"], verify=False).grammar
    leaf = [e.name for e in walk(merged.rule_map["obj"].body) if isinstance(e, Ref) and e.name != "item"]
    assert leaf and _leaf(merged, leaf[0])


def test_the_merged_lexeme_keeps_llguidance_masks():
    """The difference the rule above prevents, in llguidance itself (byte vocabulary): the
    merged form refuses `"` after `{ ` inside obj, the written one does not."""
    written, merged = _in_llguidance(OBJECTS, "gbnf", [b'{"a":{ "b":0},"f":{}}', b'{"a":{},"f":{ }}'])
    assert written is None and merged is not None and merged.prefix.endswith(b"{ ")


def test_a_rule_merged_with_an_equal_input_rule_keeps_its_references():
    """Two input rules of one body (fields, meta) are one class, written under one name; wrap,
    which referenced meta, keeps a reference to a leaf rule (a lexeme where the input had one),
    and obj's inline copy stays inline."""
    src = OBJECTS.replace('"\\"f\\"" [ ]* ":" [ ]* fields', '"\\"f\\"" [ ]* ":" [ ]* fields [ ]* "," [ ]* wrap')
    src += 'wrap ::= "(" [ ]* meta [ ]* ")" | "<" item ">"\nmeta ::= "{" [ ]* "}"\n'
    g = parse(src, "gbnf")
    assert "wrap" in g.rule_map and "wrap" in [e.name for e in walk(g.rule_map["root"].body) if isinstance(e, Ref)]
    out = optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar
    leaves = lambda name: [e.name for e in walk(out.rule_map[name].body) if isinstance(e, Ref) and _leaf(out, e.name)]  # noqa: E731
    assert len(leaves("wrap")) == 1 and leaves("obj") == []


# a parser rule of the input (left-recursive: no lexeme in llguidance) that saturation writes as
# a star, ``ws ::= [ ]*``, which llguidance reads as one greedy lexeme; s (pinned by its
# assertion, written back as it is) keeps the star inline, a parser loop over ``/[ ]/``
HELPER = r'''root ::= "x" [ ]* s "!" ws "?"
s ::= "\"" [ ]* "}" | "\"" ws "," | "a" s (= "!")
ws ::= ws [ ] | ""
'''


def test_a_parser_rule_written_as_a_star_is_written_at_its_uses():
    """start ⇒ goal (``Extractor._new_lexemes``, (a)): saturate finds ws = ``[ ]*``; the
    star is written inline where ws was named (root, and the pinned s, whose other star the
    input wrote inline), and no rule ws is left. With names_lexemes the extractor writes
    ``ws ::= [ ]*`` beside s's inline star, as the default target did before."""
    g = parse(HELPER, "ebnf")
    out = optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar
    assert "ws" not in out.rule_map and [r.name for r in out.rules] == ["root", "s"]
    assert write(out, "ebnf").splitlines()[1] == 's ::= "\\"" [ ]* "}" | "\\"" [ ]* "," | "a" s (= "!")'
    assert out.rule_map["s"].lookahead == g.rule_map["s"].lookahead
    named = optimize(g, target=_portable(names_lexemes=True), passes=["saturate"], verify=False).grammar
    assert "ws" in named.rule_map and _leaf(named, "ws")


def test_the_star_written_at_its_uses_keeps_llguidance_masks():
    """In llguidance (byte vocabulary): with ``ws ::= [ ]*`` named beside s's inline star the
    lexer follows the longer lexeme after ``x a"  `` and refuses ``}``; written inline, the
    masks are the input's."""
    written, named = _in_llguidance(HELPER, "ebnf", [b'x a"  }! ?', b'x"  ,!?'])
    assert written is None and named is not None
    assert named.prefix == b'x a"  ' and named.only_original == [ord("}")]


# the arithmetic grammar's shape: id names a parser helper (a parser rule in llguidance, so id is
# one too, and its white space ends where the "\n" of root can start); saturate writes the
# helper as a star, which would make id one greedy lexeme ``[a-z]+ [\n ]*``
IDENTS = r'''root ::= (id "=" [ \n]* id "\n")+
id ::= [a-z]+ ws
ws ::= ws [ \n] | ""
'''
# what the default target's saturate wrote before (ws as the star, id a leaf rule)
IDENTS_LEAF = 'root ::= (id "=" [ \\n]* id "\\n")+\nid ::= [a-z]+ [ \\n]*\n'


def test_a_rule_that_the_star_would_make_a_lexeme_is_written_at_its_uses_too():
    """start ⇒ goal: id (a parser rule of the input, a lexeme class of the output) is written
    inline like ws, so root stays one parser rule over the input's atoms (before: ``IDENTS_LEAF``)."""
    g = parse(IDENTS, "gbnf")
    out = optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar
    assert write(out, "gbnf") == 'root ::= ([a-z]+ [\\n ]* "=" [\\n ]* [a-z]+ [\\n ]* "\\n")+\n'


def test_the_rule_written_at_its_uses_keeps_llguidance_masks():
    """In llguidance: the leaf rule ``id ::= [a-z]+ [\\n ]*`` takes the ``\\n`` after ``a= b``
    into its lexeme and refuses the next line's letters and the end; inline, the ``\\n`` ends
    the line, as in the input."""
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(IDENTS, "gbnf")
    out = optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar
    texts = [b'a= b\nc=d\n']
    assert engine_difference(g, out, texts=texts) is None
    d = engine_difference(g, parse(IDENTS_LEAF, "gbnf"), texts=texts)
    assert d is not None and d.prefix == b"a= b\n" and ord("c") in d.only_original


# a rule of the input that is a parser rule only through a recursive helper, and whose lexeme
# cannot take what follows it (an e-mail address before ">" or "]")
EMAIL = r'''root ::= "<" em ">" | "[" em "]"
em ::= local "@" [a-z]+
local ::= [a-z] local | [a-z]
'''


def test_a_new_lexeme_that_cannot_take_what_follows_keeps_its_name():
    """start ⇒ goal: local (a parser rule, chosen as the star ``[a-z]+``) is written inline (a);
    em, a lexeme of the output whose strings no letter-free follower can extend, stays a rule
    (b): nothing changes what llguidance allows."""
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(EMAIL, "gbnf")
    out = optimize(g, target=_portable(), passes=["saturate"], verify=False).grammar
    assert [r.name for r in out.rules] == ["root", "em"] and _leaf(out, "em")
    assert engine_difference(g, out, texts=[b"<ab@cd>", b"[a@b]"]) is None
