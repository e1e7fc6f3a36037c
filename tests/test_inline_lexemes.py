"""Inlining and left-recursion removal that keep llguidance's lexemes (``Target.inlining = INLINE_LEXICAL``, the default
and llguidance targets): llguidance's GBNF reader makes every lexical rule
(``grammar.analysis.lexical_rules``) one greedy lexeme, so a lexical rule is inlined only into
lexical users or when it is one atom; a non-lexical rule may go anywhere (start ⇒ goal,
then the same in llguidance itself)."""

from __future__ import annotations

import pytest

from gramopt.formats import parse
from gramopt.formats.ebnf import format_expr
from gramopt.grammar.analysis import lexical_rules
from gramopt.transforms.inline import inline_rules, keeps_lexemes
from gramopt.transforms.reshape import remove_left_recursion, remove_left_recursion_keeping_lexemes


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


# ws is a left-recursive helper: a parser rule in llguidance, each blank a lexeme of its own
HELPER = r'''root ::= (expr "\n")+
expr ::= [a-z] ws
ws ::= ws [ \n] | ""
list ::= list "," [a-z] | [a-z]
tail ::= tail expr | ""
'''


def test_left_recursion_keeping_lexemes_start_to_goal():
    """ws's star would be a lexeme: written right-recursive; list's star has a β (kept as a
    star, as ``remove_left_recursion`` writes it); tail's names expr, no lexeme: a star."""
    g = parse(HELPER, "gbnf")
    kept, names = remove_left_recursion_keeping_lexemes(g)
    plain, _ = remove_left_recursion(g)
    assert sorted(names) == ["list", "tail", "ws"]
    assert format_expr(kept.rule_map["ws"].body, "gbnf") == '[\\n ] ws | ""'
    assert format_expr(plain.rule_map["ws"].body, "gbnf") == '[\\n ]*'
    assert "ws" not in lexical_rules(kept) and "ws" in lexical_rules(plain)
    for name in ("list", "tail"):
        assert kept.rule_map[name] == plain.rule_map[name]


def test_in_llguidance_the_right_recursive_helper_keeps_the_masks_the_star_changes():
    """The star ``ws ::= [ \n]*`` is one greedy lexeme: after ``a`` it eats the ``\n`` the
    root needs (llguidance then refuses what the input allows); the right recursion is
    parsed blank by blank, as the input."""
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import engine_difference
    g = parse(HELPER.replace("list ::=", "# list ::=").replace("tail ::=", "# tail ::="), "gbnf")
    texts = [b"a \n", b"a\nb  \n"]
    assert engine_difference(g, remove_left_recursion(g)[0], texts=texts) is not None
    assert engine_difference(g, remove_left_recursion_keeping_lexemes(g)[0], texts=texts) is None
