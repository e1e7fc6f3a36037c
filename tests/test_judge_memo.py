"""The judge's masks kept by prefix (``judge.masks._Masks``, ``engines.llguidance.ByteTrace``):
a prefix met again is not asked of the engine again, and nothing else changes: the digests,
the verdicts and the differences are those of filling every step."""

from __future__ import annotations

import numpy as np
import pytest

from gramopt.formats import parse
from gramopt.judge.masks import _DIGEST, _digest, _Masks

NESTED = r'''root ::= "x" (cm | ce)
cm ::= "\"" "," | [a-z] cm | "(" cm ")"
ce ::= [a-z] ce | "\"" "}"
'''
AS_LEXEME = NESTED.replace('ce ::= [a-z] ce | "\\"" "}"', 'ce ::= [a-z]* "\\"" "}"')
PLAIN = r'''root ::= "\"" s "}"
s ::= [a-z] s | "\""
'''
ASSERTED = r'''root ::= "\"" s "}"
s ::= ([a-z] s | "\"") (= [ \n\r\t]* [,}\]:])
'''


class CountingMatcher:
    """A fake engine over 64 tokens: the mask after a prefix allows the tokens ``> sum(prefix)
    % 64`` (a function of the prefix); counts its fills."""

    def __init__(self):
        self.prefix, self.fills = [], 0

    def reset(self):
        self.prefix = []

    def fill(self, row):
        self.fills += 1
        bits = np.zeros(64, np.uint8)
        bits[sum(self.prefix) % 64 + 1:] = 1
        row[:] = np.packbits(bits, bitorder="little").view("<i4")

    def accept_allowed(self, t):
        self.prefix.append(t)
        return True


def follow(masks: _Masks, m: CountingMatcher, tokens) -> list[int]:
    m.reset()
    node, out, row = masks.root, [], np.zeros(2, np.int32)
    for t in tokens:
        out.append(masks.mask(node, m, row))
        m.accept_allowed(t)
        node = node.setdefault(t, {})
    return out


def fresh_digests(tokens) -> list[int]:
    m, out, row = CountingMatcher(), [], np.zeros(2, np.int32)
    for t in tokens:
        m.fill(row)
        out.append(_digest(row, 64))
        m.accept_allowed(t)
    return out


# start (paths followed in order) => goal (engine fills): a shared prefix is filled once;
# the same tokens in another order, or a path only as long as another's prefix, are not "met"
@pytest.mark.parametrize("paths, fills", [
    ([(1, 2, 3)], 3),
    ([(1, 2, 3), (1, 2, 3)], 3),            # the same path again: nothing new
    ([(1, 2, 3), (1, 2, 5)], 3),            # masks before 1, 1 2, 1 2 … shared: all three met
    ([(1, 2, 3), (1, 5, 3)], 4),            # diverges after 1: the third step is new
    ([(1, 2, 3), (2, 1, 3)], 5),            # same tokens, other order: only the start shared (NOT skipped)
    ([(1, 2), (1, 2, 3, 4)], 4),
])
def test_masks_are_filled_once_per_prefix(paths, fills):
    m, masks = CountingMatcher(), _Masks(64)
    for p in paths:
        assert follow(masks, m, p) == fresh_digests(p)
    assert m.fills == masks.fills == fills


def test_masks_of_two_grammars_are_never_shared():
    """A new ``_Masks`` (another grammar, or the candidate beside the input) fills again, even
    when it shares the input's store of mask contents."""
    m = CountingMatcher()
    a = _Masks(64)
    b = _Masks(64, a.rows)
    follow(a, m, (1, 2))
    follow(b, m, (1, 2))
    assert (a.fills, b.fills, m.fills) == (2, 2, 4)
    assert a.root is not b.root and a.root[_DIGEST] == b.root[_DIGEST] and len(a.rows) == 2


# ---------------------------------------------------------------- llguidance's byte vocabulary


