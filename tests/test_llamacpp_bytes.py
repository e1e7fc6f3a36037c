"""llama.cpp's masks over the byte vocabulary decide its token masks (``engines.llamacpp.ByteTrace``):
tested against llama.cpp itself. For each grammar and each byte state along a few texts, the
mask llama.cpp computes over a vocabulary of all single bytes plus multi-byte tokens (whole
and split characters, partial UTF-8 sequences, tokens that continue a character, an end token,
``</s>``, an empty token, irregular tokens) is compared with the mask the argument predicts
from the byte vocabulary alone (each token: the conjunction of its byte steps; an end token:
the end bit; an empty one: never). Where the docstring says the argument breaks (a negated
class excluding a non-ASCII code point; tokens llama.cpp decodes differently as a whole), the
tests show llama.cpp breaking it and ``bytes_decide`` / ``irregular_tokens`` naming it. Then
the judge's check: pairs both its old form (full Qwen masks) and its new one (byte trace first)
must call different, and pairs both must call the same. Skips where llama-cpp-python is absent."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
pytestmark = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python (and gguf) not installed")

WHOLE = ["α", "β", "ω", "αβ", "é", "😀", "😀!", "x😀", "ab", '"a', 'a"', "ä", "中文", "\U0010FFFF"]
SPLIT = [b"\xb1x", b"a\xce", b"\xf0\x9f", b"\x98\x80", b"\x9f\x98\x80", b"\xa9\"", b"\xce\xb1\xce",
         b"\xe4\xb8", b"\xad\xe6\x96\x87", b"\xf8\x80\x80\x80", b"\xf4\x90\x80\x80"]
IRREGULAR = [b"a\x00b", b"\xc3A", b"\xc1\xa1", b"\xe0\x80\x80", b"\xe0\x9f\xbf"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    """All single bytes, the multi-byte tokens above, ``</s>``, an empty token, then the end
    token; its GGUF goes to a temporary cache."""
    import os
    from gramopt.runtime.vocab import Vocab
    saved = os.environ.get("GRAMOPT_CACHE")
    os.environ["GRAMOPT_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    tokens = [bytes([b]) for b in range(256)] + [w.encode() for w in WHOLE] + SPLIT + IRREGULAR + [b"</s>", b""]
    yield Vocab(tokens + [b""], eos_ids=(len(tokens),), name="test-bytes")
    if saved is None:
        os.environ.pop("GRAMOPT_CACHE")
    else:
        os.environ["GRAMOPT_CACHE"] = saved


class Masks:
    """llama.cpp's masks of one grammar after byte prefixes, over ``vocab`` and over the byte
    vocabulary (each computed once per prefix)."""

    def __init__(self, text: str, vocab):
        from gramopt.engines.llamacpp import LlamaCppMatcher, LlamaGrammar, byte_vocab
        self.vocab = vocab
        self.full = LlamaCppMatcher(LlamaGrammar.compile(text, vocab))
        self.bytes = LlamaCppMatcher(LlamaGrammar.compile(text, byte_vocab()))
        self._full, self._bytes = {}, {}
        single = {b[0]: i for i, b in enumerate(vocab.token_bytes) if len(b) == 1}
        self.byte_ids = [single[x] for x in range(256)]  # each byte's id in ``vocab``

    @staticmethod
    def _after(m, prefix: bytes, memo: dict, ids) -> np.ndarray | None:
        if prefix not in memo:
            m.reset()
            for x in prefix:
                if not m.allowed_tokens()[ids[x]]:
                    memo[prefix] = None
                    return None
                m.accept_allowed(ids[x])
            memo[prefix] = m.allowed_tokens().copy()
        return memo[prefix]

    def token_mask(self, prefix: bytes) -> np.ndarray | None:
        return self._after(self.full, prefix, self._full, self.byte_ids)

    def byte_mask(self, prefix: bytes) -> np.ndarray | None:
        return self._after(self.bytes, prefix, self._bytes, range(256))

    def predicted(self, prefix: bytes, token: int, end: frozenset) -> bool:
        """The token's bit as the argument predicts it from the byte masks alone."""
        from gramopt.engines.llamacpp import BYTE_EOS
        if token in end:
            return bool(self.byte_mask(prefix)[BYTE_EOS])
        tb = self.vocab.token_bytes[token]
        if not tb:
            return False
        for i, x in enumerate(tb):
            mask = self.byte_mask(prefix + tb[:i])
            if mask is None or not mask[x]:
                return False
        return True

    def mismatches(self, prefix: bytes) -> list[bytes]:
        """Tokens whose llama.cpp bit after ``prefix`` is not the predicted one."""
        from gramopt.engines.llamacpp import end_tokens
        end = end_tokens(self.vocab)
        actual = self.token_mask(prefix)
        assert actual is not None, prefix
        return [self.vocab.token_bytes[t] or b"<end>" for t in range(len(self.vocab))
                if bool(actual[t]) != self.predicted(prefix, t, end)]


