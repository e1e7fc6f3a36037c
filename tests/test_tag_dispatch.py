"""xgrammar's TagDispatch read from EBNF and lowered to plain rules (grammar/tag_dispatch.py):
the lowered grammar's language and token masks equal xgrammar 0.2.8's own TagDispatch on
random texts; reader errors; round trip.

One known difference, checked exactly: xgrammar's free text is any *bytes* (its matcher
allows a lone continuation byte or 0xFF there), gramopt's is UTF-8 text (a language is a
set of UTF-8 strings). So every mask bit differs only for tokens that xgrammar allows and
that make the text so far an invalid UTF-8 prefix (or the stop token after an incomplete
character); all other bits are equal.
"""

from __future__ import annotations

import codecs
import random

import numpy as np
import pytest

from gramopt.formats import parse, write
from gramopt.formats.ebnf import with_llamacpp_names
from gramopt.grammar import GrammarError
from gramopt.runtime import Matcher, Vocab

CASES = {
    "simple": ('root ::= TagDispatch(("tag1", rule1), ("tag2", rule2))\nrule1 ::= "abcd"\nrule2 ::= "efg"\n',
               ["tag1", "tag2", "abcd", "efg", "t", "a", "g", "x", "1", "ta", "é"]),
    "no_loop_then_end": ('root ::= TagDispatch(("tag1", rule1), loop_after_dispatch=false) "END"\nrule1 ::= "abcd"\n',
                         ["tag1", "abcd", "END", "t", "E", "N", "q", "ag"]),
    "loop_then_end": ('root ::= TagDispatch(("tag1", rule1)) "END"\nrule1 ::= "abcd"\n',
                      ["tag1", "abcd", "END", "t", "E", "q"]),
    "excludes": ('root ::= TagDispatch(("tag1", rule1), excludes=("zz",)) "zz"\nrule1 ::= "abcd"\n',
                 ["tag1", "abcd", "z", "zz", "q", "t"]),
    "overlapping": ('root ::= TagDispatch(("ab", r1), ("ba", r2))\nr1 ::= "X"\nr2 ::= "Y" | "YY"\n',
                    ["a", "b", "X", "Y", "ab", "ba"]),
    "tool_call": ('root ::= TagDispatch(\n  ("<function=", group),\n  loop_after_dispatch=true,\n  excludes=("<|end|>")\n)\n'
                  'group ::= "get_weather>" "{\\"city\\": \\"" [a-z]+ "\\"}" "</function>" | "add>" [0-9]+ "+" [0-9]+ "</function>"\n',
                  ["<function=", "get_weather>", "add>", "</function>", '{"city": "', '"}', "ab", "1", "+", "<", "<|end|>", " ", "é"]),
}


def _texts(pieces, n, seed):
    rng = random.Random(seed)
    out = [""]
    for _ in range(n):
        out.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 7))))
    return out


def _gramopt_accepts(m: Matcher, text: str) -> bool:
    m.reset()
    return (not text or m.accept_bytes(text.encode())) and m.can_terminate()


@pytest.mark.parametrize("name", sorted(CASES))
def test_language_equals_xgrammar(name):
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string
    src, pieces = CASES[name]
    xg = xgr.Grammar.from_ebnf(src)
    m = Matcher(parse(src, "ebnf"), Vocab.from_bytes([b"a"], eos=1))
    texts = _texts(pieces, 300, seed=len(src))
    # texts xgrammar accepts are built from the grammar's own sentences too
    disagree = [(t, _is_grammar_accept_string(xg, t)) for t in texts
                if _is_grammar_accept_string(xg, t) != _gramopt_accepts(m, t)]
    assert not disagree, disagree[:5]
    assert sum(_gramopt_accepts(m, t) for t in texts) > 10


