"""Measured forms for the cost model: per schema and converter form, the input and every form the
default target may write, timed per mask in xgrammar, llguidance and llama.cpp.

    python benchmarks/cost_pairs.py --limit 60 --out benchmarks/results/cost-model-2026-11-27
    python benchmarks/cost_pairs.py --split eval ...      # only the schemas of one half
    python benchmarks/cost_pairs.py --summary DIR/forms.jsonl

Data: ``benchmarks/data/jsonschemabench/`` (JSONSchemaBench schemas, not the repository's corpus),
every ``--every``-th schema by name. Each schema is converted by xgrammar's and by llama.cpp's
converter (``--converters``); per converted input the forms are (deduplicated by their text):

    input        the converter's text, as written
    candidate    the default target's passes' output before the judge (no guard, no engine check)
    (``--schema-form``: the forms of ``gramopt optimize SCHEMA.json``, read and written in the
    default target's schema dialect, GBNF, whose lookaheads are dropped before optimizing)
    reduced      the input without its redundancy, with the fix-ups (``Target.reduce``: the default
                 target's first fallback and its guard's reference)
    fixups       the input with only the default target's fix-ups (its last fallback)
    no-egraph    the passes without the e-graph passes (the fallback tried first)
    xgrammar     the xgrammar target's passes' output before its judge

Timing, per engine, as ``jsonschemabench_bench.step``: all forms and a second compile of the input
(the A/A control) are stepped interleaved along the schema's valid instances (Qwen-tokenized, cut
at ``--max-tokens``), per step the minimum over ``--repeats`` runs; per form the per-mask p50 and
p95 in µs. llama.cpp (and any engine whose first mask takes over 5 ms, or any form's mask over 50 ms
along the first 24 tokens of the first instance) gets ``--slow-instances`` instances cut at ``--slow-tokens`` with one repeat. Each row keeps every form's text, so features
can be recomputed without measuring again (``gramopt.costmodels.predict.features``).

Split: ``split_of(schema)`` — the first byte of sha256(schema file name) even: "fit", odd:
"eval". ``benchmarks/fit_cost_model.py`` fits on one half and reports accuracy on the other.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jsonschemabench_bench import DATA, Loader, step  # noqa: E402

ENGINES = ("xgrammar", "llguidance", "llama.cpp")
SLOW_FIRST_MASK = 5e-3
PROBE_TOKENS = 24
SLOW_MASK = 0.05  # a mask slower than this along the probe: the slow engine's instances


def split_of(schema_name: str) -> str:
    """"fit" or "eval": the parity of the first byte of sha256 of the schema's file name."""
    return "fit" if hashlib.sha256(schema_name.encode()).digest()[0] % 2 == 0 else "eval"


def _before_judge(grammar, target_name: str):
    """The target's passes' output before any judge (no guard, no engine check), unverified."""
    from gramopt import passes, targets
    t = dataclasses.replace(targets.get(target_name), guard=None, checked_in=())
    return passes.optimize(grammar, target=t, verify=False).grammar


def candidate_forms(grammar) -> dict:
    """{label: Grammar} of the forms the default target may write for ``grammar`` (module
    docstring), the input excluded; a form whose construction fails is left out."""
    from gramopt import passes, targets
    from gramopt.targets.guard import without_redundancy
    t = targets.get(targets.DEFAULT)
    makers = {
        "candidate": lambda g: _before_judge(g, targets.DEFAULT),
        "reduced": without_redundancy,
        "fixups": lambda g: t.apply_fixups(g),
        "no-egraph": lambda g: passes.PassManager([n for n in passes.DEFAULT_PASSES if n not in passes.EGRAPH_PASSES],
                                                  t).run(g)[0],
        "xgrammar": lambda g: _before_judge(g, "xgrammar"),
    }
    out = {}
    for label, make in makers.items():
        try:
            out[label] = make(grammar)
        except Exception as e:  # noqa: BLE001 - a form that cannot be made is a row's note, not a crash
            print(f"\n{label}: {type(e).__name__}: {str(e)[:100]}", file=sys.stderr)
    return out


def _slow_masks(loader, engine, forms, tests) -> bool:
    """Whether a mask of any form takes over ``SLOW_MASK`` along the first ``PROBE_TOKENS``
    tokens of the first instance: a form whose masks grow along the text (xgrammar on llama.cpp's
    form of Github_medium---o6213: the first mask fast, a run stepping it for 20 minutes)."""
    if not tests:
        return False
    toks = loader.env.tokenizer.encode(tests[0])[:PROBE_TOKENS]
    times, _, _ = step(loader, engine, forms, toks, None, 0)
    return any(t > SLOW_MASK for xs in times for t in xs)


