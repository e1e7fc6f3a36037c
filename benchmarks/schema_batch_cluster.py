"""Every corpus JSON schema as one batch: local process pool vs a Dask LocalCluster, then a rerun.

    python benchmarks/schema_batch_cluster.py [--target llama.cpp] [--fast] [--workers 2] [--folder DIR]

Runs ``gramopt optimize FOLDER -o OUT`` over the corpus schemas (``$CORPUS/jsonschema``)
three times: on the local process pool (``-j WORKERS``, its own cache), on a
``distributed.LocalCluster`` of WORKERS single-threaded worker processes (``--scheduler``,
a fresh shared cache folder), and again on the cluster with that cache. Printed per run:
wall seconds, outputs written, items served from the cache, failed items, and how many
outputs are byte-for-byte those of the process pool. Exits 1 unless the cluster wrote the
pool's bytes and the rerun optimized nothing (every item from the cache, same bytes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from corpus_location import CORPUS  # noqa: E402

from gramopt.cli import main as gramopt  # noqa: E402


def outputs(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".gramopt-cache" not in p.parts}


def run(argv: list[str]) -> tuple[int, float, str]:
    err = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stderr(err):
        code = gramopt(argv)
    return code, time.perf_counter() - t, err.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="generic")
    ap.add_argument("--fast", action="store_true", help="the per-request mode (optimize --fast)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--folder", default=str(CORPUS / "jsonschema"), help="the schemas (default: the corpus')")
    args = ap.parse_args()
    from distributed import LocalCluster
    src = Path(args.folder)
    common = ["--target", args.target, "-q"] + (["--fast"] if args.fast else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="gramopt-batch-") as tmp:
        tmp = Path(tmp)
        pool_out = tmp / "pool"
        code, secs, err = run(["optimize", str(src), "-o", str(pool_out), "-j", str(args.workers), *common])
        pool = outputs(pool_out)
        rows.append(("process pool", code, secs, pool, err))
        shared = tmp / "shared-cache"
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            for name in ("LocalCluster", "LocalCluster rerun"):
                out = tmp / name.replace(" ", "-")
                code, secs, err = run(["optimize", str(src), "-o", str(out), "--scheduler", cluster.scheduler_address,
                                       "--cache", str(shared), *common])
                rows.append((name, code, secs, outputs(out), err))
    n_items = len(list(src.glob("*.json")))
    print(f"{n_items} schemas from {src}, target {args.target}{' (--fast)' if args.fast else ''}, "
          f"{args.workers} workers\n")
    print("| run | exit | seconds | outputs | from the cache | optimized | same bytes as the pool |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ok = True
    for name, code, secs, outs, err in rows:
        m = re.search(r"(\d+) items, (\d+) served from the cache, (\d+) to optimize", err)
        cached, todo = (int(m.group(2)), int(m.group(3))) if m else (-1, -1)
        same = sum(outs.get(k) == v for k, v in pool.items()) if outs.keys() == pool.keys() else 0
        print(f"| {name} | {code} | {secs:.1f} | {len(outs)} | {cached} | {todo} | {same}/{len(pool)} |")
        ok &= same == len(pool)
        if name.endswith("rerun"):
            ok &= todo == 0
    failed = [ln for ln in rows[0][4].splitlines() if "FAILED" in ln]
    for ln in failed:
        print("pool:", ln.strip())
    print("\nsame bytes on the cluster, rerun served from the cache:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