def utf8_prefix(data: bytes) -> bool:
    """True when ``data`` is valid UTF-8 up to a possibly incomplete last character."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
        return True
    except UnicodeDecodeError:
        return False


def _complete(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def compare_masks(got_words: np.ndarray, want_words: np.ndarray, vocab: Vocab, text: bytes, where: str):
    """Equal bits over the vocabulary, except tokens xgrammar allows that break UTF-8."""
    n = len(vocab)
    got = np.unpackbits(got_words.view(np.uint8), bitorder="little")[:n].astype(bool)
    want = np.unpackbits(want_words.view(np.uint8), bitorder="little")[:n].astype(bool)
    assert not (got & ~want).any(), (where, np.nonzero(got & ~want)[0][:10])
    for t in np.nonzero(want & ~got)[0]:
        if t in vocab.eos_ids:  # stopping: the text must be complete UTF-8 for gramopt
            assert not utf8_prefix(text) or not _complete(text), (where, "EOS", text)
        else:
            assert not utf8_prefix(text + vocab.token_bytes[t]), (where, t, vocab.token_bytes[t])
    return int((want & ~got).sum())


def _vocab_for(pieces):
    toks = sorted({p.encode() for p in pieces} | {p.encode()[:k] for p in pieces for k in range(1, len(p.encode()))}
                  | {b"a", b"q", b" ", b"\xc3", b"\xa9", b"\xff"})
    return Vocab.from_bytes(toks, eos=len(toks))


@pytest.mark.parametrize("name", sorted(CASES))
def test_masks_equal_xgrammar(name):
    xgr = pytest.importorskip("xgrammar")
    src, pieces = CASES[name]
    vocab = _vocab_for(pieces)
    info = xgr.TokenizerInfo(vocab.token_bytes, xgr.VocabType.RAW, vocab_size=len(vocab),
                             stop_token_ids=list(vocab.eos_ids), add_prefix_space=False)
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar(xgr.Grammar.from_ebnf(src))
    m = Matcher(parse(src, "ebnf"), vocab)
    rng = random.Random(7)
    steps = 0
    for walk in range(25):
        xm = xgr.GrammarMatcher(compiled, terminate_without_stop_token=False)
        m.reset()
        text = b""
        for _ in range(30):
            want = xgr.allocate_token_bitmask(1, len(vocab))
            xm.fill_next_token_bitmask(want)
            got = np.zeros((1, vocab.n_words), np.int32)
            m.fill_next_token_bitmask(got, 0)
            compare_masks(got[0], want.numpy()[0], vocab, text, f"{name} walk {walk} step {steps}")
            steps += 1
            allowed = m.allowed_tokens().tolist()
            if not allowed:
                break
            t = rng.choice(allowed)
            assert m.accept_token(t) and xm.accept_token(t)
            text += vocab.token_bytes[t]
            if m.is_terminated():
                break
    assert steps > 100


def test_round_trip_and_placement():
    src = CASES["tool_call"][0] + 'other ::= "x" TagDispatch(("ab", group)) "y"\n'
    g = parse(src, "ebnf")
    names = g.names
    assert names[0] == "root" and names[1].startswith("root_free_")
    assert "other_tag_dispatch" in names and names.index("other_tag_dispatch") == names.index("other") + 1
    text = write(g)
    assert "TagDispatch" not in text
    assert parse(text, "ebnf") == g
    assert parse(write(g, "gbnf"), "gbnf").rules == with_llamacpp_names(g).rules  # GBNF names: '_' → '-'


@pytest.mark.parametrize("src,message,col", [
    ('root ::= TagDispatch(("ab", r), ("abc", r))\nr ::= "x"\n', "contains 'ab'", 10),
    ('root ::= TagDispatch(("ab", r), excludes=("b",))\nr ::= "x"\n', "contains 'b'", 10),
    ('root ::= TagDispatch(("ab", r), stop_str=("b",))\nr ::= "x"\n', "stop_str", 33),
    ('root ::= TagDispatch(("ab", r) x)\nr ::= "x"\n', "expected ',' or ')'", 32),
    ('root ::= TagDispatch(("ab", nope))\n', "undefined rule 'nope'", 29),
    ('root ::= TagDispatch(("", r))\nr ::= "x"\n', "non-empty", 10),
    ('root ::= TagDispatch(("a", r), loop_after_dispatch=maybe)\nr ::= "x"\n', "true or false", 52),
])
def test_reader_errors(src, message, col):
    with pytest.raises(GrammarError) as e:
        parse(src, "ebnf")
    assert message in e.value.message and e.value.pos.line == 1 and e.value.pos.col == col, e.value.format()


def test_gbnf_has_no_macro():
    with pytest.raises(GrammarError):
        parse('root ::= TagDispatch(("ab", r))\nr ::= "x"\n', "gbnf")