def time_forms(loader, engine, texts: list[tuple[str, str]], tests, repeats, max_tokens, slow_instances,
               slow_tokens) -> dict:
    """Per form (and the A/A copy, last): per-mask p50/p95 in µs along ``tests`` (texts the
    input accepts); forms that do not load are reported as errors. ``texts``: (text, dialect),
    the input first."""
    from gramopt.engines import EngineError
    compiled, errors = [], {}
    for i, (text, dialect) in enumerate(texts):
        try:
            compiled.append(loader.load(engine, text, dialect)[0])
        except EngineError as e:
            if i == 0:
                return {"error": str(e)[:160]}
            compiled.append(None)
            errors[i] = str(e)[:160]
    try:
        copy = loader.load(engine, *texts[0])[0]
    except EngineError as e:
        return {"error": str(e)[:160]}
    idx = [i for i, c in enumerate(compiled) if c is not None]
    forms = [compiled[0], copy] + [compiled[i] for i in idx[1:]]
    if len(forms) < 3:
        return {"error": "no other form loads", "forms": {i: {"error": why} for i, why in errors.items()}}
    probe = loader.matcher(engine, compiled[0])
    t = time.perf_counter()
    probe.fill(np.zeros((len(loader.env.vocab) + 31) // 32, np.int32))
    slow = (engine == "llama.cpp" or time.perf_counter() - t > SLOW_FIRST_MASK
            or _slow_masks(loader, engine, forms, tests))
    if slow:
        tests, repeats, max_tokens = tests[:slow_instances], min(repeats, 1), slow_tokens
    eos = loader.env.vocab.eos_ids[0]
    per = [[] for _ in forms]
    diffs = {}
    for text in tests:
        toks = loader.env.tokenizer.encode(text)
        cut = len(toks) > max_tokens
        toks = toks[:max_tokens]
        for k in range(2, len(forms) if not slow else 2):  # mask equality per candidate (fast engines)
            _, d, _ = step(loader, engine, [forms[0], forms[0], forms[k]], toks, None if cut else eos, 0)
            if d["output"] is not None:
                diffs.setdefault(idx[k - 1], d["output"])
        times, _, _ = step(loader, engine, forms, toks, None if cut else eos, repeats)
        for k, xs in enumerate(times):
            per[k] += list(xs)
    if not per[0]:
        return {"error": "no steps"}

    def pcts(xs):
        a = np.array(xs) * 1e6
        return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95))}
    out = {"steps": len(per[0]), "slow": slow, "aa": pcts(per[1]), "forms": {}}
    for k, i in enumerate(idx):
        out["forms"][i] = pcts(per[0 if k == 0 else k + 1])
    for i, why in errors.items():
        out["forms"][i] = {"error": why}
    for i, d in diffs.items():
        out["forms"][i]["mask_diff_step"] = d
    return out


def measure_schema(loader, path: str, converter: str, engines, a) -> dict | None:
    from gramopt.engines.jsonschema import convert_text, load_schemas
    from gramopt.formats import parse, write
    from gramopt.grammar import GrammarError
    sch = load_schemas(path)[0]
    tests = [json.dumps(d, ensure_ascii=False) for d, ok in sch.tests if ok][: a.max_instances]
    name = os.path.basename(path)
    row = {"schema": name, "split": split_of(name), "converter": converter + ("+schema" if a.schema_form else "")}
    if not tests:
        return None
    try:
        text, dialect = convert_text(sch, converter)
        g = parse(text, dialect)
    except GrammarError as e:
        row["error"] = str(e).splitlines()[0][:160]
        return row
    written = "ebnf" if dialect == "ebnf" else "gbnf"
    if a.schema_form:  # as ``gramopt optimize SCHEMA.json`` reads it: without what its dialect cannot carry
        from gramopt import targets
        from gramopt.formats import unwritable
        written = targets.get(targets.DEFAULT).schema_dialect or written
        g = unwritable(g, written)[0]
    forms = [("input", text, dialect)]
    seen = {text}
    for label, cand in candidate_forms(g).items():
        if cand == g and not a.schema_form:
            continue
        d = written
        t = write(cand, d)
        if t in seen:
            continue
        seen.add(t)
        forms.append((label, t, d))
    return _timed(loader, row, forms, tests, engines, a)


def measure_grammar(loader, path: str, engines, a) -> dict | None:
    """The row of a grammar file with samples beside it (``real_grammars.samples``), as
    ``measure_schema``'s: the input as written and the forms the default target may write, in
    the input's dialect; ``converter`` is the dialect."""
    from real_grammars import samples
    from gramopt.formats import parse, write
    from gramopt.grammar import GrammarError
    name = os.path.basename(path)
    dialect = name.rsplit(".", 1)[1]
    tests = [t for t, _ in samples(path)][: a.max_instances]
    row = {"schema": name, "split": "eval", "converter": dialect}
    if not tests:
        return None
    text = open(path, encoding="utf-8").read()
    try:
        g = parse(text, dialect)
    except GrammarError as e:
        row["error"] = str(e).splitlines()[0][:160]
        return row
    forms, seen = [("input", text, dialect)], {text}
    for label, cand in candidate_forms(g).items():
        try:
            t = write(cand, dialect)
        except GrammarError:
            continue
        if cand != g and t not in seen:
            seen.add(t)
            forms.append((label, t, dialect))
    return _timed(loader, row, forms, tests, engines, a)


