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


# ---------------------------------------------------------------- the engine interface and lockstep


@needs_llama
def test_adapter_in_the_engine_registry(small_vocab):
    from gramopt.engines import ENGINES, Env, EngineError, oracle_engines
    from gramopt.formats import parse
    eng = ENGINES["llama.cpp"](Env.create(small_vocab))
    assert eng.missing is None and eng.target == "llama.cpp" and eng.dialect == "gbnf"
    ids = {b: i for i, b in enumerate(small_vocab.token_bytes) if b}
    h, seconds = eng.timed_compile(parse('root ::= "ab" "c"?', "gbnf"))
    times = eng.run(h, [ids[b"ab"], ids[b"c"], small_vocab.eos_ids[0]])
    assert len(times) == 3 and seconds > 0
    with pytest.raises(EngineError, match="rejects token"):
        eng.run(h, [ids[b"ac"]])
    with pytest.raises(EngineError, match="left recursion"):
        eng.compile(parse('root ::= root "a" | "b"', "gbnf"))
    assert [o.name for o in oracle_engines(("llama.cpp",))] == ["llama.cpp"]


LOCK = 'root ::= "{" sp "\\"" [a-c]+ "\\"" sp ":" sp [0-9]+ sp "}"\nsp ::= "" | " " | " " " "\n'


@needs_llama
def test_lockstep_llamacpp_is_compared_with_itself_on_the_original(small_vocab):
    torch = pytest.importorskip("torch")  # noqa: F841
    from gramopt.engines import oracle_engines
    from gramopt.formats import parse
    from gramopt.passes import optimize
    from gramopt.decoding.model import TinyCausalLM
    from gramopt.decoding.lockstep import lockstep
    g = parse(LOCK, "gbnf")
    opt = optimize(g, target="llama.cpp").grammar
    assert opt != g
    res = lockstep(TinyCausalLM(len(small_vocab), seed=0), g, opt, small_vocab, steps=12, seed=0, batch=2,
                   engines=oracle_engines(("llama.cpp",)))
    assert res.ok and not res.mismatches
    assert res.compared["llama.cpp:optimized"] >= 12 and res.compared.get("llama.cpp:original", 0) == 0
    # a planted change: llama.cpp's masks of the two grammars differ at the first step
    bad = parse(LOCK.replace('"{"', '[{[]', 1), "gbnf")
    res = lockstep(TinyCausalLM(len(small_vocab), seed=0), g, bad, small_vocab, steps=4, seed=0, batch=1,
                   engines=oracle_engines(("llama.cpp",)))
    lm = [m for m in res.mismatches if m.engine == "llama.cpp:optimized"]
    assert lm and lm[0].step == 0 and lm[0].reference == "llama.cpp:original"
    assert lm[0].only_engine == (ord("["),) and not lm[0].engine_error and not res.ok


@needs_llama
def test_verify_decode_with_llamacpp_as_third_oracle(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from gramopt.cli import main
    from gramopt.formats import parse, write
    from gramopt.passes import optimize
    monkeypatch.setenv("GRAMOPT_CACHE", str(tmp_path / "cache"))
    orig, opt = tmp_path / "g.gbnf", tmp_path / "g.opt.gbnf"
    orig.write_text(LOCK, encoding="utf-8")
    opt.write_text(write(optimize(parse(LOCK, "gbnf"), target="llama.cpp").grammar, "gbnf"), encoding="utf-8")
    assert main(["verify", str(orig), str(opt), "--decode", "--llama-cpp", "--vocab", "bytes", "--steps", "8",
                 "--seeds", "1", "--no-measure", "-q"]) == 0
    out = capsys.readouterr().out
    assert "llama.cpp:optimized" in out and "result: 0 mismatches" in out


@needs_llama
def test_calibration_fits_llamacpp_and_the_target_extracts_under_it(tmp_path, monkeypatch):
    """bench rows of llama.cpp → a fitted model in GRAMOPT_MODELS → ``--target llama.cpp``
    reads that engine's node weights."""
    from gramopt import passes
    from gramopt.bench.run import Options, measure_case
    from gramopt.bench.suites import Case
    from gramopt.costmodels import calibration as cal
    from gramopt.targets import TARGETS
    monkeypatch.setenv("GRAMOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GRAMOPT_MODELS", str(tmp_path / "models"))
    monkeypatch.setattr(cal, "_WEIGHTS_CACHE", {})
    case = Case("g4", "pathological", 'root ::= s\ns ::= "a" s | "b" s | ""\n', "gbnf", ("abab", "ba"))
    res = measure_case(case, Options(engines=("llama.cpp",), vocab="bytes", reps=1, sac=False))
    assert res["engines"]["llama.cpp"]["status"] == "ok", res["engines"]["llama.cpp"]
    rows = cal.rows_from_results([res], "llama.cpp")
    assert rows and all(r["t_us"] > 0 for r in rows)
    path = cal.save_model(cal.fit(rows, "llama.cpp"), str(tmp_path / "models"))
    assert path.endswith("llama.cpp.json")
    cal._WEIGHTS_CACHE.clear()  # the bench's own optimize cached "no model yet"
    # a fitted model is used only when named (never read from $GRAMOPT_MODELS)
    named = str(tmp_path / "models")
    weights, source = passes.cost_model_used(TARGETS["llama.cpp"], None)
    assert weights == cal.load_model("llama.cpp").node_weights and source.startswith("shipped llama.cpp.json")
    assert passes.cost_model_used(TARGETS["llama.cpp"], named)[0] == cal.load_model("llama.cpp", named).node_weights
