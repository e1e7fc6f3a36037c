"""Value by default on data outside the corpus: JSONSchemaBench schemas, every target, in each engine.

    python benchmarks/jsonschemabench_bench.py                       # the vendored sample, defaults
    python benchmarks/jsonschemabench_bench.py --limit 40 --every 3  # every 3rd schema, the first 40 of those
    python benchmarks/jsonschemabench_bench.py --runs portable@xgrammar,xgrammar@xgrammar,xgrammar@llama.cpp
    python benchmarks/jsonschemabench_bench.py --every 8 --only Github_hard---o21157,JME_78  # named ones
    python benchmarks/jsonschemabench_bench.py --engines xgrammar,llguidance,llama.cpp --out DIR
    python benchmarks/jsonschemabench_bench.py --summary DIR/rows.jsonl  # the tables again, from the rows

Data: ``benchmarks/data/jsonschemabench/`` (443 schemas the optimizer was not tuned on, each with
valid and invalid test instances; ``--data`` for another folder of JSONSchemaBench files).

A *run* is ``TARGET@FORM``: the schema converted by FORM's converter (``xgrammar``: xgrammar's
``Grammar.from_json_schema``, EBNF; ``llama.cpp``: llama-cpp-python's ``json_schema_to_gbnf``,
GBNF), written to a file, then ``gramopt optimize FILE -o OUT --target TARGET`` — the command a
user runs, one process per item, defaults otherwise (full verification). Per item: exit code,
wall and CPU seconds and peak RSS of that process (``os.wait4``), rules before and after.

Then, in this process, with the Qwen vocabulary (151,644 tokens), for every engine that loads the
input (the converter's own text; GBNF made loadable for xgrammar by gramopt's EBNF writer, EBNF
given to llguidance / llama.cpp as gramopt's GBNF when their readers refuse it): the input, a
second compile of the input (the A/A control) and the output are stepped *interleaved* along every
test instance (``json.dumps``, Qwen-tokenized, cut at ``--max-tokens``; invalid instances too, up
to the first token the input rejects; a schema with no instances gets seeded sentences derived
from the input grammar): at each step the three fill their masks in a rotating order,
each timed; the masks of input and output are compared bit for bit at every step, and so are the
A/A pair's. Timing is robust to a shared machine as in ``safe_target_bench.py``: per step the
minimum over ``--repeats`` runs (CPU time where a step takes >= 100 us). An output whose bytes are
the input's (identical) is not timed: the same text compiles to the same matcher.

Verdict of an instance in an engine: every token accepted and the stop token allowed at the end.
Before vs after must agree on every instance, valid and invalid; the instance's own label (valid /
invalid) is reported beside it (engines differ from the schema where the converter ignores a
keyword).

Ratio = input time / output time per schema (> 1: the output is faster); the A/A ratio is
input / second input. "Slower beyond noise" = ratio at p95 < 0.9 and below the A/A ratio's
distance from 1. Results: ``rows.jsonl`` (one row per item and engine, everything measured) and
``table.md`` under ``--out``; ``--summary`` recomputes the tables from a rows file.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "jsonschemabench")
RUNS = ("portable@xgrammar", "xgrammar@xgrammar", "xgrammar@llama.cpp", "llama.cpp@llama.cpp",
        "llguidance@llama.cpp", "portable@json", "xgrammar@json", "llama.cpp@json", "llguidance@json")
# ``TARGET@json``: the schema file itself is optimized (``gramopt optimize SCHEMA.json -o OUT``, the
# user's command: the target's converter, written in the target's schema dialect, GBNF for the
# default target), and its input in the engines is that converter's own text. The other forms
# optimize the converter's text file, which a target may write in another dialect (the default
# target keeps an EBNF file's lookaheads), so they do not measure what a schema's user gets.
JSON_FORM = "json"
LONG = 100e-6
SLOW = 0.9


# ---------------------------------------------------------------- phase 1: optimize (one process per item)


def convert(schema_path: str, form: str, work: str) -> tuple[str | None, str]:
    """(path of the converter's grammar, or None; why not) for ``form``'s converter."""
    from gramopt.engines.jsonschema import WRITES, convert_text, load_schemas
    from gramopt.grammar import GrammarError
    name = os.path.basename(schema_path)[:-5]
    out = os.path.join(work, f"{name}.{form}.{WRITES[form]}")
    if os.path.exists(out):
        return out, ""
    try:
        text, _ = convert_text(load_schemas(schema_path)[0], form)
    except GrammarError as e:
        return None, str(e).splitlines()[0][:160]
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out, ""


def convert_all(paths: list[str], forms: list[str], work: str) -> dict:
    """Every schema converted by every form's converter, in a child process (this process stays
    lean: a child's peak RSS as ``os.wait4`` reports it includes what it was forked from, and
    the converters import xgrammar and llama-cpp-python). {(path, form): (src or None, why)}."""
    todo = os.path.join(work, "convert.json")
    with open(todo, "w", encoding="utf-8") as f:
        json.dump({"paths": paths, "forms": forms, "work": work}, f)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--convert-only", todo], check=True)
    done = json.load(open(todo + ".out", encoding="utf-8"))
    return {(p, f): tuple(done[f"{f}\t{p}"]) for p in paths for f in forms}


def _convert_only(todo: str) -> int:
    job = json.load(open(todo, encoding="utf-8"))
    done = {f"{f}\t{p}": convert(p, f, job["work"]) for p in job["paths"] for f in job["forms"]}
    with open(todo + ".out", "w", encoding="utf-8") as f:
        json.dump(done, f)
    return 0


def optimize_batch(srcs: list[str], target: str, work: str, tag: str, timeout: int) -> dict:
    """``gramopt optimize FOLDER -o OUTFOLDER --target target -j 1``: the build-step way, one
    worker that loads the engines once. {src: row} with exit code (0 when the output was
    written, else the code the batch names for the item), the output's path; the batch's total
    wall / CPU seconds and peak RSS are in every row (``batch_*``)."""
    import shutil
    indir, outdir = os.path.join(work, "in", tag), os.path.join(work, "out", tag)
    shutil.rmtree(indir, ignore_errors=True)
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(indir)
    for s in srcs:
        shutil.copy(s, os.path.join(indir, os.path.basename(s)))
    cmd = [sys.executable, "-m", "gramopt", "optimize", indir, "-o", outdir, "--target", target, "-j", "1",
           "--cache", os.path.join(work, "cache", tag)]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        timer = threading.Timer(timeout * max(1, len(srcs)), p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        timer.cancel()
        wall = time.perf_counter() - t0
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").splitlines()
    total = {"batch_rc": os.waitstatus_to_exitcode(status), "batch_wall_s": wall,
             "batch_cpu_s": ru.ru_utime + ru.ru_stime, "batch_rss_mb": ru.ru_maxrss / 1024, "batch_items": len(srcs)}
    rows = {}
    for s in srcs:
        base = os.path.basename(s)
        stem = base.rsplit(".", 1)[0]
        outs = [os.path.join(outdir, x) for x in os.listdir(outdir) if x.rsplit(".", 1)[0] == stem] \
            if os.path.isdir(outdir) else []
        said = [x for x in lines if base in x]
        row = dict(total, stderr=said[-1][:200] if said else "")
        secs = re.findall(r"\(([0-9.]+) s\)\s*$", said[-1]) if said else []
        if secs:
            row["item_s"] = float(secs[-1])  # the batch's own per-item wall time
        if outs:
            row.update(rc=0, out=outs[0])
        else:
            codes = [int(c) for c in re.findall(r"exit (\d+)", " ".join(said))]
            row["rc"] = codes[-1] if codes else total["batch_rc"] or "missing"
        rows[s] = row
    return rows


def schema_form(target: str) -> str:
    """The converter whose text is a ``TARGET@json`` run's input: the target's schema converter."""
    from gramopt.targets import get
    return get(target).schema_converter


def optimize_item(src: str, target: str, work: str, timeout: int) -> dict:
    """``gramopt optimize src -o OUT --target target`` in its own process: exit code, wall / CPU
    seconds and peak RSS (MB) of that process (``os.wait4``), the output's path and the last
    line of its stderr; killed after ``timeout`` seconds. A schema (``.json``) is written in the
    target's schema dialect, as ``gramopt optimize SCHEMA.json -o OUT`` writes it."""
    if src.endswith(".json"):  # with no extension, `gramopt optimize` writes the converter's dialect
        from gramopt.engines.jsonschema import WRITES
        from gramopt.targets import get
        t = get(target)
        ext = t.schema_dialect or t.output_dialect or WRITES[t.schema_converter]
    else:
        ext = "ebnf" if target == "xgrammar" or src.endswith(".ebnf") else "gbnf"
    out = os.path.join(work, f"{os.path.basename(src)}.{target}.{ext}")
    cmd = [sys.executable, "-m", "gramopt", "optimize", src, "-o", out, "--target", target]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)  # this child's own rusage: its CPU time and peak RSS
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        err.seek(0)
        lines = [x for x in err.read().decode("utf-8", "replace").splitlines() if x.strip()]
    rc = p.returncode if wall < timeout else "timeout"
    return {"rc": rc, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "out": out if rc == 0 else None, "stderr": lines[-1][:200] if lines else ""}