def _timed(loader, row: dict, forms: list, tests: list[str], engines, a) -> dict:
    """``row`` with its forms' texts and each engine's ``time_forms`` of them."""
    row["forms"] = [{"label": lb, "dialect": d, "text": t} for lb, t, d in forms]
    row["engines"] = {}
    if len(forms) == 1:
        return row
    for e in engines:
        r = time_forms(loader, e, [(t, d) for _, t, d in forms], tests, a.repeats, a.max_tokens,
                       a.slow_instances, a.slow_tokens)
        if "forms" in r:
            r["forms"] = {forms[i][0]: v for i, v in r["forms"].items()}
        row["engines"][e] = r
    return row


def summarize(rows: list[dict]) -> str:
    """Per engine: forms timed, pairs (input, other form) outside ±20%, A/A outside ±20%."""
    lines = ["| engine | rows | forms timed | pairs vs input | outside ±20% | A/A p95 outside ±10% |",
             "|---|---|---|---|---|---|"]
    for e in ENGINES:
        rs = [r["engines"][e] for r in rows if e in r.get("engines", {}) and "forms" in r["engines"][e]]
        forms = sum(len([v for v in r["forms"].values() if "p95" in v]) for r in rs)
        pairs = [(r["forms"]["input"]["p95"], v["p95"]) for r in rs for k, v in r["forms"].items()
                 if k != "input" and "p95" in v and "p95" in r["forms"].get("input", {})]
        out = sum(1 for a, b in pairs if not 1 / 1.2 <= a / b <= 1.2)
        aa = sum(1 for r in rs if not 1 / 1.1 <= r["forms"]["input"]["p95"] / r["aa"]["p95"] <= 1.1)
        lines.append(f"| {e} | {len(rs)} | {forms} | {len(pairs)} | {out} | {aa} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--converters", default="xgrammar,llama.cpp")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--offset", type=int, default=0, help="start at the k-th schema before taking every --every")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--split", default="", help="only the schemas of this half (fit / eval)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--max-instances", type=int, default=2)
    ap.add_argument("--slow-instances", type=int, default=1)
    ap.add_argument("--slow-tokens", type=int, default=40)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "cost-model-2026-11-27"))
    ap.add_argument("--summary", default="")
    ap.add_argument("--grammars", default="",
                    help="a folder of grammar files with their samples (gbnf/, ebnf/, lark/: "
                         "benchmarks/data/grammars-heldout) in place of the schemas; rows are split 'eval'")
    ap.add_argument("--schema-form", action="store_true",
                    help="the forms of the schema as `gramopt optimize SCHEMA.json` reads and writes it (the default "
                         "target's schema dialect, GBNF: lookaheads dropped before optimizing); the input stays the "
                         "converter's own text. Rows are labelled CONVERTER+schema")
    a = ap.parse_args(argv)
    if a.summary:
        print(summarize([json.loads(x) for x in open(a.summary, encoding="utf-8")]))
        return 0
    from gramopt.engines import Env
    from gramopt.runtime import Vocab
    loader = Loader(Env.create(Vocab.qwen()))
    engines = [e for e in a.engines.split(",") if e in loader.adapters]
    if a.grammars:  # (name, converter) -> its measure: a grammar file's converter is its dialect
        from real_grammars import grammar_files
        jobs = [((os.path.basename(p), p.rsplit(".", 1)[1]), lambda p=p: measure_grammar(loader, p, engines, a))
                for p in grammar_files(a.grammars, [])]
    else:
        paths = sorted(glob.glob(os.path.join(a.data, "*.json")))[a.offset:: a.every]
        if a.split:
            paths = [p for p in paths if split_of(os.path.basename(p)) == a.split]
        if a.limit:
            paths = paths[: a.limit]
        jobs = [((os.path.basename(p), conv + ("+schema" if a.schema_form else "")),
                 lambda p=p, conv=conv: measure_schema(loader, p, conv, engines, a))
                for p in paths for conv in a.converters.split(",")]
    os.makedirs(a.out, exist_ok=True)
    dst = os.path.join(a.out, "forms.jsonl")
    done = set()
    if os.path.exists(dst):
        done = {(r["schema"], r["converter"]) for r in map(json.loads, open(dst, encoding="utf-8"))}
    t0 = time.perf_counter()
    with open(dst, "a", encoding="utf-8") as fh:
        for i, (key, measure) in enumerate(jobs):
            row = None if key in done else measure()
            if row is not None:
                fh.write(json.dumps(row) + "\n")
                fh.flush()
            print(f"\r{i + 1}/{len(jobs)} items, {time.perf_counter() - t0:.0f} s", end="", file=sys.stderr,
                  flush=True)
    print(file=sys.stderr)
    print(summarize([json.loads(x) for x in open(dst, encoding="utf-8")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
