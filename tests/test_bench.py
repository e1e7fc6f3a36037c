"""gramopt bench: one tiny grammar on a 256-token byte vocabulary, the report, the cache,
the suites and the obfuscator's re-export. No timing asserts: figures are only checked
for shape (every step timed, speedups present and positive)."""

from __future__ import annotations

import json
import os

import pytest

from gramopt.bench.engines import Env, Tokenizer, percentiles
from gramopt.bench.run import Options, load_vocab, measure_case, run_cases, token_symbols
from gramopt.bench.suites import Case, default_cases, obfuscated_case, pathological_cases, sampled_texts
from gramopt.formats import parse
from gramopt.verify import check_equivalence

TINY = Case("tiny-g4", "pathological", 'root ::= s\ns ::= s s | "a" | "b"\n', "gbnf", ("abbab",))
OPTS = Options(engines=("gramopt",), vocab="bytes", reps=1, verify=True)


# TINY's optimize for the earley target (its language check of S ::= S S on the reference
# recognizer: ~2-4 CPU s) is what every measure of it starts with, and the bench is the point
# here, not the optimize: the in-process measures of TINY share one (conftest's
# optimize_once_per_module; the folder test's spawned workers optimize for themselves).
ONE_OPTIMIZE = pytest.mark.usefixtures("optimize_once_per_module")


@pytest.fixture(scope="module")
def byte_env():
    return Env.create(load_vocab("bytes"))


@ONE_OPTIMIZE
def test_measure_tiny_case(byte_env):
    r = measure_case(TINY, OPTS, byte_env)
    e = r["engines"]["gramopt"]
    assert e["status"] == "ok" and e["target"] == "earley"
    steps = len("abbab") + 1  # every byte, then the stop token
    assert r["trajectory"] == {"tokens": steps, "complete": [True]}
    assert len(e["original"]["per_step_us"]) == len(e["optimized"]["per_step_us"]) == steps
    assert e["speedup_p50"] > 0 and e["original"]["p50"] <= e["original"]["p95"] <= e["original"]["max"]
    # the optimized form is the verified repetition; exact SAC per token of S → S S is 0,1,3,6,10
    assert r["targets"]["earley"]["verified"] == "ok"
    assert r["forms"]["original"]["sac_per_token"] == [0, 1, 3, 6, 10, 0]
    assert r["forms"]["original"]["static"]["concat"] == 1
    assert r["forms"]["opt:earley"]["static"]["concat"] == 0
    counters = r["forms"]["original"]["counters"]
    assert len(counters["items"]) == steps and sum(counters["completions"]) > 0


@ONE_OPTIMIZE
def test_report_and_cache(tmp_path):
    out = str(tmp_path / "rep")
    first = run_cases([TINY], OPTS, out, progress=False)
    assert not first[0]["cached"]
    again = run_cases([TINY], OPTS, out, progress=False)
    assert again[0]["cached"]
    assert again[0]["engines"] == json.loads(json.dumps(first[0]["engines"]))
    other = Case("tiny-g4", "pathological", TINY.text + "t ::= \"c\"\n", "gbnf", TINY.samples)
    assert not run_cases([other], OPTS, out, progress=False)[0]["cached"]  # the key is the content

    from gramopt.bench.report import summary_rows, write_report
    paths = write_report(first, out, meta={"vocab": "bytes"})
    text = open(paths["report"], encoding="utf-8").read()
    assert "## Summary" in text and "| gramopt | 1 |" in text and "| tiny-g4 | pathological | 6 |" in text
    assert os.path.exists(os.path.join(out, "speedup.png"))
    assert os.path.exists(os.path.join(out, "steps", "tiny-g4.png"))
    assert summary_rows(first)[0]["measured"] == 1


def test_cli_bench_one_file(tmp_path, capsys):
    from gramopt.cli import main
    g = tmp_path / "ab.gbnf"
    g.write_text('root ::= ("a" | "b")+\n')
    (tmp_path / "ab.sample1.txt").write_text("abab")
    out = tmp_path / "rep"
    code = main(["bench", str(g), "--engines", "gramopt", "--vocab", "bytes", "--out", str(out),
                 "--reps", "1", "-j", "1", "-q", "--no-plots"])
    assert code == 0
    assert "| ab | corpus | 5 |" in (out / "report.md").read_text()
    assert "| gramopt | 1 |" in capsys.readouterr().out


