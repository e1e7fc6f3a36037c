"""The llama.cpp fix-up (``gramopt.targets.llamacpp``): repetitions written empty-first,
alternatives ordered widest-last. Golden before → after pairs, the language kept (start ⇒
goal, checked by the verifier), idempotence, and llama.cpp's own masks equal along samples."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gramopt.formats import parse, write
from gramopt.targets.llamacpp import order_for_llamacpp
from gramopt.verify import check_equivalence

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None

GOLDEN = [
    # x* → an empty-first rule; the class (widest) written last inside the group
    ('root ::= "\\"" char* "\\""\nchar ::= [^"\\\\] | "\\\\" ["nt]',
     'root ::= "\\"" root-star "\\""\nchar ::= "\\\\" ["nt] | [^"\\\\]\nroot-star ::= "" | char root-star'),
    # x+ → x R, x? → ("" | x)
    ('root ::= [a-z]+ "-"?', 'root ::= [a-z] root-star ("" | "-")\nroot-star ::= "" | [a-z] root-star'),
    # alternatives: nullable first, then by how many code points begin them
    ('root ::= [0-9a-z] "x" | "b" | ""', 'root ::= "" | "b" | [0-9a-z] "x"'),
    # the same item starred twice shares one rule
    ('root ::= "a"* "," "a"*', 'root ::= root-star "," root-star\nroot-star ::= "" | "a" root-star'),
]

UNCHANGED = [
    'root ::= "a" | "b"',              # equal widths keep their order
    'root ::= x* "b"\nx ::= "" | "a"',  # a nullable item: its star rule would be left-recursive
    'root ::= [a-z]{2,5}',             # bounded repetitions stay llama.cpp's own expansion
]


@pytest.mark.parametrize("before, after", GOLDEN)
def test_golden(before, after):
    g = parse(before, "gbnf")
    out = order_for_llamacpp(g)
    assert write(out, "gbnf").strip() == write(parse(after, "gbnf"), "gbnf").strip()
    assert check_equivalence(g, out).ok  # start ⇒ goal: the same language
    assert order_for_llamacpp(out) == out  # idempotent


@pytest.mark.parametrize("text", UNCHANGED)
def test_left_alone(text):
    g = parse(text, "gbnf")
    assert order_for_llamacpp(g) == g


def test_lark_grammars_are_left_alone():
    g = parse('start: A+ | "b"\nA: "a"\n', "lark")
    assert order_for_llamacpp(g) == g


def test_the_target_runs_it_and_reports_it():
    from gramopt.passes import optimize
    r = optimize(parse(GOLDEN[0][0], "gbnf"), target="llama.cpp")
    assert r.report.verified == "ok"
    target = [p for p in r.report.passes if p.name == "target"][0]
    assert target.fired.get("llama.cpp-star-rules") and any("widest-last" in n for n in target.notes)


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python (and gguf) not installed")
def test_llamacpp_masks_equal_along_a_sample(tmp_path, monkeypatch):
    """llama.cpp's masks of the input and of the fixed-up grammar agree at every step of a
    JSON-ish sample (bytes as tokens, plus a few multi-byte tokens)."""
    monkeypatch.setenv("GRAMOPT_CACHE", str(tmp_path))
    from gramopt.engines.llamacpp import LlamaCppMatcher, LlamaGrammar
    from gramopt.runtime.vocab import Vocab
    tokens = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'ab', b'\\n', b'", "', b"12"]
    v = Vocab.from_bytes(tokens, eos=len(tokens))
    text = ('root ::= "{" ws pair ("," ws pair)* "}"\npair ::= "\\"" char* "\\"" ":" ws (num | "\\"" char* "\\"")\n'
            'char ::= [^"\\\\] | "\\\\" ["\\\\nt]\nnum ::= "-"? [0-9]+\nws ::= " "?\n')
    g = parse(text, "gbnf")
    out = order_for_llamacpp(g)
    assert out != g
    a, b = LlamaGrammar.compile(write(g, "gbnf"), v), LlamaGrammar.compile(write(out, "gbnf"), v)
    ma, mb = LlamaCppMatcher(a), LlamaCppMatcher(b)
    ids = {t: i for i, t in enumerate(tokens)}
    sample = [b'{"', b"a", b"b", b"\\", b"n", b'":', b" ", b"-", b"12", b",", b" ", b'"', b"ab", b'":', b'"', b"x",
              b'"', b"}"]
    for t in sample:
        assert np.array_equal(ma.allowed_tokens(), mb.allowed_tokens())
        assert ma.accept(ids[t]) and mb.accept(ids[t])
    assert np.array_equal(ma.allowed_tokens(), mb.allowed_tokens())


def test_guard_keeps_the_fixed_up_input_where_the_output_is_not_cheaper():
    # the e-graph writes `ws` otherwise, at the same llama.cpp model cost as the fixed-up input:
    # not clearly faster, so the target writes the input with its fix-ups and says why
    from gramopt.passes import optimize
    from gramopt.targets import get
    g = parse('root ::= "{" ws "}"\nws ::= [ ]*', "gbnf")
    r = optimize(g, target="llama.cpp")
    assert r.grammar == get("llama.cpp").apply_fixups(g) and r.report.verified == "ok"
    guard = [p for p in r.report.passes if p.name == "guard"][0]
    assert guard.notes == ["llama.cpp-cost: costs more than the fixed-up input: llama.cpp cost model not lower 23→23",
                           "kept the input with only the fix-ups"]


def test_guard_keeps_a_cheaper_output():
    from gramopt.passes import optimize
    g = parse('root ::= "a" | "b"', "gbnf")
    r = optimize(g, target="llama.cpp")
    assert write(r.grammar, "gbnf").strip() == "root ::= [ab]"
    assert [p.notes for p in r.report.passes if p.name == "guard"] == [[
        "llama.cpp-cost: no llama.cpp static cost grows and its model cost is below the fixed-up input's "
        "(or it is the fixed-up input)"]]


def test_guard_judges_against_the_fixed_up_input_for_llamacpp_alone():
    # the guard's reference is the input with the fix-ups; a form another engine would pay
    # for (xgrammar: a star of a group, shared nullable rules) is llama.cpp's business only
    # through llama.cpp's own cost; a dearer form (the escape class unfactored) is refused
    from gramopt.targets import get
    from gramopt.targets.guard import GUARD
    target = get("llama.cpp")
    g = parse('root ::= "\\"" s\ns ::= "\\"" | [a-z] s | "\\\\" [nt] s', "gbnf")
    assert target.guard.worse(g, target.apply_fixups(g)) is None
    star = target.apply_fixups(parse('root ::= "\\"" ([a-z] | "\\\\" [nt])* "\\""', "gbnf"))
    assert check_equivalence(g, star).ok
    assert target.guard.worse(g, star) is None
    assert "xgrammar" in GUARD.worse(g, star)
    dearer = target.apply_fixups(parse('root ::= "\\"" s\ns ::= "\\"" | [a-z] s | "\\\\" "n" s | "\\\\" "t" s',
                                       "gbnf"))
    assert check_equivalence(g, dearer).ok
    assert target.guard.worse(g, dearer) == "costs more than the fixed-up input: llama.cpp cost model 37→51"


def test_a_named_llamacpp_model_prices_the_guard_as_it_does_the_extractor(tmp_path, monkeypatch):
    """``--cost-model`` names llama.cpp's model for the extractor and the guard alike: under
    one where κ costs 4, the star form (κ 20, one recursive reference) is dearer than the
    fixed-up input (κ 17, two) and is refused; under the shipped model it is kept."""
    import json

    from gramopt.costmodels.calibration import MODELS_DIR
    from gramopt.passes import optimize
    from gramopt.targets import get
    from gramopt.targets.guard import NoSlowerGuard
    target = get("llama.cpp")
    g = parse('root ::= "\\"" s\ns ::= "\\"" | [a-z] s | "\\\\" [nt] s', "gbnf")
    star = target.apply_fixups(parse('root ::= "\\"" ([a-z] | "\\\\" [nt])* "\\""', "gbnf"))
    with open(f"{MODELS_DIR}/llama.cpp.json", encoding="utf-8") as f:
        data = json.load(f)
    data["node_weights"]["kappa"] = 4.0
    (tmp_path / "llama.cpp.json").write_text(json.dumps(data), encoding="utf-8")
    assert target.guard.worse(g, star) is None
    assert target.guard.worse(g, star, {"llama.cpp": str(tmp_path)}) == \
        "costs more than the fixed-up input: llama.cpp cost model 88→90"
    seen = []
    real = NoSlowerGuard.worse
    monkeypatch.setattr(NoSlowerGuard, "worse", lambda self, *a: seen.append(a[2:]) or real(self, *a))
    optimize(parse('root ::= "a" | "b"', "gbnf"), target="llama.cpp", cost_model=str(tmp_path))
    assert seen and all(m == ({"llama.cpp": str(tmp_path)},) for m in seen)