# ---------------------------------------------------------------- phase 2: the engines


class Loader:
    """Each engine's compiled form of a grammar text (the text as the user would hand it over)."""

    def __init__(self, env):
        from gramopt.engines import ENGINES
        self.env = env
        self.adapters = {}
        for name in ("xgrammar", "llguidance", "llama.cpp"):
            eng = ENGINES[name](env)
            if eng.missing is None:
                eng.prepare()
                self.adapters[name] = eng

    def load(self, engine: str, text: str, dialect: str):
        """(compiled, how): the engine's compiled grammar; raises EngineError when refused."""
        from gramopt.engines import EngineError
        from gramopt.formats import parse, write
        from gramopt.grammar import GrammarError
        eng = self.adapters[engine]
        if engine == "xgrammar":
            from gramopt.engines.xgrammar import _compile_text
            how = "as written" if dialect == "ebnf" else f"{dialect.upper()} as gramopt's EBNF"
            try:  # a text gramopt cannot write as EBNF (Lark terminals) is one xgrammar is not given
                src = text if dialect == "ebnf" else write(parse(text, dialect), "ebnf")
                return _compile_text(src, self.env.vocab), how
            except Exception as e:  # noqa: BLE001
                raise EngineError(f"xgrammar: {str(e).splitlines()[0][:120]}") from None
        if engine == "llguidance":
            import llguidance as llg
            tries = [(text, "as written")] if dialect in ("gbnf", "lark") else []
            try:
                tries.append((write(parse(text, dialect), "gbnf"), "as gramopt's GBNF"))
            except GrammarError as e:
                if not tries:
                    raise EngineError(f"llguidance: {str(e).splitlines()[0][:120]}") from None
            why = ""
            for src, how in tries:
                kind = "lark" if how == "as written" and dialect == "lark" else "gbnf"
                try:  # llguidance's Python GBNF reader raises (a RecursionError on deep nesting)
                    m = llg.LLMatcher(eng._tok(), llg.grammar_from(kind, src), log_level=0)
                except Exception as e:  # noqa: BLE001 - an engine refusing the input is a result
                    why = str(e).strip().splitlines()[0][:120]
                    continue
                if not m.is_error():
                    return m, how
                why = m.get_error().strip().splitlines()[0][:120]
            raise EngineError(f"llguidance: {why}")
        from gramopt.engines.llamacpp import LlamaCppError, LlamaGrammar
        try:
            src = text if dialect == "gbnf" else write(parse(text, dialect), "gbnf")
        except GrammarError as e:
            raise EngineError(f"llama.cpp: {str(e).splitlines()[0][:120]}") from None
        try:
            return LlamaGrammar.compile(src, self.env.vocab), "as written" if dialect == "gbnf" else "as gramopt's GBNF"
        except LlamaCppError as e:
            raise EngineError(str(e)) from None

    def matcher(self, engine: str, compiled):
        eng = self.adapters[engine]
        return eng.matcher(compiled.deep_copy() if hasattr(compiled, "deep_copy") else compiled)


