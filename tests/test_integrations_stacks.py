"""The stacks' one-line integrations: vLLM's entry point, SGLang's backend registration
(against fake SGLang modules: SGLang does not install here), llguidance's grammar calls and
matcher factory, llama-cpp-python's LlamaGrammar (skipped without llama_cpp), and a
transformers ``generate`` recipe with a tiny model built in code."""

from __future__ import annotations

import importlib
import sys
import tomllib
import types
from pathlib import Path

import pytest

xgr = pytest.importorskip("xgrammar")

from corpus_location import CORPUS  # noqa: E402
from gramopt.integrations import request  # noqa: E402
from gramopt.integrations import xgrammar as drop  # noqa: E402
from gramopt.integrations.request import RequestOptimizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EOS = 256
LIST_GBNF = 'root ::= "[" ws num ("," ws num)* "]"\nnum ::= [0-9] digits\ndigits ::= | [0-9] digits\nws ::= | " "\n'


@pytest.fixture(autouse=True)
def restore():
    yield
    drop.uninstall()
    request.reset_shared()


@pytest.fixture(scope="module")
def info():
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
    return xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=[EOS],
                             add_prefix_space=False)


# ---------------------------------------------------------------- vLLM


def test_the_vllm_entry_point_is_declared_and_installs_the_drop_in(monkeypatch):
    with open(ROOT / "pyproject.toml", "rb") as f:
        eps = tomllib.load(f)["project"]["entry-points"]["vllm.general_plugins"]
    module, _, func = eps["gramopt"].partition(":")
    register = getattr(importlib.import_module(module), func)
    monkeypatch.setenv("GRAMOPT_DISABLE", "1")
    register()
    assert xgr.GrammarCompiler is drop.PLAIN
    monkeypatch.delenv("GRAMOPT_DISABLE")
    register()
    assert xgr.GrammarCompiler is drop.GrammarCompiler


def test_vllm_style_lazy_access_builds_the_drop_in(info):
    """vLLM's backend reads ``xgr.GrammarCompiler`` from the module when it builds itself."""
    from gramopt.integrations.vllm import register
    register()
    lazy = importlib.import_module("xgrammar")
    compiler = lazy.GrammarCompiler(info, max_threads=8, cache_enabled=True, cache_limit_bytes=64 << 20)
    assert isinstance(compiler, drop.GrammarCompiler)
    cg = compiler.compile_json_schema('{"type": "object"}', any_whitespace=False)
    m = xgr.GrammarMatcher(cg)
    assert all(m.accept_token(b) for b in b"{}") and m.accept_token(EOS)


# ---------------------------------------------------------------- SGLang (fake modules)


@pytest.fixture
def fake_sglang(monkeypatch):
    """SGLang's registry and xgrammar backend as its modules define them: the backend binds
    ``GrammarCompiler`` at import (``from xgrammar import GrammarCompiler``)."""
    base = types.ModuleType("sglang.srt.constrained.base_grammar_backend")
    base.GRAMMAR_BACKEND_REGISTRY = {}
    base.register_grammar_backend = lambda name, init: base.GRAMMAR_BACKEND_REGISTRY.__setitem__(name, init)
    backend = types.ModuleType("sglang.srt.constrained.xgrammar_backend")
    backend.GrammarCompiler = drop.PLAIN

    class XGrammarGrammarBackend:
        def __init__(self, tokenizer, vocab_size, model_eos_token_ids=None, any_whitespace=True):
            self.grammar_compiler = backend.GrammarCompiler(tokenizer_info=tokenizer)
            self.vocab_size, self.eos, self.any_whitespace = vocab_size, model_eos_token_ids, any_whitespace

        def dispatch_ebnf(self, key_string):
            return self.grammar_compiler.compile_grammar(key_string)

    backend.XGrammarGrammarBackend = XGrammarGrammarBackend
    constrained = types.ModuleType("sglang.srt.constrained")
    constrained.base_grammar_backend, constrained.xgrammar_backend = base, backend
    srt = types.ModuleType("sglang.srt")
    srt.constrained = constrained
    sglang = types.ModuleType("sglang")
    sglang.srt = srt
    for m in (sglang, srt, constrained, base, backend):
        monkeypatch.setitem(sys.modules, m.__name__, m)
    return base, backend


def test_sglang_register_adds_a_gramopt_backend_built_on_the_drop_in(fake_sglang, info):
    base, backend = fake_sglang
    from gramopt.integrations import sglang
    sglang.register()
    init = base.GRAMMAR_BACKEND_REGISTRY["gramopt"]
    args = types.SimpleNamespace(grammar_backend="gramopt", constrained_json_disable_any_whitespace=True)
    made = init(args, info, 257, {EOS})  # SGLang's call: (server_args, tokenizer, vocab_size, eos_token_ids)
    assert backend.GrammarCompiler is drop.GrammarCompiler
    assert isinstance(made.grammar_compiler, drop.GrammarCompiler)
    assert (made.vocab_size, made.eos, made.any_whitespace) == (257, [EOS], False)
    cg = made.dispatch_ebnf(LIST_GBNF)  # llama.cpp GBNF, refused by plain xgrammar
    m = xgr.GrammarMatcher(cg)
    assert all(m.accept_token(b) for b in b"[1, 22]") and m.accept_token(EOS)


def test_sglang_backend_options_follow_the_installed_signature():
    from gramopt.integrations.sglang import _backend_options

    class Old:
        def __init__(self, tokenizer, vocab_size):
            pass

    assert _backend_options(Old, types.SimpleNamespace(), {1}) == {}


# ---------------------------------------------------------------- llguidance


