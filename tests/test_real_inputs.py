"""Real inputs from other projects, every target: the output loads where the target promises.

Done when (issue 24): every real file gives, for every target, exit 0 with an output that loads
in the engines the target names (``Target.checked_in``: the default target promises xgrammar,
llguidance and llama.cpp) — each one that loads the input, and all of them for a schema — or a
one-line refusal (exit 2); never exit 70. The Lark grammars of
``tests/data/real`` have their own module (``test_lark_real.py``); here: whisper.cpp's GBNF
grammars (``tests/data/real/SOURCES.md``) and JSONSchemaBench schemas through each converter
(``benchmarks/data/jsonschemabench``, the vendored sample). Each output is loaded *as written*
by the engine's own reader: xgrammar's EBNF reader, llguidance's GBNF reader, llama.cpp's GBNF
parser. The default suite runs the default target on whisper.cpp's grammars and one schema;
the whole matrix is ``-m slow`` (every default-target output is judged in three engines).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from cache_env import cache_at

from gramopt import targets
from gramopt.cli import main

HERE = os.path.dirname(__file__)
REAL = os.path.join(HERE, "data", "real")
SCHEMAS = os.path.join(HERE, "..", "benchmarks", "data", "jsonschemabench")
GBNF = sorted(f for f in os.listdir(REAL) if f.endswith(".gbnf"))
# the held-out samples of hand-written grammars (their SOURCES.md), never tuned on: GBNF and
# xgrammar EBNF (their Lark files run in test_lark_real.py)
HELDOUT = [os.path.join(HERE, "..", "benchmarks", "data", name) for name in ("grammars-heldout", "grammars-heldout2")]
HELDOUT_FILES = sorted(os.path.join(h, d, f) for h in HELDOUT for d in ("gbnf", "ebnf")
                       for f in os.listdir(os.path.join(h, d)) if f.endswith("." + d))
SCHEMA_FILES = ["JsonSchemaStore---strings.json", "MCPspec---JSONRPCError.json", "Github_easy---o6250.json",
                "WashingtonPost---wp_26_Normalized.json", "Glaiveai2K---calculate_area_52e36dd9.json",
                "BFCL_java_37.json"]
FAST = {("whisper.cpp__colors.gbnf", targets.DEFAULT), ("whisper.cpp__chess.gbnf", targets.DEFAULT),
        ("whisper.cpp__assistant.gbnf", targets.DEFAULT)}
HAVE = {"xgrammar": importlib.util.find_spec("xgrammar") is not None,
        "llguidance": importlib.util.find_spec("llguidance") is not None,
        "llama.cpp": importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None}


def _xgrammar_error(text: str) -> str | None:
    import xgrammar as xgr
    try:
        xgr.Grammar.from_ebnf(text)
    except Exception as e:  # noqa: BLE001 - xgrammar raises RuntimeError / ValueError
        return str(e).strip().splitlines()[0]
    return None


def _llguidance_error(text: str) -> str | None:
    import llguidance as llg
    from gramopt.engines.llguidance import _byte_tokenizer
    try:
        m = llg.LLMatcher(_byte_tokenizer(), llg.grammar_from("gbnf", text), log_level=0)
    except Exception as e:  # noqa: BLE001
        return str(e).strip().splitlines()[0]
    return None if not m.is_error() else m.get_error().strip().splitlines()[0]


_BYTES = []


def _llamacpp_error(text: str, tmp_path_factory) -> str | None:
    from gramopt.engines.llamacpp import LlamaCppError, LlamaGrammar
    if not _BYTES:  # the GGUF in a temporary cache, the process's own left as it was (cache_at)
        from gramopt.runtime.vocab import Vocab
        _BYTES.append((Vocab.from_bytes([bytes([b]) for b in range(256)], eos=256),
                       tmp_path_factory.mktemp("llama-cache")))
    vocab, folder = _BYTES[0]
    try:
        with cache_at(folder):
            LlamaGrammar.compile(text, vocab)
    except LlamaCppError as e:
        return str(e)
    return None


LOADERS = {"xgrammar": lambda text, f: _xgrammar_error(text), "llguidance": lambda text, f: _llguidance_error(text),
           "llama.cpp": _llamacpp_error}


def _cases():
    files = [os.path.join(REAL, f) for f in GBNF] + [os.path.join(SCHEMAS, f) for f in SCHEMA_FILES] + HELDOUT_FILES
    for path in files:
        for target in targets.NAMES:
            fast = (os.path.basename(path), target) in FAST
            yield pytest.param(path, target, id=f"{os.path.basename(path)}-{target}",
                               marks=[] if fast else [pytest.mark.slow])


@pytest.mark.parametrize("path, target", list(_cases()))
def test_real_input_loads_in_every_engine_its_target_names(path, target, tmp_path, capsys, tmp_path_factory):
    out = tmp_path / "out"
    code = main(["optimize", path, "-o", str(out), "--target", target])
    err = capsys.readouterr().err
    if code == 2:  # a refusal: one line that says where
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "error" in lines[0], err
        return
    assert code == 0, err
    text = out.read_text()
    source = None if path.endswith(".json") else open(path, encoding="utf-8").read()
    for engine in targets.get(target).checked_in:
        if HAVE[engine]:
            why = LOADERS[engine](text, tmp_path_factory)
            # a grammar written for one engine (xgrammar's lookaheads, rule names llama.cpp
            # refuses, indirect left recursion) need not load where its input never did
            refused_input = source is not None and LOADERS[engine](source, tmp_path_factory) is not None
            assert why is None or refused_input, (engine, why)


def test_whisper_assistant_keeps_the_prompt_entry_point(tmp_path, capsys):
    """whisper.cpp's ``command`` example starts from ``prompt`` as well as ``root``: ``--keep``
    keeps it (without it, the default target removes it as unreachable)."""
    src = os.path.join(REAL, "whisper.cpp__assistant.gbnf")
    kept, dropped = tmp_path / "kept.gbnf", tmp_path / "dropped.gbnf"
    assert main(["optimize", src, "-o", str(kept), "--keep", "prompt"]) == 0
    assert main(["optimize", src, "-o", str(dropped)]) == 0
    capsys.readouterr()
    assert "prompt ::=" in kept.read_text()
    assert "prompt ::=" not in dropped.read_text()


LLAMACPP_STRING = ('root ::= "{" space "\\"name\\"" space ":" space string "}" space\n'
                   'char ::= [^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})\n'
                   'string ::= "\\"" char* "\\"" space\n'
                   'space ::= | " " | "\\n" [ \\t]{0,20}\n')


@pytest.mark.parametrize("case", ["schema", "llama.cpp-form"])
def test_default_output_has_no_star_xgrammar_lowers(case, tmp_path, capsys):
    """The default target's output of a schema (GBNF: written with no lookahead) and of llama.cpp's
    converter's string (``char*``) has no repetition xgrammar 0.2.8 lowers into helper rules
    ending inside nearly every token (``engine_shapes.lowered_stars``: ~60 ms a mask inside a
    string, against 0.1 ms flat; ``benchmarks/results/flat-stars-2026-11-28``). Session 16's main
    wrote ``basic-string-sub ::= ([^…] | "\\\\" basic-escape)* "\\""`` for BFCL_java_37."""
    from gramopt.costmodels.engine_shapes import lowered_stars
    from gramopt.formats import read
    if case == "schema":
        src = os.path.join(SCHEMAS, "BFCL_java_37.json")
    else:
        src = tmp_path / "in.gbnf"
        src.write_text(LLAMACPP_STRING)
        assert lowered_stars(read(str(src))) == ["string"]  # the input has one
    out = tmp_path / "out.gbnf"
    # (the input's own xgrammar masks take ~30-60 ms each inside its strings: a smaller check)
    steps = [] if case == "schema" else ["--max-engine-check-steps", "120"]
    assert main(["optimize", str(src), "-o", str(out), *steps]) == 0, capsys.readouterr().err
    assert lowered_stars(read(str(out))) == [], out.read_text()