def reference_byte_difference(original, optimized, texts):
    """The byte-vocabulary check filling every step of both grammars (its definition)."""
    import llguidance.numpy as llnp

    from gramopt.engines.llguidance import EOS, Difference, _matcher
    ma, mb = _matcher(original), _matcher(optimized)
    if ma is None:
        return None
    if mb is None:
        return Difference(b"", [], [])
    ba, bb = llnp.allocate_token_bitmask(1, EOS + 1), llnp.allocate_token_bitmask(1, EOS + 1)

    def _fill(m, buf) -> bytes:  # llguidance's own numpy call, the padding bits past EOS cleared
        llnp.fill_next_token_bitmask(m, buf, 0)
        return buf[0, :EOS // 32].tobytes() + int(buf[0, EOS // 32] & 1).to_bytes(4, "little")
    allowed = lambda mask: {x for x in range(EOS + 1) if (mask[x >> 3] >> (x & 7)) & 1}  # noqa: E731
    for text in texts:
        ma.reset()
        mb.reset()
        for i, x in enumerate(list(text) + [EOS]):
            fa, fb = _fill(ma, ba), _fill(mb, bb)
            if fa != fb:
                a, b = allowed(fa), allowed(fb)
                return Difference(text[:i], sorted(a - b), sorted(b - a))
            if x not in allowed(fa) or not ma.consume_token(x):
                break
            if not mb.consume_token(x):
                return Difference(text[:i], [x], [])
    return None


@pytest.mark.parametrize("a, b", [(NESTED, AS_LEXEME), (AS_LEXEME, NESTED), (NESTED, NESTED), (PLAIN, PLAIN)])
def test_byte_trace_gives_the_verdict_of_filling_every_step(a, b):
    pytest.importorskip("llguidance")
    from gramopt.engines.llguidance import ByteTrace, engine_difference
    from gramopt.judge.trajectories import byte_sentences
    ga, gb = parse(a, "gbnf"), parse(b, "gbnf")
    texts = byte_sentences(ga)
    want = reference_byte_difference(ga, gb, texts)
    trace = ByteTrace(ga, texts)
    assert trace.difference(gb) == want == engine_difference(ga, gb, texts=texts)
    assert trace.difference(gb) == want  # the kept trace serves a second candidate alike
    if a == b:
        assert want is None


# ---------------------------------------------------------------- the full vocabulary


@pytest.fixture(scope="module")
def xgrammar():
    pytest.importorskip("xgrammar")
    from gramopt.judge import masks
    if not masks.installed("xgrammar"):
        pytest.skip("xgrammar adapter unavailable")
    return masks


def test_the_trace_kept_by_prefix_is_the_trace_filled_step_by_step(xgrammar):
    check = xgrammar.EngineCheck("xgrammar", parse(PLAIN, "ebnf"), steps=200)
    trace = check._trace()
    m = check.adapter.matcher(check.handle)
    row = np.zeros_like(check.row)
    for path in trace:
        m.reset()
        for j, d in enumerate(path.digests):
            m.fill(row)
            assert _digest(row, len(check.vocab)) == d
            if j < len(path.tokens):
                assert m.accept(path.tokens[j])
    assert check._masks.fills < sum(len(p.digests) for p in trace)  # the paths' shared first step at least


def test_a_differing_candidate_is_still_found_with_the_kept_masks(xgrammar):
    check = xgrammar.EngineCheck("xgrammar", parse(PLAIN, "ebnf"), steps=200)
    assert check.difference(parse(PLAIN, "ebnf")) is None
    d = check.difference(parse(ASSERTED, "ebnf"))
    assert d is not None and d.engine == "xgrammar" and d.n_only_candidate > 0


# ---------------------------------------------------------------- one print, one compile per grammar


def test_a_grammar_is_printed_and_compiled_once_and_another_is_not_served_from_it():
    from gramopt.engines.base import printed_as
    from gramopt.formats import write
    from gramopt.verify.symbols import compile_grammar
    a = parse(PLAIN, "ebnf")
    b = parse(PLAIN.replace("[a-z]", "[a-y]"), "ebnf")
    assert printed_as(a, "gbnf") is printed_as(a, "gbnf") and printed_as(a, "gbnf") == write(a, "gbnf")
    assert printed_as(b, "gbnf") == write(b, "gbnf") != printed_as(a, "gbnf")
    assert printed_as(a, "ebnf") == write(a, "ebnf")  # one entry per dialect
    assert compile_grammar(a) is compile_grammar(a)
    assert compile_grammar(b) is not compile_grammar(a) and compile_grammar(b).terms != compile_grammar(a).terms
    # an equal grammar made of other objects is computed, not looked up (grammar.memo)
    again = parse(PLAIN, "ebnf")
    assert compile_grammar(again) is not compile_grammar(a) and compile_grammar(again) == compile_grammar(a)
