"""The random-derivation check forgets its Earley sets past ``KEPT_SETS`` (memory bounded by
one sentence's sets, not by all of them); its answers are those of keeping every set."""

from __future__ import annotations

import pytest

from gramopt.formats import parse
from gramopt.verify import derivations
from gramopt.verify.reference import Recognizer
from gramopt.verify.result import Bounds

LIST = 'root ::= "[" item ("," item)* "]"\nitem ::= [a-z]+ | root\n'
SAME = 'root ::= "[" item rest\nrest ::= "]" | "," item rest\nitem ::= [a-z] [a-z]* | root\n'
OTHER = 'root ::= "[" item ("," item)* "]"\nitem ::= [a-y]+ | root\n'  # no z


def check(a_text, b_text, kept):
    a, b = Recognizer(parse(a_text, "gbnf")), Recognizer(parse(b_text, "gbnf"))
    old = derivations.KEPT_SETS
    derivations.KEPT_SETS = kept
    try:
        cex, stats = derivations.derivation_check(a, b, Bounds(derivations=60))
    finally:
        derivations.KEPT_SETS = old
    return cex, stats["sentences"], max(a.states_built, b.states_built)


# start (the pair, sets kept) => goal: the same answer as keeping all; the sets stay bounded
@pytest.mark.parametrize("b_text, differs", [(SAME, False), (OTHER, True)])
def test_forgetting_sets_keeps_the_answer(b_text, differs):
    keep_all, sentences_all, built_all = check(LIST, b_text, 10**9)
    forget, sentences, built = check(LIST, b_text, 1)
    assert (keep_all is not None) == differs
    assert forget == keep_all and sentences == sentences_all
    if not differs:
        assert built < built_all  # released after each sentence: only the last one's sets remain
