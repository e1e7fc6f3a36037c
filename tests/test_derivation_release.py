"""The random-derivation check forgets its Earley sets past ``reference.KEPT_SETS``
(``Recognizer.trim``: memory bounded by a count of sets, not by every set of the check); its
answers are those of keeping every set. (Not the coverage check: its sentences start from
shared contexts, and forgetting their sets doubled its time on a 10,000-rule grammar.)"""

from __future__ import annotations

import pytest

from gramopt.formats import parse
from gramopt.verify import derivations, reference
from gramopt.verify.reference import Recognizer
from gramopt.verify.result import Bounds

LIST = 'root ::= "[" item ("," item)* "]"\nitem ::= [a-z]+ | root\n'
SAME = 'root ::= "[" item rest\nrest ::= "]" | "," item rest\nitem ::= [a-z] [a-z]* | root\n'
OTHER = 'root ::= "[" item ("," item)* "]"\nitem ::= [a-y]+ | root\n'  # no z


def check(method, a_text, b_text, kept):
    a, b = Recognizer(parse(a_text, "gbnf")), Recognizer(parse(b_text, "gbnf"))
    old = reference.KEPT_SETS
    reference.KEPT_SETS = kept
    try:
        cex, stats = method(a, b, Bounds(derivations=60))
    finally:
        reference.KEPT_SETS = old
    return cex, stats.get("sentences", stats.get("covered")), max(a.states_built, b.states_built)


# start (the pair, sets kept) => goal: the same answer as keeping all; the sets stay bounded
@pytest.mark.parametrize("method", [derivations.derivation_check])
@pytest.mark.parametrize("b_text, differs", [(SAME, False), (OTHER, True)])
def test_forgetting_sets_keeps_the_answer(method, b_text, differs):
    keep_all, sentences_all, built_all = check(method, LIST, b_text, 10**9)
    forget, sentences, built = check(method, LIST, b_text, 1)
    assert (keep_all is not None) == differs
    assert forget == keep_all and sentences == sentences_all
    if not differs:
        assert built < built_all  # released after each input: only the last one's sets remain