def test_cli_bench_unknown_engine(tmp_path, capsys):
    from gramopt.cli import main
    assert main(["bench", "--engines", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown engine" in err and "Traceback" not in err


@ONE_OPTIMIZE
def test_missing_engine_is_skipped_with_a_note(byte_env):
    r = measure_case(TINY, Options(engines=("gramopt", "llguidance"), vocab="bytes", reps=1), byte_env)
    assert r["engines"]["llguidance"]["status"] == "skipped" and r["engines"]["llguidance"]["note"]


def test_rejected_sample_is_an_engine_error(byte_env):
    bad = Case("bad", "test", 'root ::= "a"+\n', "gbnf", ("ab",))
    r = measure_case(bad, OPTS, byte_env)
    assert r["engines"]["gramopt"]["status"] == "error"
    assert "rejects" in r["engines"]["gramopt"]["note"]


def test_tokenizer_greedy_and_truncation():
    v = load_vocab("bytes")
    tok = Tokenizer(v)
    assert tok.encode("ab") == [97, 98]
    ids, complete = tok.trajectory("abc", 2)
    assert ids == [97, 98] and not complete  # a cut text gets no stop token
    assert token_symbols(v, list("é".encode())) == [0, 1]  # the code point completes in the 2nd byte


def test_percentiles():
    p = percentiles([1e-6, 2e-6, 3e-6])
    assert p["p50"] == pytest.approx(2.0) and p["max"] == pytest.approx(3.0)


def test_pathological_samples_are_in_their_languages():
    from gramopt.verify.reference import Recognizer
    from gramopt.verify.symbols import compile_grammar
    cases = pathological_cases()
    assert {c.name for c in cases} == {"g4", "ab-star", "infix", "anbn", "until"}
    for c in cases:
        rec = Recognizer(compile_grammar(c.grammar()))
        assert rec.accepts(c.samples[0].encode()), c.name


def test_obfuscated_case_keeps_the_language():
    base = Case("expr", "corpus", 'root ::= t ("+" t)*\nt ::= [0-9]+ | "(" root ")"\n', "gbnf", ("1+(2)",))
    obf = obfuscated_case(base)
    assert obf.suite == "obfuscated" and obf.samples == base.samples
    assert len(obf.grammar().rules) > len(base.grammar().rules)
    assert check_equivalence(base.grammar(), obf.grammar()).ok


def test_sampled_texts_are_sentences():
    g = parse('root ::= "x" [0-9]{1,3} ("," [0-9])*\n', "gbnf")
    from gramopt.verify.reference import Recognizer
    from gramopt.verify.symbols import compile_grammar
    rec = Recognizer(compile_grammar(g))
    texts = sampled_texts(g, n=3)
    assert len(texts) == 3 and all(rec.accepts(t.encode()) for t in texts)


def test_default_selection_without_corpus(tmp_path):
    sel = default_cases(corpus=str(tmp_path))  # an empty folder: every corpus file is missing
    assert {c.suite for c in sel.cases} == {"pathological"} and sel.notes


def test_folder_in_worker_processes(tmp_path):
    """A folder runs in spawned workers; results come back in file order and cache."""
    from gramopt.bench.suites import path_cases
    (tmp_path / "a.gbnf").write_text('root ::= ("a" | "b")+\n')
    (tmp_path / "a.sample1.txt").write_text("abab")
    (tmp_path / "b.gbnf").write_text('root ::= s\ns ::= s s | "a"\n')  # no sample: one is derived
    sel = path_cases([str(tmp_path)])
    assert [c.name for c in sel.cases] == ["a", "b"] and sel.cases[1].note
    out = str(tmp_path / "rep")
    res = run_cases(sel.cases, OPTS, out, jobs=2, progress=False)
    assert [r["name"] for r in res] == ["a", "b"]
    assert all(r["engines"]["gramopt"]["status"] == "ok" for r in res)
    assert all(r["cached"] for r in run_cases(sel.cases, OPTS, out, jobs=2, progress=False))


def test_optimize_cost_batch_mode_runs_an_item(tmp_path):
    """benchmarks/optimize_cost.py's batch worker (the build-step figures of issues 24 and 26)
    runs one item to a row: its worker died at the first item for two sessions, unseen, when
    ``cli.batch._worker_init`` began to take the client's pid."""
    import subprocess
    import sys
    root = os.path.join(os.path.dirname(__file__), "..")
    run = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "optimize_cost.py"), "--data", "corpus",
                          "--limit", "1", "--modes", "batch", "--targets", "generic", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["target"], r["code"]) for r in rows] == [("batch", "generic", 0)]
