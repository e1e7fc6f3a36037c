"""Measure grammars before and after optimization in each engine, and write a report.

For each grammar (default: a bundled selection of corpus grammars, the pathological seed
forms and the corpus grammars obfuscated), optimize it for each engine's target, then
measure the original and the optimized grammar interleaved on the same token
trajectories: compile time, per-mask p50/p95/max, gramopt's counters, κ and exact SAC
per token. Writes OUT/report.md and PNG plots; results are cached in OUT/.bench-cache by
content hash, so a rerun measures only what changed. Engines not installed are skipped
with a note.
"""

from __future__ import annotations

import os
import sys
import time

from .exits import EXIT_OK

HELP = "measure original vs optimized grammars per engine; write a report with plots"


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="*", help="grammar files or folders (default: the bundled selection)")
    p.add_argument("--engines", default="gramopt,xgrammar,llguidance",
                   help="comma-separated engines (gramopt, xgrammar, llguidance, llama.cpp; "
                        "gramopt-valiant: the matrix runtime)")
    p.add_argument("--vocab", default="qwen",
                   help="'qwen' (default), 'bytes' (256 one-byte tokens), or a tiktoken / tokenizer.json file")
    p.add_argument("--out", default="bench-report", help="report folder (default: bench-report)")
    p.add_argument("--max-tokens", type=int, default=150, help="tokens per trajectory (default 150)")
    p.add_argument("--reps", type=int, default=5, help="measured passes per form (default 5)")
    p.add_argument("--budget", type=float, default=2.0,
                   help="seconds: a slower pass ends the repetitions (and is not a warm-up)")
    p.add_argument("-j", "--jobs", type=int, default=0,
                   help="worker processes (0: the cores for folders, 1 for the default selection)")
    p.add_argument("--suites", default="corpus,pathological,obfuscated",
                   help="suites of the default selection")
    p.add_argument("--no-verify", action="store_true", help="skip verification of the optimized grammars")
    p.add_argument("--no-sac", action="store_true", help="skip the exact SAC trace (slow on ambiguous forms)")
    p.add_argument("--no-plots", action="store_true", help="write report.md only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from ..bench.engines import engine_names
    from ..bench.report import summary_table, write_report
    from ..bench.run import Options, run_cases
    from ..bench.suites import default_cases, path_cases, pathological_cases
    from ..grammar import GrammarError

    engines = engine_names(args.engines)
    if args.vocab not in ("qwen", "bytes") and not os.path.exists(args.vocab):
        raise GrammarError(f"no vocabulary file '{args.vocab}'")
    suites = {s.strip() for s in args.suites.split(",") if s.strip()}
    if args.paths:
        sel = path_cases(args.paths)
        jobs = args.jobs or (os.cpu_count() or 1)
    else:
        if suites == {"pathological"}:
            from ..bench.suites import Selection
            sel = Selection(pathological_cases())
        else:
            sel = default_cases(obfuscated="obfuscated" in suites, pathological="pathological" in suites)
            if "corpus" not in suites:
                sel.cases = [c for c in sel.cases if c.suite != "corpus"]
        jobs = args.jobs or 1
    if not sel.cases:
        for n in sel.notes:
            print(f"gramopt bench: {n}", file=sys.stderr)
        raise GrammarError("nothing to measure")
    opts = Options(engines=engines, vocab=args.vocab, max_tokens=args.max_tokens, reps=max(1, args.reps),
                   budget_s=args.budget, verify=not args.no_verify, sac=not args.no_sac)
    t0 = time.perf_counter()
    print(f"gramopt bench: {len(sel.cases)} grammars × {len(engines)} engines, {jobs} worker(s), "
          f"out {args.out}", file=sys.stderr)
    results = run_cases(sel.cases, opts, args.out, jobs=jobs, progress=not args.quiet)
    elapsed = time.perf_counter() - t0
    cached = sum(1 for r in results if r.get("cached"))
    meta = {"grammars": len(results), "engines": ",".join(engines), "vocab": args.vocab,
            "max tokens": args.max_tokens, "wall": f"{elapsed:.1f} s", "cached": cached}
    paths = write_report(results, args.out, notes=sel.notes, meta=meta, plots=not args.no_plots)
    print(summary_table(results))
    print(f"\nreport: {paths['report']} ({len(paths['plots'])} plots; {elapsed:.1f} s, "
          f"{cached} of {len(results)} from cache)")
    return EXIT_OK
