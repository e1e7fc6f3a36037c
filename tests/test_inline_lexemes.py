"""Inlining that keeps llguidance's lexemes (``Target.inlining = INLINE_LEXICAL``, the default
and llguidance targets): llguidance's GBNF reader makes every lexical rule
(``grammar.analysis.lexical_rules``) one greedy lexeme, so a lexical rule is inlined only into
lexical users or when it is one atom; a non-lexical rule may go anywhere (start ⇒ goal,
then the same in llguidance itself)."""

from __future__ import annotations

import pytest

from gramopt.formats import parse
from gramopt.grammar.analysis import lexical_rules
from gramopt.transforms.inline import inline_rules, keeps_lexemes


@pytest.mark.parametrize("text,lexical", [
    # a, c name only atoms and lexical rules; b is recursive; root is the start
    ('root ::= a b\na ::= "x" c\nc ::= [0-9]+\nb ::= "(" b ")" | "y"\n', {"a", "c"}),
    # mutual recursion: neither
    ('root ::= p\np ::= q "a" | "b"\nq ::= p\n', set()),
    # d names a non-lexical rule
    ('root ::= d\nd ::= b "z"\nb ::= "(" b ")" | "y"\ne ::= ""\n', {"e"}),
    # a chain of lexical rules
    ('root ::= x\nx ::= y y\ny ::= z | "q"\nz ::= [a-z]\n', {"x", "y", "z"}),
])
def test_lexical_rules(text, lexical):
    assert lexical_rules(parse(text, "gbnf")) == lexical


SHAPES = r'''root ::= "<" item ">" wrap
item ::= "- " body "\n"
body ::= [^\n]+
wrap ::= tail "!"
tail ::= "(" tail ")" | sep
sep ::= ";"
'''


def test_inlining_keeps_lexemes_start_to_goal():
    """item stays out of the start and body out of item (lexical: greedy lexemes of their
    own); sep (one atom) goes into tail; wrap (not lexical) into the start; tail refers to
    itself."""
    g = parse(SHAPES, "gbnf")
    out, names = inline_rules(g, may=keeps_lexemes(g))
    assert sorted(names) == ["sep", "wrap"]
    assert [r.name for r in out.rules] == ["root", "item", "body", "tail"]
    assert lexical_rules(out) == {"item", "body"}
    # without the condition, κ alone inlines item and body as well
    _, free = inline_rules(g)
    assert {"item", "body"} <= set(free)


# ce is lexical: one greedy lexeme [a-z]*"} beside cm's per-letter parser rule (llguidance
# rejects the sentence xb", with it: engines/llguidance's module docstring)
GREEDY = r'''root ::= "x" (cm | ce)
cm ::= "\"" "," | [a-z] cm | "(" cm ")"
ce ::= [a-z]* "\"" "}"
'''


def test_in_llguidance_a_kept_lexeme_keeps_the_masks_an_inlined_one_changes():
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(GREEDY, "gbnf")
    kept, names = inline_rules(g, may=keeps_lexemes(g))
    assert names == [] and kept == g
    free, names = inline_rules(g)
    assert names == ["ce"]
    assert engine_difference(g, free) is not None  # the inlined letters are parser-level now


def test_in_llguidance_the_allowed_inlinings_keep_the_masks():
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(SHAPES.replace('"<" item ">" wrap', '"<" item ">" wrap | "[" root "]"'), "gbnf")
    out, names = inline_rules(g, may=keeps_lexemes(g))
    assert names
    assert engine_difference(g, out, samples=64) is None
