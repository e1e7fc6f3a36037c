"""The optimizer over the whole corpus: κ before/after, time, what fired, and whether the
output still does its job.

    python benchmarks/optimizer_bench.py [--corpus DIR] [--only SUBSTR] [--target generic]
                                         [--jobs N] [--json OUT.json]

For every gbnf / ebnf / lark grammar of the corpus (and the NLTK .cfg with ``--cfg``), in a
worker process each (so one slow grammar cannot stall the others, and a crash is one row):

- read it, ``optimize(grammar, target)`` without verification (time ``opt s``), then verify
  the output against the input with ``gramopt.verify`` (time ``verify s``);
- optimize the output again: it must not change (``idem``);
- write the output in the input's dialect, load it in the grammar's own engine (xgrammar for
  gbnf/ebnf, lark for lark; llguidance for llguidance's Lark) and run every corpus sample
  through it (``samples`` = accepted/total; the original's verdicts are the reference).

Prints one row per grammar, then per folder: κ before → after, time p50 / max, rows where κ
grew, and the rewrites that fired most. Figures, not asserts: the tests assert.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus_location import CORPUS as DEFAULT_CORPUS, own_engine, validate_module  # noqa: E402


def bench_one(path: str, target: str, corpus: str) -> dict:
    from gramopt.formats import read, write
    from gramopt.grammar import GrammarError
    from gramopt.costmodels import kappa
    from gramopt.passes import optimize
    from gramopt.verify import check_equivalence

    p = Path(path)
    row = {"file": p.name, "folder": p.parent.name}
    validate = validate_module(Path(corpus))
    start = validate.LARK_START.get(p.name[: -len(p.suffix)]) if p.suffix == ".lark" else None
    try:
        g = read(path, start=start)
    except GrammarError as e:
        row["skipped"] = f"read: {e.message}"
        return row
    if not g.start:
        row["skipped"] = "rule library (no start rule)"
        return row
    t = time.perf_counter()
    res = optimize(g, target=target, verify=False)
    row["opt_s"] = time.perf_counter() - t
    out = res.grammar
    row.update(kappa_in=kappa(g), kappa_out=kappa(out), rules_in=len(g.rules), rules_out=len(out.rules))
    fired = collections.Counter()
    for rep in res.report.passes:
        fired.update(rep.fired)
    row["fired"] = dict(fired)
    t = time.perf_counter()
    try:
        check = check_equivalence(g, out)
        row["verified"] = "ok" if check.ok else f"DIFFERS: {check.counterexample!r}"
    except RecursionError as e:
        row["verified"] = f"error: {e!r}"
    row["verify_s"] = time.perf_counter() - t
    row["idempotent"] = optimize(out, target=target, verify=False).grammar == out
    samples = sorted(p.parent.glob(p.name[: -len(p.suffix)] + ".sample*.txt"))
    if samples:
        texts = [s.read_text(encoding="utf-8") for s in samples]
        try:
            name, before = own_engine(validate, p, p.read_text(encoding="utf-8"))
            expected = [before(s) for s in texts]
        except Exception as e:  # noqa: BLE001 - the engine rejects the original: nothing to compare
            row["samples"] = f"original does not load: {str(e)[:80]}"
            return row
        try:
            name, after = own_engine(validate, p, write(out, g.dialect))
            got = [after(s) for s in texts]
            row["engine"] = name
            row["samples"] = f"{sum(g_ and e for g_, e in zip(got, expected))}/{sum(expected)}"
            row["samples_ok"] = all(g_ or not e for g_, e in zip(got, expected))
        except Exception as e:  # noqa: BLE001
            row["samples"] = f"OUTPUT DOES NOT LOAD: {str(e)[:120]}"
            row["samples_ok"] = False
    return row


def files(corpus: Path, with_cfg: bool, only: str | None) -> list[Path]:
    out = []
    for folder in ("gbnf", "ebnf", "lark") + (("cfg",) if with_cfg else ()):
        out += sorted((corpus / folder).glob(f"*.{folder}"))
    return [p for p in out if not only or only in p.name]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--only", help="substring of the file names to run")
    ap.add_argument("--target", default="generic")
    ap.add_argument("--cfg", action="store_true", help="include the NLTK .cfg grammars (big)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    if args.corpus is None:
        ap.error("no corpus found: pass --corpus DIR or set GRAMOPT_CORPUS")
    paths = files(args.corpus, args.cfg, args.only)
    rows = []
    ctx = mp.get_context("spawn")  # egglog's threads do not survive fork
    with cf.ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
        futs = {pool.submit(bench_one, str(p), args.target, str(args.corpus)): p for p in paths}
        for i, fut in enumerate(cf.as_completed(futs), 1):
            p = futs[fut]
            try:
                row = fut.result()
            except Exception as e:  # noqa: BLE001 - one crashed grammar is one row
                row = {"file": p.name, "folder": p.parent.name, "skipped": f"CRASH {type(e).__name__}: {e}"}
            rows.append(row)
            print(f"[{i}/{len(paths)}] {_line(row)}", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: (r["folder"], r["file"]))
    print(table(rows))
    print()
    print(summary(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    bad = [r for r in rows if r.get("verified", "ok") != "ok" and not str(r.get("verified")).startswith("error")
           or r.get("samples_ok") is False or r.get("idempotent") is False]
    return 1 if bad else 0


def _line(r: dict) -> str:
    if "skipped" in r:
        return f"{r['file']}: skipped ({r['skipped']})"
    return (f"{r['file']}: κ {r['kappa_in']}→{r['kappa_out']} {r['opt_s']:.2f}s "
            f"verify {r['verified']} idem {r['idempotent']} samples {r.get('samples', '-')}")


def table(rows: list[dict]) -> str:
    head = f"{'grammar':<52} {'κ in':>7} {'κ out':>7} {'rules':>9} {'opt s':>6} {'verify s':>8} {'idem':>4}  samples / verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['folder'] + '/' + r['file']:<52} skipped: {r['skipped']}")
            continue
        verdict = "" if r["verified"] == "ok" else f"  verify: {r['verified']}"
        lines.append(f"{r['folder'] + '/' + r['file']:<52} {r['kappa_in']:>7} {r['kappa_out']:>7} "
                     f"{r['rules_in']:>4}→{r['rules_out']:<4} {r['opt_s']:>6.2f} {r['verify_s']:>8.2f} "
                     f"{'yes' if r['idempotent'] else 'NO':>4}  {r.get('samples', '-')}{verdict}")
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    head = f"{'folder':<6} {'n':>3} {'κ in':>8} {'κ out':>8} {'Δκ%':>6} {'κ grew':>6} {'opt p50':>7} {'opt max':>7} {'ver p50':>7} {'ver max':>7}  most fired"
    lines = [head, "-" * len(head)]
    for folder in sorted({r["folder"] for r in rows}):
        done = [r for r in rows if r["folder"] == folder and "skipped" not in r]
        if not done:
            continue
        k0, k1 = sum(r["kappa_in"] for r in done), sum(r["kappa_out"] for r in done)
        grew = sum(r["kappa_out"] > r["kappa_in"] for r in done)
        opt = [r["opt_s"] for r in done]
        ver = [r["verify_s"] for r in done]
        fired = collections.Counter()
        for r in done:
            fired.update(r["fired"])
        top = ", ".join(f"{k}×{v}" for k, v in fired.most_common(4))
        lines.append(f"{folder:<6} {len(done):>3} {k0:>8} {k1:>8} {100 * (k1 - k0) / k0:>6.1f} {grew:>6} "
                     f"{statistics.median(opt):>7.2f} {max(opt):>7.2f} {statistics.median(ver):>7.2f} "
                     f"{max(ver):>7.2f}  {top}")
    skipped = [r for r in rows if "skipped" in r]
    if skipped:
        lines.append(f"skipped: {len(skipped)} ({', '.join(r['file'] for r in skipped)})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