def same_mask(a: np.ndarray, b: np.ndarray, n: int) -> bool:
    """Whether two packed rows allow the same tokens among the first ``n`` (the bits past the
    vocabulary in the last word are the engine's padding: xgrammar sets them for some forms)."""
    full = n // 32
    if not np.array_equal(a[:full], b[:full]):
        return False
    rest = n - 32 * full
    if rest == 0:
        return True
    keep = np.int64((1 << rest) - 1)
    return (np.int64(a[full]) & keep) == (np.int64(b[full]) & keep)


def _fill(m, buf, cpu):
    c = time.thread_time_ns()
    m.fill(buf)
    cpu.append((time.thread_time_ns() - c) * 1e-9)


def input_was_wrong(recognizer, vocab, prefix: list[int], only: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether, after ``prefix`` (a prefix of a member of the language), the input's mask is the
    engine's error and the output's the language's (``only``: the tokens each side alone allows),
    by the judge's own criterion (``gramopt.judge.masks.input_mask_wrong``)."""
    from gramopt.judge.masks import input_mask_wrong
    tb = vocab.token_bytes
    state = recognizer.run(b"".join(tb[t] for t in prefix))
    return state is not None and input_mask_wrong(recognizer, state, tb, set(vocab.eos_ids), *only)


def step(loader, engine, forms, toks, eos, repeats):
    """Step the compiled ``forms`` (input, A/A copy, output) along ``toks``: per form the per-step
    seconds (minimum over the repeats), the first step where the output's / the copy's mask differs
    from the input's, and each form's verdict (every token accepted and, when ``eos`` is given,
    the stop token allowed at the end)."""
    n = len(loader.env.vocab)
    words = (n + 31) // 32
    best = None
    diff = {"output": None, "copy": None}
    verdict = None
    for run in range(repeats + 1):
        ms = [loader.matcher(engine, c) for c in forms]
        bufs = [np.zeros(words, np.int32) for _ in forms]
        cpus = [[] for _ in forms]
        for m in ms:  # an untimed first mask (lazy automata), then reset the records
            m.fill(bufs[0])
            m.fill_s.clear()
        alive = [True] * len(forms)
        steps = list(toks) + ([eos] if eos is not None else [])
        for i, t in enumerate(steps):
            order = [(k + i + run) % len(forms) for k in range(len(forms))]
            for k in order:
                if alive[k]:
                    _fill(ms[k], bufs[k], cpus[k])
            if run == 0:
                for key, k in (("output", 2), ("copy", 1)):
                    if diff[key] is None and alive[0] and alive[k] and not same_mask(bufs[0], bufs[k], n):
                        diff[key] = i
                        if key == "output":
                            from gramopt.judge.masks import one_side_only
                            diff["only"] = one_side_only(bufs[0], bufs[2], n)
            if t == eos and i == len(steps) - 1:
                for k in range(len(forms)):
                    alive[k] = alive[k] and bool((bufs[k][t // 32] >> (t % 32)) & 1)
                break
            for k in range(len(forms)):
                if alive[k]:
                    alive[k] = bool((bufs[k][t // 32] >> (t % 32)) & 1) and ms[k].accept(t)
            if not alive[0]:
                break
        if run == 0:
            verdict = list(alive)
            if repeats == 0:
                break
            continue
        k = min(len(m.fill_s) for m in ms)
        now = [(np.array(m.fill_s[:k]), np.array(c[:k])) for m, c in zip(ms, cpus)]
        best = now if best is None else [(np.minimum(b[0][:k], x[0][:k]), np.minimum(b[1][:k], x[1][:k]))
                                         for b, x in zip(best, now)]
    times = []
    if best is not None:
        long = np.max([w for w, _ in best], axis=0) >= LONG
        times = [np.where(long, c, w) for w, c in best]
    return times, diff, verdict


def instances(row: dict, tests: list, n: int) -> list[tuple[str, str]]:
    """(text, label) of up to ``n`` trajectories: the schema's test instances (valid first,
    ``json.dumps``), else — a schema without any — sentences derived from the input grammar
    (seeded: the same on every run), labelled ``derived``."""
    if tests:
        return [(json.dumps(d, ensure_ascii=False), "valid" if ok else "invalid")
                for d, ok in sorted(tests, key=lambda t: not t[1])[:n]]
    from gramopt.engines.llguidance import sentences
    from gramopt.formats import read
    out = []
    for b in sentences(read(row["src"]), n, seed=0):
        try:
            out.append((b.decode("utf-8"), "derived"))
        except UnicodeDecodeError:
            continue
    return out


def engine_key(engine: str, text_a: str, text_b: str, tests: list, settings: tuple) -> str:
    """What an engine row depends on: the engine and its version, both texts, the instances and
    the stepping settings (a rerun after a code change re-steps only the items whose output changed)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version
    pkg = {"xgrammar": "xgrammar", "llguidance": "llguidance", "llama.cpp": "llama-cpp-python"}[engine]
    try:
        v = version(pkg)
    except PackageNotFoundError:
        v = "?"
    blob = json.dumps([engine, v, text_a, text_b, tests, list(settings)], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def measure_engines(loader, item: dict, tests: list, engines, repeats: int, max_tokens: int,
                    slow_instances: int = 2, cache: dict | None = None, cache_fh=None) -> dict:
    """Per engine: loads (input / output), per-mask percentiles of input, copy and output,
    the first differing step, and the verdicts before / after. Where the input's first mask
    takes over 5 ms (llama.cpp's form in xgrammar), only ``slow_instances`` instances are
    stepped, with one timed repeat (the row says so: ``instances``)."""
    out = {}
    src, dst = item["src"], item["out"]
    dialect = {"ebnf": "ebnf", "gbnf": "gbnf", "lark": "lark"}
    text_a = open(src, encoding="utf-8").read()
    text_b = open(dst, encoding="utf-8").read()
    da, db = dialect[src.rsplit(".", 1)[1]], dialect[dst.rsplit(".", 1)[1]]
    identical = text_a == text_b
    eos = loader.env.vocab.eos_ids[0]
    for e in engines:
        if e not in loader.adapters:
            continue
        key = engine_key(e, text_a, text_b, tests, (repeats, max_tokens, slow_instances))
        if cache is not None and key in cache:
            out[e] = dict(cache[key], cached=True)
            continue
        out[e] = _measure_engine(loader, e, text_a, text_b, da, db, identical, eos, tests, repeats, max_tokens,
                                 slow_instances)
        if cache_fh is not None:
            cache_fh.write(json.dumps({"key": key, "row": out[e]}) + "\n")
            cache_fh.flush()
    return out


def _measure_engine(loader, e, text_a, text_b, da, db, identical, eos, tests, repeats, max_tokens, slow_instances):
    """One engine's row of ``measure_engines``."""
    from gramopt.engines import EngineError
    row = {}
    try:
        ca, how = loader.load(e, text_a, da)
        cc, _ = loader.load(e, text_a, da)
    except EngineError as ex:
        return {"input_loads": False, "why": str(ex)[:160]}
    try:
        cb, how_b = loader.load(e, text_b, db)
    except EngineError as ex:
        return {"input_loads": True, "output_loads": False, "why": str(ex)[:160]}
    row.update(input_loads=True, output_loads=True, how=how, how_out=how_b, identical=identical)
    probe = loader.matcher(e, ca)
    t = time.perf_counter()
    probe.fill(np.zeros((len(loader.env.vocab) + 31) // 32, np.int32))
    slow = time.perf_counter() - t > 5e-3
    e_tests, e_repeats = (tests[:slow_instances], min(repeats, 1)) if slow else (tests, repeats)
    ta, tc, tb = [], [], []
    first_diff, aa_diff, changed, corrected = None, None, [], []
    rec = []

    def recognizer():
        if not rec:
            from gramopt.formats import parse
            from gramopt.verify.reference import Recognizer
            rec.append(Recognizer(parse(text_a, da)))
        return rec[0]
    n_steps = 0
    for k, (text, valid) in enumerate(e_tests):
        toks = loader.env.tokenizer.encode(text)
        cut = len(toks) > max_tokens
        toks = toks[:max_tokens]
        times, diff, verdict = step(loader, e, [ca, cc, cb], toks, None if cut else eos,
                                    0 if identical else e_repeats)
        n_steps += len(toks)
        if diff["output"] is not None and input_was_wrong(
                recognizer(), loader.env.vocab, toks[:diff["output"]], diff["only"]):
            # at the first step where the masks differ, after a prefix of the language (any instance's,
            # an invalid one's too up to where it leaves the language: the recognizer decides), the
            # input's mask is the engine's error and the output's the language's (the reference
            # recognizer decides each token, as the judge does); the input may then die on that
            # token, so the instance's verdicts are not compared
            corrected.append(f"instance {k} ({valid}) step {diff['output']}")
        elif diff["output"] is not None and first_diff is None:
            first_diff = f"instance {k} step {diff['output']}"
        if diff["copy"] is not None and aa_diff is None:
            aa_diff = f"instance {k} step {diff['copy']}"
        if not cut and verdict[0] != verdict[2] and not (corrected and corrected[-1].startswith(f"instance {k} ")):
            changed.append(f"instance {k} ({valid}): "
                           f"{'accepted' if verdict[0] else 'rejected'} -> {'accepted' if verdict[2] else 'rejected'}")
        if times:
            ta += list(times[0])
            tc += list(times[1])
            tb += list(times[2])
    row.update(steps=n_steps, mask_diff=first_diff, aa_mask_diff=aa_diff, verdicts_changed=changed,
               input_errors_corrected=corrected,
               instances=len(e_tests), slow=slow)
    if ta:
        for name, xs in (("in", ta), ("aa", tc), ("out", tb)):
            a = np.array(xs) * 1e6
            row[name] = {q: float(np.percentile(a, p)) for q, p in (("p50", 50), ("p95", 95), ("p99", 99))}
            row[name]["max"] = float(a.max())
    return row


# ---------------------------------------------------------------- tables


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def pct(xs, q):
    return float(np.percentile(xs, q)) if xs else float("nan")


def summarize(rows: list[dict], engines) -> str:
    """The tables: per run, optimize outcome and cost; per run and engine, masks, verdicts, speed."""
    lines = []
    runs = sorted({r["run"] for r in rows}, key=lambda r: RUNS.index(r) if r in RUNS else 99)
    lines.append("## Optimize (one `gramopt optimize` process per schema, defaults: full verification)\n")
    lines.append("| run | schemas | converted | exit 0 | exit 2 | exit 3 | exit 70 / other | identical | "
                 "rules in→out (median) | wall s p50 / p95 / max | CPU s p50 | peak RSS MB p50 / p95 / max |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        rs = [r for r in rows if r["run"] == run]
        conv = [r for r in rs if r.get("rc") is not None]
        rc = [r["rc"] for r in conv]
        ok = [r for r in conv if r["rc"] == 0]
        ident = sum(1 for r in ok if r.get("identical"))
        if conv and "batch_cpu_s" in conv[0]:  # one batch process per run: its totals, per item
            b = conv[0]
            n = max(1, b["batch_items"])
            item = [r["item_s"] for r in conv if "item_s" in r]
            cost = (f"batch: per item {pct(item, 50):.2f} / {pct(item, 95):.2f} / {max(item, default=float('nan')):.2f} "
                    f"(total {b['batch_wall_s']:.0f}) | "
                    f"{b['batch_cpu_s'] / n:.2f} per item | {b['batch_rss_mb']:.0f} (the batch process) |")
        else:
            wall = [r["wall_s"] for r in conv]
            cpu = [r["cpu_s"] for r in conv]
            rss = [r["rss_mb"] for r in conv]
            cost = (f"{pct(wall, 50):.2f} / {pct(wall, 95):.2f} / {max(wall, default=float('nan')):.2f} | "
                    f"{pct(cpu, 50):.2f} | {pct(rss, 50):.0f} / {pct(rss, 95):.0f} / "
                    f"{max(rss, default=float('nan')):.0f} |")
        rin = [r["rules_in"] for r in ok if r.get("rules_in")]
        rout = [r["rules_out"] for r in ok if r.get("rules_out")]
        lines.append(f"| {run} | {len(rs)} | {len(conv)} | {rc.count(0)} | {rc.count(2)} | {rc.count(3)} | "
                     f"{sum(1 for x in rc if x not in (0, 2, 3))} | {ident} | "
                     f"{pct(rin, 50):.0f}→{pct(rout, 50):.0f} | {cost}")
    lines.append("\n## In the engines (Qwen vocabulary; ratio = input / output per-mask time, > 1 faster)\n")
    lines.append("| run | engine | outputs loaded / input loads | timed (changed) | mask diffs (A/A) "
                 "[input's engine errors corrected] | "
                 "verdict changes | p95 ratio geomean | p50 ratio geomean | p95 ratio geomean, inputs ≥ 1 ms at p95 (n) | "
                 "slower at p95 beyond noise | A/A p95 ratio range |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        for e in engines:
            es = [r["engines"][e] for r in rows if r["run"] == run and e in r.get("engines", {})]
            loads = [x for x in es if x.get("input_loads")]
            outs = [x for x in loads if x.get("output_loads")]
            timed = [x for x in outs if "in" in x]
            if not es:
                continue
            r95 = [x["in"]["p95"] / x["out"]["p95"] for x in timed]
            r50 = [x["in"]["p50"] / x["out"]["p50"] for x in timed]
            aa = [x["in"]["p95"] / x["aa"]["p95"] for x in timed]
            slow = [x for x, r, a in zip(timed, r95, aa) if r < SLOW and abs(1 - r) > abs(1 - a)]
            heavy = [r for x, r in zip(timed, r95) if x["in"]["p95"] >= 1000]
            diffs = sum(1 for x in outs if x.get("mask_diff"))
            fixed = sum(1 for x in outs if x.get("input_errors_corrected"))
            aad = sum(1 for x in outs if x.get("aa_mask_diff"))
            vch = sum(len(x.get("verdicts_changed", [])) for x in outs)
            lines.append(f"| {run} | {e} | {len(outs)} / {len(loads)} | {len(timed)} | {diffs} ({aad}) [{fixed}] | {vch} | "
                         f"{geomean(r95):.2f}× | {geomean(r50):.2f}× | {geomean(heavy):.2f}× ({len(heavy)}) | {len(slow)} | "
                         f"{min(aa, default=float('nan')):.2f}–{max(aa, default=float('nan')):.2f} |")
    worst = []
    for r in rows:
        for e, x in r.get("engines", {}).items():
            if "in" in x and x["in"]["p95"] / x["out"]["p95"] < SLOW:
                worst.append((x["in"]["p95"] / x["out"]["p95"], r["run"], e, r["schema"],
                              x["in"]["p95"] / x["aa"]["p95"]))
            if x.get("mask_diff") or x.get("verdicts_changed") or x.get("input_errors_corrected") or (
                    x.get("input_loads") and x.get("output_loads") is False):
                worst.append((0.0, r["run"], e, r["schema"], f"mask diff {x.get('mask_diff')}; "
                              f"input's engine errors corrected {x.get('input_errors_corrected')}; "
                              f"verdicts {x.get('verdicts_changed')}; loads {x.get('output_loads')} {x.get('why', '')}"))
    if worst:
        lines.append("\n### Rows to look at (ratio < 0.9 at p95, or a mask / verdict / load difference)\n")
        lines.append("| ratio p95 | run | engine | schema | A/A or finding |")
        lines.append("|---|---|---|---|---|")
        for w in sorted(worst, key=lambda w: w[0])[:40]:
            lines.append(f"| {w[0]:.2f} | {w[1]} | {w[2]} | {w[3]} | {w[4] if isinstance(w[4], str) else f'{w[4]:.2f}'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- driver


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--runs", default=",".join(RUNS[:3]), help=f"TARGET@FORM,… (known: {', '.join(RUNS)})")
    ap.add_argument("--engines", default="xgrammar,llguidance")
    ap.add_argument("--every", type=int, default=1, help="take every k-th schema (sorted by name)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated schema names (file names without .json) "
                                               "to keep of those --every takes")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--max-instances", type=int, default=8, help="test instances per schema (valid first)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per optimize process")
    ap.add_argument("--out", default="")
    ap.add_argument("--summary", default="", help="print the tables of an existing rows.jsonl")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the optimize rows already in OUT/optimize.jsonl (an interrupted run goes on)")
    ap.add_argument("--phase1", choices=("process", "batch"), default="process",
                    help="process: one `gramopt optimize FILE` per item (a CLI user; per-item time and memory); "
                         "batch: one `gramopt optimize FOLDER -j 1` per run (a build step; totals only)")
    ap.add_argument("--engine-cache", default="",
                    help="a JSONL of engine rows keyed by (engine, input, output texts, settings): an "
                         "item whose texts were measured before is not stepped again")
    ap.add_argument("--convert-only", default="", help=argparse.SUPPRESS)
    ap.add_argument("--slow-engine-instances", type=int, default=2,
                    help="instances per schema where the input's first mask takes over 5 ms (llama.cpp's "
                         "form in xgrammar: ~50 ms a mask)")
    a = ap.parse_args(argv)
    engines = [e for e in a.engines.split(",") if e]
    if a.convert_only:
        return _convert_only(a.convert_only)
    if a.summary:
        rows = [json.loads(x) for x in open(a.summary, encoding="utf-8")]
        print(summarize(rows, engines or ["xgrammar", "llguidance", "llama.cpp"]))
        return 0
    paths = sorted(glob.glob(os.path.join(a.data, "*.json")))[:: a.every]
    if a.only:
        keep = set(a.only.split(","))
        missing = keep - {os.path.basename(p)[:-5] for p in paths}
        if missing:
            print(f"{__file__}: error: --only names no schema that --every takes: {', '.join(sorted(missing))}",
                  file=sys.stderr)
            return 2
        paths = [p for p in paths if os.path.basename(p)[:-5] in keep]
    if a.limit:
        paths = paths[: a.limit]
    out = a.out or os.path.join(HERE, "results", f"jsonschemabench-{datetime.date.today().isoformat()}")
    os.makedirs(out, exist_ok=True)
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    runs = [r.split("@") for r in a.runs.split(",") if r]
    from gramopt.engines.jsonschema import load_schemas
    from gramopt.formats import read
    # phase 1 first, from this still small process: a child's peak RSS counts what it was forked from
    rows = []
    t0 = time.perf_counter()
    phase1 = os.path.join(out, "optimize.jsonl")
    done = {}
    if a.reuse and os.path.exists(phase1):
        done = {(r["schema"], r["run"]): r for r in map(json.loads, open(phase1, encoding="utf-8"))}
    fh1 = open(phase1, "a" if a.reuse else "w", encoding="utf-8")
    forms = {schema_form(t) if f == JSON_FORM else f for t, f in runs}
    conv = convert_all(paths, sorted(forms), work)
    todo = [(p, t, f) for p in paths for t, f in runs
            if (os.path.basename(p)[:-5], f"{t}@{f}") not in done]
    batched = {}
    if a.phase1 == "batch":
        for t, f in runs:
            if f == JSON_FORM:
                continue  # a schema run is optimized one process per schema, the user's command
            srcs = [conv[(p, f)][0] for p, tt, ff in todo if (tt, ff) == (t, f) and conv[(p, f)][0]]
            if srcs:
                print(f"optimize: batch {t}@{f}, {len(srcs)} items", file=sys.stderr, flush=True)
                batched.update({(s_, t): r for s_, r in optimize_batch(srcs, t, work, f"{t}@{f}", a.timeout).items()})
    for i, p in enumerate(paths):
        name = os.path.basename(p)[:-5]
        for target, form in runs:
            if (name, f"{target}@{form}") in done:
                rows.append(done[(name, f"{target}@{form}")])
                continue
            row = {"schema": name, "run": f"{target}@{form}", "rc": None, "path": p}
            # a schema run: the schema optimized, the target's converter's text as its input
            src, why = conv[(p, schema_form(target) if form == JSON_FORM else form)]
            if src is None:
                row["why"] = why
            else:
                res = (optimize_item(p, target, work, a.timeout) if form == JSON_FORM
                       else batched.get((src, target)) or optimize_item(src, target, work, a.timeout))
                row.update(src=src, **{k: v for k, v in res.items() if k != "out"})
                if res.get("out"):
                    row["out"] = res["out"]
                    try:
                        row["rules_in"] = len(read(src).rules)
                        row["rules_out"] = len(read(res["out"]).rules)
                    except Exception as e:  # noqa: BLE001
                        row["why"] = f"re-read: {e}"
                    row["identical"] = (open(src, encoding="utf-8").read()
                                        == open(res["out"], encoding="utf-8").read())
            rows.append(row)
            fh1.write(json.dumps(row) + "\n")
            fh1.flush()
        print(f"\roptimize: {i + 1}/{len(paths)} schemas, {time.perf_counter() - t0:.0f} s", end="",
              file=sys.stderr, flush=True)
    fh1.close()
    print(file=sys.stderr)
    from gramopt.engines import Env
    from gramopt.runtime import Vocab
    env = Env.create(Vocab.qwen())
    loader = Loader(env)
    print(f"engines: {', '.join(e for e in engines if e in loader.adapters)} (missing: "
          f"{', '.join(e for e in engines if e not in loader.adapters) or 'none'})", file=sys.stderr)
    cache, cache_fh = None, None
    if a.engine_cache:
        cache = {}
        if os.path.exists(a.engine_cache):
            for x in open(a.engine_cache, encoding="utf-8"):
                if x.strip():
                    r = json.loads(x)
                    cache[r["key"]] = r["row"]
        cache_fh = open(a.engine_cache, "a", encoding="utf-8")
    step_rows(loader, rows, lambda row: instances(row, load_schemas(row["path"])[0].tests, a.max_instances),
              engines, a, os.path.join(out, "rows.jsonl"), cache, cache_fh)
    return write_table(out, f"# JSONSchemaBench sample: value by default, in the engines\n\n`python "
                            f"benchmarks/jsonschemabench_bench.py {' '.join(argv if argv is not None else sys.argv[1:])}` "
                            f"on {datetime.date.today().isoformat()}: {len(paths)} schemas, runs {a.runs}, {a.repeats} "
                            f"timed repeats, ≤ {a.max_tokens} tokens and ≤ {a.max_instances} instances per schema",
                       summarize(rows, engines))


def step_rows(loader, rows: list[dict], tests_of, engines, a, path: str, cache=None, cache_fh=None) -> None:
    """Each row with an output measured in the engines (``measure_engines`` along
    ``tests_of(row)``, with ``a``'s repeats, tokens and slow-engine instances), every row
    written to ``path`` (JSONL) as it is done; progress on stderr."""
    t0 = time.perf_counter()
    with open(path, "w", encoding="utf-8") as fh:
        for i, row in enumerate(rows):
            if row.get("out"):
                row["engines"] = measure_engines(loader, row, tests_of(row), engines, a.repeats, a.max_tokens,
                                                 a.slow_engine_instances, cache, cache_fh)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"\rengines: {i + 1}/{len(rows)} items, {time.perf_counter() - t0:.0f} s", end="",
                  file=sys.stderr, flush=True)
    print(file=sys.stderr)


def write_table(out: str, head: str, table: str) -> int:
    """``head`` and ``table`` into ``out``/table.md, the table on stdout; 0."""
    with open(os.path.join(out, "table.md"), "w", encoding="utf-8") as f:
        f.write(head + "\n\n" + table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
