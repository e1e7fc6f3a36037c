"""The engine-verified judge on JSON schemas from outside the corpus: how many outputs it
catches in xgrammar, what it drops, and what it costs.

    python benchmarks/judge_check.py [--data DIR] [--limit 60] [--every 1] [--targets xgrammar,portable]
                                     [--steps N] [--out results.json]

Each of the first ``--limit`` schemas (sorted file names, every ``--every``-th) of a JSONSchemaBench sample
(``{"schema": …, "tests": […]}`` files; default ``benchmarks/data/jsonschemabench``) is
converted by xgrammar's converter (``gramopt.engines.jsonschema``) and optimized for each
target, the schema's valid test instances given as samples (``optimize(samples=…)``). Per run it records the engine-check report: whether the passes' output differed from
the input in an engine (caught), what was kept instead (a repair, the pipeline without a
pass, a fallback, the input), the mask comparisons spent and the judge's seconds (the
"engine-check" pass). Then, independently of the judge, the written output is compared with
the input in xgrammar (``gramopt.judge.masks.difference``, a larger budget and another seed
of walks): a difference there is a defect the judge let through. Prints one table per target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "benchmarks", "data", "jsonschemabench"))
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--every", type=int, default=1, help="take every k-th file of the sorted names (a spread "
                                                          "over the sets rather than the first set's)")
    ap.add_argument("--targets", default="xgrammar,portable")
    ap.add_argument("--steps", type=int, default=None, help="egraph.Limits.engine_check_steps (default: its default)")
    ap.add_argument("--audit-steps", type=int, default=2000, help="mask comparisons of the independent audit")
    ap.add_argument("--out", default=None, help="write the per-schema rows as JSON here")
    args = ap.parse_args(argv)

    from gramopt.egraph import Limits
    from gramopt.engines.jsonschema import convert, load_schemas
    from gramopt.grammar import GrammarError
    from gramopt.judge.masks import EngineCheck, NotChecked
    from gramopt.passes import optimize

    limits = Limits() if args.steps is None else Limits(engine_check_steps=args.steps)
    files = sorted(f for f in os.listdir(args.data) if f.endswith(".json"))[::args.every][:args.limit]
    rows = []
    for target in args.targets.split(","):
        for f in files:
            row = {"schema": f, "target": target}
            try:
                schema = load_schemas(os.path.join(args.data, f))[0]
                g = convert(schema, "xgrammar")
            except GrammarError as e:
                row["status"] = f"converter refuses: {str(e).splitlines()[0][:80]}"
                rows.append(row)
                continue
            valid = tuple(json.dumps(d, ensure_ascii=False).encode("utf-8") for d, ok in schema.tests if ok)
            t = time.perf_counter()
            try:
                r = optimize(g, target=target, limits=limits, samples=valid)
            except Exception as e:  # noqa: BLE001 - a benchmark records and goes on
                row["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
                rows.append(row)
                continue
            row["optimize_s"] = time.perf_counter() - t
            check = [p for p in r.report.passes if p.name == "engine-check"]
            row["changed"] = r.grammar != g
            row["judged"] = bool(check)
            if check:
                notes = check[0].notes
                row["judge_s"] = check[0].seconds
                row["notes"] = notes
                row["caught"] = len(notes) > 1 and "differs" in " ".join(notes[1:]) or "refuses" in " ".join(notes[1:])
                row["kept"] = notes[-1] if row["caught"] else "the passes' output"
            try:
                audit = EngineCheck("xgrammar", g, args.audit_steps, seed=1, samples=valid).difference(r.grammar)
                row["audit"] = audit.describe() if audit is not None else None
            except NotChecked as e:
                row["audit"] = f"not checked: {e}"
            row["status"] = "ok"
            rows.append(row)
            print(f"{target:<9} {f:<45} {'caught' if row.get('caught') else '':<7} "
                  f"{row.get('judge_s', 0):6.2f}s  {row.get('kept', '')[:60]}  "
                  f"{'AUDIT: ' + row['audit'][:80] if row.get('audit') and not row['audit'].startswith('not') else ''}",
                  flush=True)
    report(rows, files)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0


def report(rows: list[dict], files: list[str]) -> None:
    print(f"\n{len(files)} schemas ({files[0]} … {files[-1]}), xgrammar's converter, "
          f"{len([r for r in rows if r.get('status') == 'ok'])} optimizer runs")
    head = (f"{'target':<9} {'ok':>4} {'changed':>8} {'judged':>7} {'caught':>7} {'repaired':>9} {'pass':>5} "
            f"{'fallbk':>7} {'input':>6} {'audit≠':>7} {'judge p50':>10} {'p95':>7} {'max':>7}")
    print(head)
    print("-" * len(head))
    for target in dict.fromkeys(r["target"] for r in rows):
        rs = [r for r in rows if r["target"] == target and r.get("status") == "ok"]
        caught = [r for r in rs if r.get("caught")]
        kept = [r["kept"] for r in caught]
        times = sorted(r["judge_s"] for r in rs if "judge_s" in r)

        def q(p):
            return times[min(len(times) - 1, int(p * len(times)))] if times else float("nan")
        audit = sum(1 for r in rs if r.get("audit") and not r["audit"].startswith("not checked"))
        print(f"{target:<9} {len(rs):>4} {sum(r['changed'] for r in rs):>8} {sum(r['judged'] for r in rs):>7} "
              f"{len(caught):>7} {sum('restored' in k for k in kept):>9} {sum('without pass' in k for k in kept):>5} "
              f"{sum('e-graph' in k or 'fix-ups' in k for k in kept):>7} {sum(k == 'kept the input' for k in kept):>6} "
              f"{audit:>7} {statistics.median(times) if times else float('nan'):>9.3f}s {q(0.95):>6.3f}s "
              f"{(times[-1] if times else float('nan')):>6.3f}s")
    errors = [r for r in rows if r.get("status") not in ("ok", None) and not r["status"].startswith("converter")]
    for r in errors:
        print(f"  {r['target']} {r['schema']}: {r['status']}")


if __name__ == "__main__":
    raise SystemExit(main())
