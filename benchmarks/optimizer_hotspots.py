"""Where the optimizer's time goes, per corpus item and stage, for one or more targets.

    python benchmarks/optimizer_hotspots.py [--corpus DIR] [--targets xgrammar,generic]
                                            [--jobs N] [--top 15] [--only SUBSTR] [--fast]
                                            [--trees BEFORE:AFTER] [--json OUT.json]

Every item a batch run (``gramopt optimize CORPUS -o OUT --target T``) optimizes — grammar
files, ``.json`` schemas through the target's converter — runs the batch's own code path
(``gramopt.cli.batch._optimize``, ``optimizer.run_job``: optimize with verification, then write) in a fresh worker
process, timing each stage ``gramopt.stage`` names ("pass cleanup", "pass saturate#2" folded
into "pass saturate", "engine check", "verification"); "other" is the rest (reading,
converting, writing, κ counts between passes).

``--trees A:B`` times the same items under two checkouts side by side (each worker imports
gramopt from the tree named, interleaved item by item, so load affects both alike) and
prints before / after / ratio per item, and checks the output texts are equal.

Prints the ``--top`` items by total time with their stage split, then the totals per stage.
Figures, not asserts.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _time_item(tree: str, item: dict, options: dict) -> dict:
    """In a worker: the item's stage times (seconds) and output text under ``tree``."""
    sys.path.insert(0, tree)
    import contextlib
    import gramopt.passes as passes
    from gramopt import stage as stage_mod
    try:
        from gramopt.cli import batch
    except ImportError:  # a tree from before the batch driver moved under cli/
        from gramopt import batch
    assert Path(passes.__file__).resolve().is_relative_to(Path(tree).resolve()), passes.__file__
    spent: dict[str, float] = collections.defaultdict(float)
    inner = stage_mod.stage

    @contextlib.contextmanager
    def timed(name: str):
        t = time.perf_counter()
        with inner(name):
            try:
                yield
            finally:
                spent[name.split("#")[0]] += time.perf_counter() - t

    passes.stage = timed
    t0 = time.perf_counter()
    try:
        text, _ = batch._optimize(batch.Item(**item), options)
        error = None
    except Exception as e:  # a row, not a crash
        text, error = None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    total = time.perf_counter() - t0
    spent = dict(spent)
    spent["other"] = total - sum(spent.values())
    return {"name": item["name"], "total": total, "stages": spent, "text": text, "error": error}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / "corpus"))
    ap.add_argument("--targets", default="xgrammar,generic")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--only", default=None, help="items whose name contains one of these (comma-separated)")
    ap.add_argument("--fast", action="store_true", help="the per-request mode (optimize --fast)")
    ap.add_argument("--trees", default=None, help="BEFORE:AFTER checkouts to compare side by side")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from gramopt.cli.batch import batch_items
    trees = args.trees.split(":") if args.trees else [str(ROOT)]
    rows = []
    ctx = mp.get_context("spawn")
    for target in args.targets.split(","):
        only = args.only.split(",") if args.only else None
        items = [i for i in batch_items(args.corpus, "/nonexistent-out", target=target)
                 if only is None or any(o in i.name for o in only)]
        options = {"target": target, "verify": True, "fast": args.fast}
        with cf.ProcessPoolExecutor(args.jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
            futs = [(it.name, [pool.submit(_time_item, tree, it.__dict__, options) for tree in trees])
                    for it in items]
            for name, fs in futs:
                res = [f.result() for f in fs]
                rows.append({"target": target, "name": name, "runs": res})
                print(f"{target:<10} {name:<60} " + "  ".join(f"{r['total']:8.2f}" for r in res),
                      file=sys.stderr, flush=True)
    print(f"# python benchmarks/optimizer_hotspots.py {' '.join(argv or sys.argv[1:])}")
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, load average {os.getloadavg()[0]:.2f}")
    for target in args.targets.split(","):
        tr = [r for r in rows if r["target"] == target]
        for k, tree in enumerate(trees):
            label = tree if len(trees) == 1 else f"{('before', 'after')[k]}: {tree}"
            _print_stages(target, tr, args.top, k, label)
        if len(trees) == 2:
            _print_compare(target, tr, args.top)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


def _print_stages(target: str, rows: list, top: int, k: int, label: str) -> None:
    last = [(r["name"], r["runs"][k]) for r in rows]
    stages = sorted({s for _, run in last for s in run["stages"]}, key=lambda s: (s == "other", s))
    print(f"\n## target {target}, {label}: {len(last)} items, {sum(r['total'] for _, r in last):.1f} s in all,"
          f" the {top} slowest with their stages (s)\n")
    short = {s: s.replace("pass ", "") for s in stages}
    print("| item | total s | " + " | ".join(short[s] for s in stages) + " |")
    print("|---|---:|" + "---:|" * len(stages))
    for name, run in sorted(last, key=lambda x: -x[1]["total"])[:top]:
        cells = " | ".join(f"{run['stages'].get(s, 0.0):.2f}" for s in stages)
        print(f"| {name} | {run['total']:.2f} | {cells} |" + (f" {run['error']}" if run["error"] else ""))
    tot = {s: sum(run["stages"].get(s, 0.0) for _, run in last) for s in stages}
    print("| **all items** | " + f"{sum(tot.values()):.1f} | " + " | ".join(f"{tot[s]:.1f}" for s in stages) + " |")


def _print_compare(target: str, rows: list, top: int) -> None:
    print(f"\n## target {target}: before / after, side by side ({len(rows)} items)\n")
    print("| item | before s | after s | ratio | same output |")
    print("|---|---:|---:|---:|---|")
    same = sum(r["runs"][0]["text"] == r["runs"][1]["text"] for r in rows)
    for r in sorted(rows, key=lambda r: -r["runs"][0]["total"])[:top]:
        b, a = r["runs"][0]["total"], r["runs"][1]["total"]
        print(f"| {r['name']} | {b:.2f} | {a:.2f} | {a / b:.2f} | {r['runs'][0]['text'] == r['runs'][1]['text']} |")
    b = sum(r["runs"][0]["total"] for r in rows)
    a = sum(r["runs"][1]["total"] for r in rows)
    print(f"| **all {len(rows)} items** | {b:.1f} | {a:.1f} | {a / b:.2f} | {same}/{len(rows)} |")


if __name__ == "__main__":
    sys.exit(main())