@pytest.fixture(scope="module")
def byte_tokenizer():
    llg = pytest.importorskip("llguidance")
    return llg.LLTokenizer.from_tiktoken(encoder={bytes([b]): b for b in range(256)}, special_tokens={"<eos>": EOS},
                                         pattern=r"[\s\S]", eos_token=EOS, n_vocab=EOS + 1)


def llg_masks(m, data: bytes) -> list[bytes]:
    import llguidance.numpy as llnp
    buf = llnp.allocate_token_bitmask(1, EOS + 1)
    out = []
    for b in data:
        llnp.fill_next_token_bitmask(m, buf, 0)
        out.append(buf.tobytes())
        if not m.consume_token(b):
            return out + [b"rejected"]
    llnp.fill_next_token_bitmask(m, buf, 0)
    return out + [buf.tobytes()]


def test_llguidance_grammar_from_optimizes_and_keeps_the_masks(byte_tokenizer):
    import llguidance as llg

    from gramopt.integrations import llguidance as gllg
    path = CORPUS / "gbnf" / "llamacpp__c.gbnf"
    if not path.exists():
        pytest.skip("no corpus")
    text = path.read_text(encoding="utf-8")
    sample = (CORPUS / "gbnf" / "llamacpp__c.sample1.txt").read_bytes()
    opt = RequestOptimizer(target="llguidance", budget_s=None)
    ours = gllg.grammar_from("gbnf", text, optimizer=opt)
    plain = llg.grammar_from("gbnf", text)
    assert ours != plain and opt.stats()["optimized"] == 1
    expected = llg_masks(llg.LLMatcher(byte_tokenizer, plain, log_level=0), sample)
    assert b"rejected" not in expected
    assert llg_masks(gllg.matcher(byte_tokenizer, "gbnf", text, log_level=0, optimizer=opt), sample) == expected
    assert opt.stats()["cached"] == 1


def test_llguidance_passes_schemas_and_regexes_through():
    import llguidance as llg

    from gramopt.integrations import llguidance as gllg
    schema = '{"type": "object", "properties": {"a": {"type": "integer"}}}'
    assert gllg.grammar_from_json_schema(schema) == llg.LLMatcher.grammar_from_json_schema(schema)
    assert gllg.grammar_from("json_schema", schema) == llg.grammar_from("json_schema", schema)
    assert gllg.grammar_from_regex("[a-z]+") == llg.LLMatcher.grammar_from_regex("[a-z]+")


def test_llguidance_lark_and_refusals(byte_tokenizer, monkeypatch):
    import llguidance as llg

    from gramopt.integrations import llguidance as gllg
    lark = 'start: item ("," item)*\nitem: WORD\nWORD: /[a-z]+/\n'
    opt = RequestOptimizer(target="llguidance", budget_s=None)
    assert gllg.grammar_from_lark(lark, optimizer=opt) == llg.LLMatcher.grammar_from_lark(lark)  # kept as is
    # an optimized grammar llguidance refuses gives way to the input's
    monkeypatch.setattr(gllg, "optimized_text", lambda text, dialect, optimizer=None: "start: %%%")
    assert gllg.grammar_from("gbnf", LIST_GBNF, optimizer=opt) == llg.grammar_from("gbnf", LIST_GBNF)
    assert opt.stats()["engine_refused"] == 1


# ---------------------------------------------------------------- llama-cpp-python


def test_llamacpp_text_is_optimized_for_llamacpp():
    from gramopt.formats import parse
    from gramopt.integrations.llamacpp import optimized_gbnf
    from gramopt.verify import check_equivalence
    opt = RequestOptimizer(target="llama.cpp", budget_s=None)
    out = optimized_gbnf(LIST_GBNF, opt)
    assert out != LIST_GBNF and opt.stats()["optimized"] == 1
    assert check_equivalence(parse(LIST_GBNF, "gbnf"), parse(out, "gbnf")).ok
    assert optimized_gbnf('root ::= "a" | | (', opt) == 'root ::= "a" | | ('  # unreadable: served as given


def test_llamacpp_grammar_objects():
    llama_cpp = pytest.importorskip("llama_cpp")
    from gramopt.integrations.llamacpp import LlamaGrammar
    g = LlamaGrammar.from_string(LIST_GBNF, verbose=False, optimizer=RequestOptimizer(target="llama.cpp"))
    assert isinstance(g, llama_cpp.LlamaGrammar)
    j = LlamaGrammar.from_json_schema('{"type": "array", "items": {"type": "integer"}}', verbose=False)
    assert isinstance(j, llama_cpp.LlamaGrammar)


# ---------------------------------------------------------------- transformers


def test_transformers_generate_recipe(info):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from gramopt.integrations.transformers import logits_processor
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=EOS + 1, n_positions=64, n_embd=32, n_layer=1, n_head=2,
                                     bos_token_id=EOS, eos_token_id=EOS)
    model = transformers.GPT2LMHeadModel(config).eval()
    prompt = torch.tensor([[EOS]])
    free = model.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=EOS)[0, 1:].tolist()
    out = model.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=EOS,
                         logits_processor=[logits_processor(info, grammar=LIST_GBNF)])[0, 1:].tolist()
    plain = xgr.GrammarCompiler(info).compile_grammar(drop.loadable_text(LIST_GBNF))

    def accepts(tokens):
        m = xgr.GrammarMatcher(plain)
        return all(m.accept_token(t) for t in tokens)

    assert out[0] == ord("[") and accepts(out)
    assert not accepts(free)  # unconstrained, the random model leaves the grammar
    with pytest.raises(ValueError):
        logits_processor(info)
