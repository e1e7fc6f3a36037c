"""llama.cpp as an engine: the vocabulary written as a vocab-only GGUF, grammars compiled by
llama.cpp, masks read from its grammar sampler. Skips where llama-cpp-python is absent."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gramopt.engines.llamacpp import bpe_merges

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python (and gguf) not installed")


def test_merges_recovered_from_ranks():
    tokens = [b"a", b"b", b"c", b"ab", b"bc", b"abc", b"cab", b""]
    # "abc": BPE with ranks < 5 merges a+b (rank 3) first, leaving ab + c
    # "cab": c, a, b -> ab (rank 3) -> c + ab
    assert bpe_merges(tokens) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"c", b"ab")]


def test_merges_of_a_table_that_is_not_bpe_still_reach_every_token():
    tokens = [b"xyz", b"x", b"y", b"z", b"xy"]  # "xyz" ranked before its pieces
    assert bpe_merges(tokens) == [(b"xy", b"z"), (b"x", b"y")]


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A byte vocabulary plus a few longer tokens; its GGUF goes to a temporary cache."""
    import os
    from gramopt.runtime.vocab import Vocab
    saved = os.environ.get("GRAMOPT_CACHE")
    os.environ["GRAMOPT_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"ac", b"abc", b"\xc3\xa9", b" x"]
    yield Vocab.from_bytes(tokens, eos=len(tokens))
    if saved is None:
        os.environ.pop("GRAMOPT_CACHE")
    else:
        os.environ["GRAMOPT_CACHE"] = saved


def bits(row: np.ndarray, n: int) -> set[int]:
    return set(np.nonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:n])[0].tolist())


@needs_llama
def test_gguf_round_trip_and_masks(small_vocab):
    from gramopt.engines.llamacpp import LlamaCppMatcher, LlamaGrammar, load_vocab
    load_vocab(small_vocab)
    v = small_vocab
    ids = {b: i for i, b in enumerate(v.token_bytes) if b}
    g = LlamaGrammar.compile('root ::= "ab" "c"? | "é" [xy]', v)
    m = LlamaCppMatcher(g)
    out = np.zeros(v.n_words, np.int32)
    m.fill(out)
    assert bits(out, len(v)) == {ids[b"a"], ids[b"ab"], ids[b"abc"], ids[b"\xc3"], ids[b"\xc3\xa9"]}
    assert m.accept(ids[b"ab"])
    m.fill(out)
    assert bits(out, len(v)) == {ids[b"c"], v.eos_ids[0]}
    assert not m.accept(ids[b"a"])  # refused without asking llama.cpp (which would abort)
    m.fill(out)
    assert m.accept(v.eos_ids[0]) and m.is_terminated()
    m.reset()
    m.fill(out)
    assert ids[b"ab"] in bits(out, len(v)) and not m.is_terminated()
    assert len(m.fill_s) == 4 and all(t > 0 for t in m.fill_s)


@needs_llama
@pytest.mark.parametrize("text, message", [
    ('root ::= "a" | x', "Undefined rule identifier 'x'"),
    ('root ::= root "a" | "b"', "left recursion"),
    ('root ::= "\\q"', "unknown escape"),
])
def test_refusals_carry_llamacpps_message(small_vocab, text, message):
    from gramopt.engines.llamacpp import LlamaCppError, LlamaGrammar
    with pytest.raises(LlamaCppError, match=message):
        LlamaGrammar.compile(text, small_vocab)


NUMBER_GBNF = """root ::= "{" space "\\"limit\\"" space ":" space number "}" space
number ::= "-"? integral-part ("." decimal-part)? space
integral-part ::= [0-9] | [1-9] ([0-9] ([0-9] ([0-9] [0-9]?)?)?)
decimal-part ::= [0-9] ([0-9] ([0-9] ([0-9] [0-9]?)?)?)
space ::= " "?
"""


def test_rules_gramopt_names_in_gbnf_are_names_llamacpp_reads():
    """llama.cpp's rule names are letters, digits and '-' (no '_'): rules the optimizer
    introduces in a GBNF grammar, and a renamed start, are named ``base-k``."""
    import re
    from gramopt.formats import parse, write
    from gramopt.formats.ebnf import with_root_start
    from gramopt.grammar import Grammar, Literal, Ref, Rule
    from gramopt.passes import optimize
    out = optimize(parse(NUMBER_GBNF, "gbnf"), target="llama.cpp").grammar
    assert any(re.fullmatch(r"integral-part-\d", r.name) for r in out.rules), write(out)
    assert all(re.fullmatch(r"[A-Za-z0-9-]+", r.name) for r in out.rules)
    g = Grammar((Rule("s", Ref("root")), Rule("root", Literal("a"))), "s", dialect="gbnf")
    assert with_root_start(g).names == ["root", "root-1"]


@needs_llama
def test_optimized_gbnf_loads_in_llamacpp(small_vocab):
    from gramopt.engines.llamacpp import LlamaGrammar
    from gramopt.formats import parse, write
    from gramopt.passes import optimize
    LlamaGrammar.compile(write(optimize(parse(NUMBER_GBNF, "gbnf"), target="llama.cpp").grammar, "gbnf"),
                         small_vocab)
