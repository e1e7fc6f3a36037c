"""Per-request cost: optimizing one JSON-schema grammar in process, next to the engine's compile.

    python benchmarks/schema_optimize_bench.py [--reps 5] [--target xgrammar] [--only NAME]

A serving stack converts a schema per request, so optimizing its grammar must cost less than
the engine's own compile to pay off at once. For every corpus schema (``$CORPUS/jsonschema``)
this converts it with xgrammar's converter (timed), then times, in this process and warm
(the first call of each is not counted), ``gramopt.optimize`` with verification and without,
the per-request mode (``fast=True``: clean-ups, inlining and the target's fix-ups once, checked
by derivations proportional to the rules that changed) with its check and without, and
xgrammar's ``compile_grammar`` of the converted grammar (Qwen vocabulary, one thread, its
cache off). Printed per schema: rules, p50/p95 of each in ms; then the medians over schemas
(of the per-schema p50s) and the p50/p95 over all timed calls of the per-request mode.
``--no-full`` skips the full pipeline (it takes minutes on the largest schemas).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from corpus_location import CORPUS  # noqa: E402

from gramopt.engines.jsonschema import convert_text, load_schemas  # noqa: E402
from gramopt.formats import parse  # noqa: E402
from gramopt.passes import optimize  # noqa: E402


def timed(fn, reps: int) -> list[float]:
    fn()  # warm: imports, numba/egglog start-up, per-process caches
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def pair(q) -> str:
    """'p50 / p95' in ms, '–' for a column not measured."""
    return "–" if np.isnan(q[0]) else f"{q[0]:.0f} / {q[1]:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--target", default="xgrammar")
    ap.add_argument("--only")
    ap.add_argument("--json")
    ap.add_argument("--no-full", action="store_true", help="time only the per-request mode and the compile")
    args = ap.parse_args()
    import xgrammar as xgr
    from gramopt.runtime.vocab import Vocab
    v = Vocab.qwen()
    info = xgr.TokenizerInfo(v.token_bytes, xgr.VocabType.RAW, vocab_size=len(v),
                             stop_token_ids=list(v.eos_ids), add_prefix_space=False)
    rows = []
    print("| schema | rules | convert ms | optimize+verify p50 / p95 ms | optimize p50 / p95 ms | "
          "fast+check p50 / p95 ms | fast p50 / p95 ms | xgrammar compile p50 / p95 ms | fast ÷ compile |")
    print("|---|---:|---:|---|---|---|---|---|---:|")
    nan = [float("nan")]
    every = {"fastv": [], "fast": []}
    for s in load_schemas(str(CORPUS / "jsonschema")):
        if args.only and args.only not in s.name:
            continue
        conv = timed(lambda: convert_text(s, "xgrammar"), 1)
        text, dialect = convert_text(s, "xgrammar")
        g = parse(text, dialect)
        full = nan if args.no_full else timed(lambda: optimize(g, target=args.target, verify=True), args.reps)
        bare = nan if args.no_full else timed(lambda: optimize(g, target=args.target, verify=False), args.reps)
        fastv = timed(lambda: optimize(g, target=args.target, verify=True, fast=True), args.reps)
        fast = timed(lambda: optimize(g, target=args.target, verify=False, fast=True), args.reps)
        every["fastv"] += fastv
        every["fast"] += fast
        comp = timed(lambda: xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(text),
                     args.reps)
        p = {k: np.percentile(x, [50, 95]) for k, x in (("full", full), ("bare", bare), ("fastv", fastv),
                                                         ("fast", fast), ("comp", comp))}
        row = {"schema": s.name, "rules": len(g.rules), "convert_ms": conv[0],
               **{f"{k}_p{q}": float(p[k][i]) for k in p for i, q in enumerate((50, 95))}}
        rows.append(row)
        print(f"| {s.name} | {len(g.rules)} | {conv[0]:.1f} | {pair(p['full'])} | "
              f"{pair(p['bare'])} | {p['fastv'][0]:.0f} / {p['fastv'][1]:.0f} | "
              f"{p['fast'][0]:.1f} / {p['fast'][1]:.1f} | {p['comp'][0]:.1f} / {p['comp'][1]:.1f} | "
              f"{p['fast'][0] / p['comp'][0]:.2f}× |", flush=True)
    if rows:
        med = {k: float(np.median([r[k] for r in rows]))
               for k in ("full_p50", "bare_p50", "fastv_p50", "fast_p50", "comp_p50")}
        full = "" if args.no_full else (f"optimize+verify p50 {med['full_p50']:.0f} ms, optimize alone "
                                        f"{med['bare_p50']:.0f} ms, ")
        print(f"\nmedian over {len(rows)} schemas (target {args.target}): {full}per-request {med['fast_p50']:.1f} ms "
              f"(with its check {med['fastv_p50']:.0f} ms), xgrammar compile {med['comp_p50']:.1f} ms")
        for k, what in (("fast", "per-request optimize"), ("fastv", "per-request optimize + check")):
            q = np.percentile(every[k], [50, 95])
            print(f"{what}, all {len(every[k])} timed calls: p50 {q[0]:.1f} ms, p95 {q[1]:.1f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