# grammar, byte prefixes to test at (each a prefix llama.cpp allows, some ending inside a character)
DECIDED = [
    ('root ::= [α-ω]+ "x"?', ["", "α", "\u03b1\u03c9".encode()[:3].decode("utf-8", "ignore"), "ωψ"],
     [b"\xce", b"\xcf", b"\xce\xb1\xcf"]),
    ('root ::= "\\"" [^"\\\\]* "\\""', ['"', '"a', '"é', '"中'], [b'"\xc3', b'"\xe4\xb8', b'"\xf0\x9f\x98']),
    ('root ::= [\\U0001F600-\\U0001F64F]+ "!"', ["", "😀"], [b"\xf0", b"\xf0\x9f", b"\xf0\x9f\x98"]),
    ('root ::= "<" . . ">"', ["<", "<a", "<é"], [b"<\xc3", b"<\xf8", b"<\xf8\x80\x80"]),
    ('root ::= ("é" | [à-ÿ]) "x" | "a" "\\u00e9"?', ["", "é", "a"], [b"\xc3", b"a\xc3"]),
    ('root ::= [^"\\\\\\x7F\\x00-\\x1F]* "\\""', ["", "ab", "ä"], [b"\xe6", b"\xe6\x96"]),
    ('root ::= "a" [\\x00-\\x7F\\u0100-\\U0010FFFF]*', ["a", "aĀ"], [b"a\xc4", b"a\xf4\x8f"]),
]


@pytest.mark.parametrize("text, prefixes, partial", DECIDED, ids=[g for g, _, _ in DECIDED])
def test_token_bits_are_the_conjunction_of_their_byte_steps(vocab, text, prefixes, partial):
    from gramopt.engines.llamacpp import bytes_decide, irregular_tokens
    from gramopt.formats import parse
    assert bytes_decide(parse(text, "gbnf"), _regular(vocab)) is None
    masks = Masks(text, vocab)
    irregular = {vocab.token_bytes[t] for t in irregular_tokens(vocab.token_bytes)}
    assert irregular == set(IRREGULAR)
    for prefix in [p.encode() for p in prefixes] + partial:
        wrong = [t for t in masks.mismatches(prefix) if t not in irregular]
        assert wrong == [], (prefix, wrong)


def _regular(vocab):
    """``vocab`` without its irregular tokens (for ``bytes_decide``)."""
    from gramopt.runtime.vocab import Vocab
    return Vocab([b for b in vocab.token_bytes if b not in IRREGULAR], (len(vocab) - len(IRREGULAR) - 1,))


