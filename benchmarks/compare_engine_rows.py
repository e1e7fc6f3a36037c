"""Two runs of ``jsonschemabench_bench.py`` side by side: the same inputs, two versions' outputs.

    python benchmarks/compare_engine_rows.py BEFORE/rows.jsonl AFTER/rows.jsonl

For every (run, schema) in both files and every engine: the input's p95 per mask, each
version's output p95, each version's ratio input / output (> 1: the output is faster), the
later run's A/A ratio (its noise), mask differences and verdict changes; then the p95 geomean
of each version per run and engine over the rows both timed. Each ratio comes from its own run
(the input timed beside its output), so machine load between the runs cancels out.
"""

from __future__ import annotations

import argparse
import json
import math


def load(path: str) -> dict:
    """(run, schema) -> row of a ``rows.jsonl``."""
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            out[(r["run"], r["schema"])] = r
    return out


def table(before: dict, after: dict, engines=("xgrammar", "llguidance", "llama.cpp")) -> str:
    lines = ["| run | schema | engine | input p95 ms | before: output p95 | after: output p95 | ratio before "
             "| ratio after | A/A after | mask diffs after | verdict changes after |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    both: dict = {}
    for k in sorted(after):
        if k not in before:
            continue
        for eng in engines:
            a = (before[k].get("engines") or {}).get(eng) or {}
            b = (after[k].get("engines") or {}).get(eng) or {}
            if not a.get("out") or not b.get("out"):
                lines.append(f"| {k[0]} | {k[1]} | {eng} | – | – | – | – | – | – | {b.get('mask_diff') or '–'} | |")
                continue
            ra, rb = a["in"]["p95"] / a["out"]["p95"], b["in"]["p95"] / b["out"]["p95"]
            aa = b["in"]["p95"] / b["aa"]["p95"]
            both.setdefault((k[0], eng), []).append((ra, rb))
            lines.append(f"| {k[0]} | {k[1]} | {eng} | {b['in']['p95'] / 1e3:.3f} | {a['out']['p95'] / 1e3:.3f} "
                         f"| {b['out']['p95'] / 1e3:.3f} | {ra:.2f} | {rb:.2f} | {aa:.2f} | {b.get('mask_diff') or 0} "
                         f"| {len(b.get('verdicts_changed') or [])} |")
    lines += ["", "| run | engine | n | p95 geomean before | p95 geomean after |", "|---|---|---:|---:|---:|"]
    for (run, eng), v in sorted(both.items()):
        g = [math.exp(sum(math.log(x[i]) for x in v) / len(v)) for i in (0, 1)]
        lines.append(f"| {run} | {eng} | {len(v)} | {g[0]:.2f}× | {g[1]:.2f}× |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    a = ap.parse_args(argv)
    print(table(load(a.before), load(a.after)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
