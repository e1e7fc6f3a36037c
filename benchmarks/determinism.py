"""Reproducible output: ``gramopt optimize`` over a corpus, for every target, run twice —
the second time with every core kept busy — must write byte-identical files.

    python benchmarks/determinism.py [CORPUS] [--targets generic,xgrammar,...] [--jobs N]
                                     [--no-load] [--once] [--limit K] [--keep DIR] [--against DIR]

Each run is ``gramopt optimize CORPUS -o OUT --target T -j N --cache FRESH`` (a batch: every
grammar and schema of the folder, no cache reuse). The loaded run starts one busy process per
core (``while True: pass``) for its duration. ``--keep DIR`` keeps the first run's files under
DIR/TARGET (to compare with another commit's outputs); ``--against DIR`` compares run 1's files with
DIR/TARGET, files kept by another commit's ``--keep DIR`` (a file missing on either side differs);
``--once`` skips run 2 (for a comparison across commits only). Prints, per target, the files written
by each run, how many differ, and the seconds each run took (and with ``--against`` how many of run 1's
files are identical to and differ from DIR's); exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import filecmp
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from gramopt.bench.suites import corpus_dir  # noqa: E402
DEFAULT_CORPUS = Path(corpus_dir() or "corpus")
EXTS = (".gbnf", ".ebnf", ".lark", ".cfg", ".json")


def spin() -> None:  # pragma: no cover - a busy loop
    while True:
        pass


def optimize(corpus: Path, out: Path, target: str, jobs: int) -> float:
    cache = Path(tempfile.mkdtemp(prefix="gramopt-det-cache-"))
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gramopt", "optimize", str(corpus), "-o", str(out), "--target", target,
                    "-j", str(jobs), "--cache", str(cache), "-q"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    shutil.rmtree(cache, ignore_errors=True)
    return time.perf_counter() - t


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def subset(corpus: Path, limit: int) -> Path:
    """The first ``limit`` inputs (sorted) of each sub-folder, copied to a temporary folder."""
    tmp = Path(tempfile.mkdtemp(prefix="gramopt-det-corpus-"))
    for sub in sorted(p for p in corpus.iterdir() if p.is_dir()):
        for p in sorted(q for q in sub.iterdir() if q.suffix in EXTS)[:limit]:
            (tmp / sub.name).mkdir(exist_ok=True)
            shutil.copy(p, tmp / sub.name / p.name)
    return tmp


def differing(a: Path, b: Path) -> list[str]:
    """The files (relative paths) present in only one of ``a`` and ``b``, or in both with other bytes."""
    fa, fb = files(a), files(b)
    return sorted(set(fa) ^ set(fb)) + [f for f in sorted(set(fa) & set(fb))
                                        if not filecmp.cmp(a / f, b / f, shallow=False)]


def main() -> int:
    from gramopt.targets import NAMES
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS))
    ap.add_argument("--targets", default=",".join(NAMES))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-load", action="store_true", help="second run without the busy processes")
    ap.add_argument("--limit", type=int, default=0, help="inputs per sub-folder (0: all)")
    ap.add_argument("--once", action="store_true", help="no run 2 (compare across commits with --against only)")
    ap.add_argument("--keep", help="keep the first run's outputs under KEEP/TARGET")
    ap.add_argument("--against", help="compare run 1's outputs with AGAINST/TARGET (another commit's --keep)")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"no corpus folder {corpus}", file=sys.stderr)
        return 2
    if args.limit:
        corpus = subset(corpus, args.limit)
    second = "-" if args.once else "idle" if args.no_load else "loaded"
    against = " | same as --against | differ from --against" if args.against else ""
    print(f"| target | files run 1 | files run 2 | differ | run 1 s | run 2 s ({second}){against} |")
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.against else ""))
    bad = 0
    for target in args.targets.split(","):
        a, b = (Path(tempfile.mkdtemp(prefix=f"gramopt-det-{i}-")) for i in (1, 2))
        t1 = optimize(corpus, a, target, args.jobs)
        t2, differ = 0.0, []
        if not args.once:
            busy = [] if args.no_load else [multiprocessing.Process(target=spin, daemon=True)
                                            for _ in range(os.cpu_count() or 1)]
            for p in busy:
                p.start()
            try:
                t2 = optimize(corpus, b, target, args.jobs)
            finally:
                for p in busy:
                    p.terminate()
                    p.join()
            differ = differing(a, b)
        bad += len(differ)
        row = (f"| {target} | {len(files(a))} | {'-' if args.once else len(files(b))} | "
               f"{'-' if args.once else len(differ)} | {t1:.0f} | {'-' if args.once else f'{t2:.0f}'} |")
        if args.against:
            other = Path(args.against) / target
            moved = differing(a, other)
            bad += len(moved)
            row += f" {len(set(files(a)) | set(files(other))) - len(moved)} | {len(moved)} |"
            differ = differ + [f"{f} (against {other})" for f in moved]
        print(row, flush=True)
        for f in differ[:10]:
            print(f"  differs: {f}")
        if args.keep:
            dest = Path(args.keep) / target
            shutil.rmtree(dest, ignore_errors=True)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(a), dest)
        shutil.rmtree(a, ignore_errors=True)
        shutil.rmtree(b, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