def test_the_argument_breaks_on_a_negated_class_excluding_a_non_ascii_code_point(vocab):
    """``[^α]`` refuses the byte CE (its range U+0380-U+03BF holds α) yet allows the token ``β``
    (CE B2): the bytes say no, llama.cpp says yes; ``bytes_decide`` refuses such a grammar."""
    from gramopt.engines.llamacpp import bytes_decide
    from gramopt.formats import parse
    text = 'root ::= [^α] "x"'
    masks = Masks(text, vocab)
    ids = {b: i for i, b in enumerate(vocab.token_bytes)}
    assert not masks.byte_mask(b"")[0xCE]
    assert masks.token_mask(b"")[ids["β".encode()]]
    assert "β".encode() in masks.mismatches(b"")
    assert bytes_decide(parse(text, "gbnf"), _regular(vocab)) is not None
    assert bytes_decide(parse('root ::= [^"\\\\] "x"', "gbnf"), _regular(vocab)) is None


@pytest.mark.parametrize("token, grammar", [
    (b"a\x00b", 'root ::= "a" "c"'),     # a C string: llama.cpp reads "a"
    (b"\xc3A", 'root ::= "\\u00c1" "c"'),  # C3 41 decoded without a continuation check: U+00C1
    (b"\xc1\xa1", 'root ::= "a" "c"'),    # overlong "a"
    (b"\xe0\x9f\xbf", 'root ::= "\\u07ff" "c"'),  # overlong U+07FF: E0's range starts at U+0800
])
def test_the_argument_breaks_on_irregular_tokens(vocab, token, grammar):
    """A token llama.cpp decodes differently as a whole than byte by byte: it allows it where
    its bytes are refused; ``irregular_tokens`` lists it, and ``bytes_decide`` refuses a
    vocabulary that has one."""
    from gramopt.engines.llamacpp import bytes_decide, irregular_tokens
    from gramopt.formats import parse
    masks = Masks(grammar, vocab)
    t = vocab.token_bytes.index(token)
    assert masks.token_mask(b"")[t] and not masks.predicted(b"", t, frozenset())
    assert t in irregular_tokens(vocab.token_bytes)
    assert bytes_decide(parse(grammar, "gbnf"), vocab) is not None


def test_end_and_empty_tokens(vocab):
    """The end token and ``</s>`` (an end token by its text) follow the byte vocabulary's end
    bit, whatever their text; an empty token is never allowed."""
    from gramopt.engines.llamacpp import BYTE_EOS, end_tokens
    masks = Masks('root ::= "<" "/s>"?', vocab)
    end = end_tokens(vocab)
    slash_s = vocab.token_bytes.index(b"</s>")
    assert {vocab.eos_ids[0], slash_s} <= end
    for prefix, may_end in ((b"", False), (b"<", True), (b"</", False), (b"</s>", True)):
        assert bool(masks.byte_mask(prefix)[BYTE_EOS]) == may_end
        mask = masks.token_mask(prefix)
        assert bool(mask[vocab.eos_ids[0]]) == bool(mask[slash_s]) == may_end
        assert not mask[vocab.token_bytes.index(b"")]


def test_qwen_has_no_irregular_token_and_its_masks_follow_the_bytes():
    """Qwen's vocabulary: no irregular token; every token but the end tokens is read by
    llama.cpp as its bytes; after a few prefixes of a string grammar, every token with a
    non-ASCII byte or of at most two bytes, and a seeded sample of the rest, has the predicted
    bit."""
    from gramopt.engines.llamacpp import end_tokens, irregular_tokens
    from gramopt.runtime.vocab import Vocab
    q = Vocab.qwen()
    assert irregular_tokens(q.token_bytes) == []
    assert _pieces_differ(q) == []
    masks = Masks('root ::= "\\"" [^"\\\\\\x00-\\x1F]* "\\"" [ \\t\\n]*', q)
    rng = np.random.default_rng(0)
    chosen = [t for t, b in enumerate(q.token_bytes) if len(b) <= 2 or (max(b, default=0) >= 0x80 and len(b) <= 4)]
    chosen = sorted(set(chosen[::7]) | set(rng.choice(len(q), 1500, replace=False).tolist()) | set(q.eos_ids))
    end = end_tokens(q)
    for prefix in (b"", b'"', '"a中'.encode(), b'"\xe4\xb8', b'"x"'):
        actual = masks.token_mask(prefix)
        wrong = [q.token_bytes[t] for t in chosen if bool(actual[t]) != masks.predicted(prefix, t, end)]
        assert wrong == [], (prefix, wrong[:5])
