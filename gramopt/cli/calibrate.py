"""Fit per-engine cost models T_mask ≈ w·c + b on this machine.

Measures the benchmark selection (or the given grammars) as ``gramopt bench`` does — the
results are cached in OUT/.bench-cache and shared with ``gramopt bench --out OUT`` — then
fits, per engine, the step time on gramopt's runtime counters, the exact SAC per step and
the grammar's static features by least squares, prints R² and residuals, and writes one
JSON model per engine (default folder: $GRAMOPT_MODELS, else ~/.config/gramopt/models).
Nothing reads them implicitly: ``gramopt optimize --target ENGINE --cost-model FOLDER``
extracts under them (named in the report and in the batch cache key); without
``--cost-model`` the models shipped in the package are used.
"""

from __future__ import annotations

import os
import platform
import sys
import time

from .exits import EXIT_OK, EXIT_USAGE

HELP = "fit per-engine cost models on this machine (used by optimize --target ENGINE)"


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="*", help="grammar files or folders (default: the bench selection)")
    p.add_argument("--engines", default="gramopt,xgrammar,llguidance",
                   help="comma-separated engines (the same list as bench's shares its cache)")
    p.add_argument("--vocab", default="qwen", help="'qwen' (default), 'bytes', or a vocabulary file")
    p.add_argument("--out", default="bench-report", help="measurement cache folder (default: bench-report)")
    p.add_argument("--models", help="folder for the fitted models (default: $GRAMOPT_MODELS or "
                                    "~/.config/gramopt/models)")
    p.add_argument("--package", action="store_true",
                   help="write into the package's own models folder (to ship them)")
    p.add_argument("--max-tokens", type=int, default=150)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("-j", "--jobs", type=int, default=0, help="worker processes (0: cores for folders, else 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from ..bench.engines import engine_names
    from ..bench.run import Options, run_cases
    from ..bench.suites import default_cases, path_cases
    from ..costmodels.calibration import MODELS_DIR, fit, rows_from_results, save_model, user_models_dir
    from ..grammar import GrammarError

    engines = engine_names(args.engines)
    sel = path_cases(args.paths) if args.paths else default_cases()
    for n in sel.notes:
        print(f"gramopt calibrate: {n}", file=sys.stderr)
    if not sel.cases:
        raise GrammarError("nothing to measure")
    jobs = args.jobs or ((os.cpu_count() or 1) if args.paths else 1)
    opts = Options(engines=engines, vocab=args.vocab, max_tokens=args.max_tokens, reps=max(1, args.reps))
    t0 = time.perf_counter()
    results = run_cases(sel.cases, opts, args.out, jobs=jobs, progress=not args.quiet)
    folder = MODELS_DIR if args.package else (args.models or user_models_dir())
    meta = {"machine": platform.machine(), "python": platform.python_version(), "vocab": args.vocab,
            "grammars": len(results), "date": time.strftime("%Y-%m-%d")}
    wrote = 0
    for eng in engines:
        rows = rows_from_results(results, eng)
        if not rows:
            print(f"{eng}: no measured steps (not installed, or every grammar failed): no model", file=sys.stderr)
            continue
        model = fit(rows, eng, meta=meta)
        path = save_model(model, folder)
        wrote += 1
        print(model.format())
        print(f"  → {path}")
    print(f"calibrated {wrote} engine(s) in {time.perf_counter() - t0:.1f} s")
    return EXIT_OK if wrote else EXIT_USAGE
