"""Does the judge's cost decision pick the faster form? Measured pairs from outside the corpus.

    python benchmarks/cost_prediction.py                         # the JSONSchemaBench sample, every 4th schema
    python benchmarks/cost_prediction.py --every 2 --targets portable,xgrammar --out DIR
    python benchmarks/cost_prediction.py --summary DIR/pairs.jsonl

A pair is (input, candidate): the input is a schema's grammar from xgrammar's converter (and,
with ``--forms``, llama.cpp's); the candidate is what a target's passes make of it *before the
judge* (the target record with its guard and engine check removed, ``verify=False``: the passes
are language-preserving; the benchmark asks only which form is faster). The prediction for
engine E is the target's guard's for E: the default target's decision model predicts a p95 ratio
of at most 1 in E (``PredictedGuard.predictions``); a shape-count guard restricted to E
(``NoSlowerGuard((E,), …)``) finds nothing against the candidate. The measurement
is E's per-mask p95 along the schema's test instances, input and candidate stepped interleaved
(``jsonschemabench_bench.step``), per step the minimum over ``--repeats`` runs.

Accuracy per engine: over the pairs whose measured p95 ratio is outside [1/1.2, 1.2] (the issue's
"differ by more than 20%"), the share where the predicted faster form is the measured one; the
pairs inside the band are counted apart (either choice is within 20%). An A/A column (input
against a second compile of itself) shows how often noise alone leaves the band.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jsonschemabench_bench import DATA, Loader, step  # noqa: E402

BAND = 1.2


def candidate(grammar, target_name: str):
    """The target's passes' output before any judge (no guard, no engine check), unverified."""
    from gramopt import passes, targets
    t = dataclasses.replace(targets.get(target_name), guard=None, checked_in=())
    return passes.optimize(grammar, target=t, verify=False).grammar


def predicted_not_slower(target_name: str, engine: str, original, cand) -> bool | None:
    """The target's guard's prediction for ``engine``: the default target's (``PredictedGuard``)
    predicted p95 ratio for that engine at most 1; a shape-count guard (llama.cpp's) restricted
    to ``engine``: True when it finds nothing against the candidate; a target without a guard
    (xgrammar: its extractor's cost model and its fix-ups decide) always writes its candidate,
    which is its prediction that the candidate is faster."""
    from gramopt import targets
    from gramopt.targets.guard import NoSlowerGuard, PredictedGuard
    g = targets.get(target_name).guard
    if g is None:
        return True
    if isinstance(g, PredictedGuard):
        if engine not in g.engines:
            return None
        return g.predictions(original, cand)[engine] <= 1.0
    mine = NoSlowerGuard((engine,), strict=getattr(g, "strict", False), baseline=getattr(g, "baseline", None),
                         clear=getattr(g, "clear", False))
    try:
        return mine.worse(original, cand) is None
    except KeyError:
        return None


def measure_pair(loader, engine, text_a, da, text_b, db, tests, repeats, max_tokens):
    from gramopt.engines import EngineError
    try:
        ca, _ = loader.load(engine, text_a, da)
        cc, _ = loader.load(engine, text_a, da)
        cb, _ = loader.load(engine, text_b, db)
    except EngineError as e:
        return {"error": str(e)[:120]}
    ta, tc, tb, diff = [], [], [], None
    eos = loader.env.vocab.eos_ids[0]
    for data, _valid in tests:
        toks = loader.env.tokenizer.encode(json.dumps(data, ensure_ascii=False))
        cut = len(toks) > max_tokens
        times, d, _ = step(loader, engine, [ca, cc, cb], toks[:max_tokens], None if cut else eos, repeats)
        diff = diff or d["output"]
        if times:
            ta += list(times[0])
            tc += list(times[1])
            tb += list(times[2])
    if not ta:
        return {"error": "no steps"}
    p = lambda xs: float(np.percentile(np.array(xs) * 1e6, 95))  # noqa: E731
    return {"in_p95": p(ta), "aa_p95": p(tc), "cand_p95": p(tb), "mask_diff": diff}


def summarize(pairs: list[dict]) -> str:
    lines = ["| target | engine | pairs timed | outside ±20% | predicted right | accuracy | inside band | "
             "A/A outside band |", "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(p["target"], e) for p in pairs for e in p.get("engines", {})})
    for target, e in keys:
        xs = [(p["engines"][e], p["prediction"].get(e)) for p in pairs if p["target"] == target and e in p["engines"]]
        xs = [(m, pr) for m, pr in xs if "in_p95" in m and pr is not None]
        out = [(m["in_p95"] / m["cand_p95"], pr) for m, pr in xs]
        decided = [(r, pr) for r, pr in out if r > BAND or r < 1 / BAND]
        right = sum(1 for r, pr in decided if (r > 1) == pr)
        aa = sum(1 for m, _ in xs if not (1 / BAND <= m["in_p95"] / m["aa_p95"] <= BAND))
        acc = f"{right / len(decided):.0%}" if decided else "–"
        lines.append(f"| {target} | {e} | {len(xs)} | {len(decided)} | {right} | {acc} | "
                     f"{len(out) - len(decided)} | {aa} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--targets", default="portable,xgrammar")
    ap.add_argument("--engines", default="xgrammar,llguidance")
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--max-instances", type=int, default=6)
    ap.add_argument("--out", default="")
    ap.add_argument("--summary", default="")
    a = ap.parse_args(argv)
    if a.summary:
        print(summarize([json.loads(x) for x in open(a.summary, encoding="utf-8")]))
        return 0
    from gramopt.engines import Env
    from gramopt.engines.jsonschema import convert, load_schemas
    from gramopt.formats import write
    from gramopt.grammar import GrammarError
    from gramopt.runtime import Vocab
    loader = Loader(Env.create(Vocab.qwen()))
    engines = [e for e in a.engines.split(",") if e in loader.adapters]
    paths = sorted(glob.glob(os.path.join(a.data, "*.json")))[:: a.every]
    if a.limit:
        paths = paths[: a.limit]
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cost-prediction")
    os.makedirs(out, exist_ok=True)
    pairs, t0 = [], time.perf_counter()
    with open(os.path.join(out, "pairs.jsonl"), "w", encoding="utf-8") as fh:
        for i, p in enumerate(paths):
            sch = load_schemas(p)[0]
            tests = sorted(sch.tests, key=lambda t: not t[1])[: a.max_instances]
            try:
                g = convert(sch, "xgrammar")
            except GrammarError:
                continue
            from gramopt.engines.jsonschema import convert_text
            text_a = convert_text(sch, "xgrammar")[0]
            for target in a.targets.split(","):
                try:
                    cand = candidate(g, target)
                except Exception as e:  # noqa: BLE001 - a row, not a crash
                    pairs.append({"schema": os.path.basename(p), "target": target, "error": repr(e)[:160]})
                    continue
                if cand == g:
                    continue
                text_b = write(cand, "ebnf")
                row = {"schema": os.path.basename(p), "target": target, "prediction": {}, "engines": {}}
                for e in engines:
                    row["prediction"][e] = predicted_not_slower(target, e, g, cand)
                    row["engines"][e] = measure_pair(loader, e, text_a, "ebnf", text_b, "ebnf", tests,
                                                     a.repeats, a.max_tokens)
                pairs.append(row)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
            print(f"\r{i + 1}/{len(paths)} schemas, {len(pairs)} pairs, {time.perf_counter() - t0:.0f} s",
                  end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    table = summarize([x for x in pairs if "engines" in x])
    with open(os.path.join(out, "table.md"), "w", encoding="utf-8") as f:
        f.write(f"# Cost prediction accuracy\n\n`python benchmarks/cost_prediction.py "
                f"{' '.join(argv if argv is not None else sys.argv[1:])}`: {len(paths)} schemas\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