def _pieces_differ(vocab) -> list[int]:
    """Tokens other than end tokens whose text, as llama.cpp's grammar reads it
    (``llama_token_to_piece`` with special tokens rendered), is not their bytes."""
    import ctypes
    from gramopt.engines.llamacpp import _lib, end_tokens, load_vocab
    ll, v, end = _lib(), load_vocab(vocab), end_tokens(vocab)
    buf = ctypes.create_string_buffer(1024)
    out = []
    for t, b in enumerate(vocab.token_bytes):
        n = ll.llama_token_to_piece(v, t, buf, len(buf), 0, True)
        if t not in end and buf.raw[:max(n, 0)] != b:
            out.append(t)
    return out


# ---------------------------------------------------------------- the judge's check, old and new

POSITIVE_STRING = 'root ::= "\\"" [\\x00-!#-[\\]-\\U0010FFFF]* "\\""'
NEGATED_STRING = 'root ::= "\\"" [^"\\\\]* "\\""'
MUST_DIFFER = [
    # llama.cpp allows the lone bytes F5-FF in a negated class only: a byte the language refuses
    (POSITIVE_STRING, NEGATED_STRING),
    ('root ::= [α-ω]+', 'root ::= [α-ψ]+'),
    ('root ::= "{" [a-z]* "}"', 'root ::= "{" [a-y]* "}"'),
    ('root ::= "x" [😀-🙏]', 'root ::= "x" [😀-🙎]'),
]
MUST_AGREE = [
    (NEGATED_STRING, 'root ::= "\\"" c "\\""\nc ::= [^"\\\\] c | ""'),
    ('root ::= [α-ω]+', 'root ::= [α-ω] [α-ω]*'),
    ('root ::= "a" "é"? "b"', 'root ::= "a" ("é" "b" | "b")'),
    # the input's error, not the candidate's: the candidate refuses F5-FF, as the language does
    (NEGATED_STRING, POSITIVE_STRING),
]


def _judged(a: str, b: str, old: bool) -> bool:
    from gramopt.formats import parse
    from gramopt.judge.masks import EngineCheck
    check = EngineCheck("llama.cpp", parse(a, "gbnf"), 600)
    if old:
        check._bytes_why = "the old check"
    else:
        assert check._bytes_why is None
    return check.difference(parse(b, "gbnf")) is not None


@pytest.mark.parametrize("a, b", MUST_DIFFER)
def test_both_checks_flag_known_differences(a, b):
    assert _judged(a, b, old=True) and _judged(a, b, old=False)


@pytest.mark.parametrize("a, b", MUST_AGREE)
def test_both_checks_pass_equal_masks(a, b):
    assert not _judged(a, b, old=True) and not _judged(a, b, old=False)


def test_a_candidate_with_a_wide_negated_class_gets_the_full_masks():
    """The byte masks do not decide a candidate with ``[^α]``: its check asks the full
    vocabulary at the engine's whole budget (and finds the difference)."""
    from gramopt.formats import parse
    from gramopt.judge.masks import STEP_SHARE, EngineCheck
    check = EngineCheck("llama.cpp", parse('root ::= [\\x00-\\u03b0\\u03b2-\\U0010FFFF] "x"', "gbnf"), 600)
    assert check.difference(parse('root ::= [^α] "x"', "gbnf")) is not None
    assert list(check.traces) == [int(600 * STEP_SHARE["llama.cpp"])]


def test_the_byte_trace_is_a_function_of_its_input():
    from gramopt.engines.llamacpp import ByteTrace
    from gramopt.formats import parse
    from gramopt.judge.trajectories import byte_sentences
    g = parse(NEGATED_STRING, "gbnf")
    a, b = ByteTrace(g, byte_sentences(g), 500), ByteTrace(g, byte_sentences(g), 500)
    assert a.steps == b.steps and sum(map(len, a.steps)) <= 500 and a.fills > 0
