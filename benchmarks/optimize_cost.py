"""What one optimize costs: wall and CPU seconds and peak memory per item, as a CLI user and as a build step.

    python benchmarks/optimize_cost.py                               # JSONSchemaBench sample, both modes
    python benchmarks/optimize_cost.py --data corpus --limit 40      # the corpus's grammars
    python benchmarks/optimize_cost.py --tree /work/wt/before --out DIR/before   # another checkout's gramopt
    python benchmarks/optimize_cost.py --compare DIR/before DIR/after            # the before/after table

Two modes, the defaults otherwise (full verification, the engine check):
  * ``process``: ``python -m gramopt optimize ITEM -o OUT --target T``, one process per item (a
    user on the command line): wall seconds, CPU seconds (user + system of that process and
    its children) and peak RSS, from ``os.wait4``;
  * ``batch``: one long-lived worker process optimizes every item in turn through
    ``gramopt.cli.batch.optimize_item``, the function ``gramopt optimize DIR -o OUTDIR`` runs in its
    workers (a build step over thousands of schemas): per item wall and CPU seconds
    (``time.process_time``) and the worker's peak RSS during that item (``VmHWM`` of
    ``/proc/self/status``, reset before each item through ``/proc/self/clear_refs``; it includes
    what earlier items left in per-process caches). The worker's start-up is not an item's.
Items: ``--data`` a folder of JSONSchemaBench files (default the vendored 443,
``benchmarks/data/jsonschemabench``) or of grammars (``corpus``: every grammar file of the
corpus); ``--every K`` keeps every K-th item (sorted by name), ``--skip S`` leaves out the first S
of those (to finish a run cut short: rows are appended), ``--limit N`` keeps the next N.

``--paired A,B,A2`` runs batch workers of several checkouts side by side, each item asked of
every worker in turn, so they meet the same load (a copy of A listed again is the A/A control);
it prints each one's table and its per-item ratios to the first.

``--tree`` runs another checkout's gramopt (its folder goes first on ``PYTHONPATH``), so the
same script measures a base commit and its successor on one machine; every output is written
under ``--out``/``outputs/MODE/TARGET/``, and ``--compare`` prints both runs' tables side by
side, counts the outputs whose bytes differ and totals the masks asked of each engine (batch rows:
``masks``, llguidance and llama.cpp over Qwen's vocabulary and over bytes, xgrammar; work that load
does not change). Results: ``rows.jsonl`` (one row per item,
mode and target) under ``--out``. Figures are p50 / p95 / max over items; on a shared machine
wall time carries the others' load, CPU time less so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "jsonschemabench"
GRAMMAR_EXTENSIONS = (".gbnf", ".ebnf", ".lark")

WORKER = r"""
import json, os, sys, time
sys.setrecursionlimit(100000)
from gramopt.cli.batch import batch_items, optimize_item, _worker_init
from dataclasses import asdict
from contextlib import contextmanager
import gramopt.passes, gramopt.judge
_worker_init(os.getppid())  # it ends with the benchmark that started it

# where an item's CPU goes: the outermost stages (passes, engine check, verification), and the
# judge's decision (its last note), recorded by wrapping what gramopt.passes calls
_stage, _judge = gramopt.passes.stage, gramopt.judge.judge
phases, decision, depth = {}, [], [0]

@contextmanager
def timed_stage(name):
    depth[0] += 1
    c = time.process_time()
    try:
        with _stage(name):
            yield
    finally:
        depth[0] -= 1
        if depth[0] == 0:
            key = "passes" if name.startswith("pass ") else name
            phases[key] = phases.get(key, 0.0) + time.process_time() - c

def recorded_judge(*a, **k):
    v = _judge(*a, **k)
    notes = (v.engine_notes or []) + (v.guard_notes or [])
    decision.append(next((n for n in reversed(notes) if n.startswith("kept ")), "kept the candidate"))
    return v

gramopt.passes.stage, gramopt.judge.judge = timed_stage, recorded_judge

# the masks asked of each engine (work, not seconds: the same on any machine and load)
import importlib
masks = {}
def counted(module, owner, name, key):
    try:
        obj = importlib.import_module(module)
        obj = getattr(obj, owner) if owner else obj
        fn = getattr(obj, name)
    except (ImportError, AttributeError):
        return
    def wrapped(*a, **k):
        which = key(a) if callable(key) else key
        masks[which] = masks.get(which, 0) + 1
        return fn(*a, **k)
    setattr(obj, name, wrapped)
counted("gramopt.engines.xgrammar", "XgrammarMatcher", "fill", "xgrammar")
counted("gramopt.engines.llamacpp", "LlamaCppMatcher", "allowed_tokens",
        lambda a: "llama.cpp bytes" if a[0].n <= 257 else "llama.cpp")
counted("llguidance.numpy", None, "fill_next_token_bitmask",
        lambda a: "llguidance bytes" if a[1].shape[-1] <= 9 else "llguidance")

def peak_reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass

def peak_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0

for line in sys.stdin:
    job = json.loads(line)
    out_dir = os.path.dirname(job["out"])
    items = batch_items(job["path"], out_dir, target=job["target"])
    peak_reset()
    phases.clear(); decision.clear(); masks.clear()
    w, c = time.perf_counter(), time.process_time()
    r = optimize_item(asdict(items[0]), {"target": job["target"]}, None)
    w, c = time.perf_counter() - w, time.process_time() - c
    if r.get("text") is not None:
        with open(job["out"], "w", encoding="utf-8") as f:
            f.write(r["text"])
    print(json.dumps({"code": r["code"], "wall": w, "cpu": c, "peak_mb": peak_kb() / 1024,
                      "message": (r.get("message") or "")[:200],
                      "phases": {k: round(v, 3) for k, v in phases.items()},
                      "judge": decision[-1] if decision else None,
                      "masks": dict(sorted(masks.items()))}), flush=True)
"""


def items(data: Path, every: int, limit: int | None, skip: int = 0) -> list[Path]:
    """The items to optimize: a folder's schemas (``.json``) or grammar files, sorted, every
    ``every``-th, the first ``limit`` of those after ``skip`` (to finish a run cut short)."""
    if str(data) == "corpus":
        sys.path.insert(0, str(ROOT / "tests"))
        from corpus_location import CORPUS
        files = sorted(p for p in Path(CORPUS).rglob("*") if p.suffix in GRAMMAR_EXTENSIONS)
    else:
        files = sorted(p for p in data.iterdir() if p.suffix == ".json")
    files = files[::every][skip:]
    return files[:limit] if limit else files


def output_path(out: Path, mode: str, target: str, item: Path) -> Path:
    ext = ".gbnf" if item.suffix == ".json" else item.suffix
    p = out / "outputs" / mode / target / (item.stem + ext)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def env_for(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_process(tree: Path, item: Path, target: str, dst: Path, timeout: float) -> dict:
    """One ``gramopt optimize`` process: exit code, wall, CPU (user + sys) and peak RSS."""
    cmd = [sys.executable, "-m", "gramopt", "optimize", str(item), "-o", str(dst), "--target", target]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env_for(tree), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree)
    deadline = t + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines() if proc.stderr else []
    return {"code": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
            "peak_mb": ru.ru_maxrss / 1024, "message": (err[-1] if err else "")[:200]}


def batch_worker(tree: Path) -> subprocess.Popen:
    """A long-lived worker process running ``tree``'s gramopt (``WORKER``)."""
    return subprocess.Popen([sys.executable, "-c", WORKER], env=env_for(tree), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=tree)


def ask(proc: subprocess.Popen, item: Path, target: str, out: Path) -> dict:
    """One item through a batch worker: its row."""
    dst = output_path(out, "batch", target, item)
    proc.stdin.write(json.dumps({"path": str(item), "target": target, "out": str(dst)}) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the batch worker died at {item.name}")
    return {"item": item.name, "mode": "batch", "target": target, **json.loads(line)}


def run_batch(tree: Path, files: list[Path], target: str, out: Path, log) -> list[dict]:
    """Every item through one worker process (module docstring)."""
    proc = batch_worker(tree)
    rows = []
    for item in files:
        row = ask(proc, item, target, out)
        rows.append(row)
        log(row)
    proc.stdin.close()
    proc.wait()
    return rows


def run_paired(trees: list[Path], files: list[Path], target: str, out: Path) -> None:
    """One batch worker per tree, each item asked of every worker in turn (the order reversed
    every other item), so that the trees meet the same load from one item to the next; list a
    tree twice for the A/A control. Rows and outputs under ``out/I-TREE/`` (``--compare`` reads
    them); prints each tree's table and its per-item wall and CPU ratios to the first tree's
    (median, and p95 of the wall ratio)."""
    dirs = [out / f"{i}-{t.name}" for i, t in enumerate(trees)]
    procs = [batch_worker(t) for t in trees]
    rows: list[list[dict]] = [[] for _ in trees]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    sinks = [open(d / "rows.jsonl", "a") for d in dirs]
    for k, item in enumerate(files):
        for i in (range(len(trees)) if k % 2 == 0 else reversed(range(len(trees)))):
            row = ask(procs[i], item, target, dirs[i])
            rows[i].append(row)
            sinks[i].write(json.dumps(row) + "\n")
            sinks[i].flush()
        print(f"{item.name[:44]:44} " + " ".join(f"{rs[-1]['wall']:6.2f}" for rs in rows), file=sys.stderr)
    for proc, sink in zip(procs, sinks):
        proc.stdin.close()
        proc.wait()
        sink.close()
    print("\n".join(HEADER + [line for d, rs in zip(dirs, rows) for line in table(rs, d.name)]))
    base = {r["item"]: r for r in rows[0]}
    for d, rs in zip(dirs[1:], rows[1:]):
        pairs = [(r, base[r["item"]]) for r in rs if base[r["item"]]["wall"] > 0.05 and base[r["item"]]["cpu"] > 0.05]
        wall = np.array([r["wall"] / b["wall"] for r, b in pairs])
        cpu = np.array([r["cpu"] / b["cpu"] for r, b in pairs])
        print(f"{d.name} against {dirs[0].name}, per item ({len(pairs)}): wall ratio median {np.median(wall):.3f} "
              f"(p95 {np.percentile(wall, 95):.3f}), CPU ratio median {np.median(cpu):.3f}")


def quantiles(xs) -> str:
    a = np.asarray(xs, float)
    return f"{np.percentile(a, 50):.2f} / {np.percentile(a, 95):.2f} / {a.max():.2f}" if a.size else "–"


def table(rows: list[dict], label: str = "") -> list[str]:
    """One line per (mode, target): items, failures, p50 / p95 / max of wall, CPU, peak MB."""
    out = []
    for key in sorted({(r["mode"], r["target"]) for r in rows}):
        rs = [r for r in rows if (r["mode"], r["target"]) == key]
        bad = sum(r["code"] != 0 for r in rs)
        out.append(f"| {label} | {key[0]} | {key[1]} | {len(rs)} | {bad} | {quantiles([r['wall'] for r in rs])} | "
                   f"{quantiles([r['cpu'] for r in rs])} | {quantiles([r['peak_mb'] for r in rs])} |")
    return out


HEADER = ["| run | mode | target | items | failed | wall s p50 / p95 / max | CPU s p50 / p95 / max | "
          "peak MB p50 / p95 / max |", "|---|---|---|---:|---:|---|---|---|"]


def read_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines() if line.strip()]


def compare(a: Path, b: Path) -> None:
    """Both runs' tables, then the outputs present in both whose bytes differ."""
    ra, rb = read_rows(a), read_rows(b)
    shared = {(r["item"], r["mode"], r["target"]) for r in ra} & {(r["item"], r["mode"], r["target"]) for r in rb}
    pick = lambda rows: [r for r in rows if (r["item"], r["mode"], r["target"]) in shared]  # noqa: E731
    print("\n".join(HEADER + table(pick(ra), a.name) + table(pick(rb), b.name)))
    same = differ = 0
    for fa in sorted((a / "outputs").rglob("*")):
        if fa.is_file():
            fb = b / "outputs" / fa.relative_to(a / "outputs")
            if fb.is_file():
                if fa.read_bytes() == fb.read_bytes():
                    same += 1
                else:
                    differ += 1
                    print(f"differs: {fa.relative_to(a / 'outputs')}")
    print(f"\noutputs written by both: {same + differ}; byte-identical: {same}; different: {differ}")
    counted = [pick(rows) for rows in (ra, rb)]
    if all(any("masks" in r for r in rows) for rows in counted):
        engines = sorted({e for rows in counted for r in rows for e in r.get("masks", {})})
        totals = [{e: sum(r.get("masks", {}).get(e, 0) for r in rows) for e in engines} for rows in counted]
        print("masks asked of the engines (batch rows, all items): " + "; ".join(
            f"{e} {totals[0][e]:,} -> {totals[1][e]:,}" for e in engines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA), help="a folder of schemas or grammars, or 'corpus'")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--skip", type=int, default=0, help="leave out the first SKIP items (a run cut short)")
    ap.add_argument("--targets", default="portable", help="comma-separated")
    ap.add_argument("--modes", default="process,batch", help="process, batch or both")
    ap.add_argument("--tree", default=str(ROOT), help="the gramopt checkout to run")
    ap.add_argument("--out", default=None, help="folder for rows.jsonl and the outputs")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process (safety only)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--paired", metavar="TREE,TREE[,...]", help="batch workers of these checkouts, item by item "
                    "in turn (``run_paired``; a tree listed twice is the A/A control)")
    args = ap.parse_args()
    if args.compare:
        compare(Path(args.compare[0]), Path(args.compare[1]))
        return
    files = items(Path(args.data), args.every, args.limit, args.skip)
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"optimize-cost-{time.strftime('%Y-%m-%d')}")
    out.mkdir(parents=True, exist_ok=True)
    if args.paired:
        run_paired([Path(t).resolve() for t in args.paired.split(",")], files, args.targets.split(",")[0], out)
        return
    tree = Path(args.tree).resolve()
    rows: list[dict] = []
    with open(out / "rows.jsonl", "a") as sink:
        def log(row: dict) -> None:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"{row['mode']:7} {row['target']:9} {row['item'][:44]:44} exit {row['code']}  wall "
                  f"{row['wall']:6.2f}  cpu {row['cpu']:6.2f}  peak {row['peak_mb']:6.0f} MB", file=sys.stderr)

        for target in args.targets.split(","):
            for mode in args.modes.split(","):
                if mode == "process":
                    for item in files:
                        r = {"item": item.name, "mode": "process", "target": target,
                             **run_process(tree, item, target, output_path(out, "process", target, item),
                                           args.timeout)}
                        rows.append(r)
                        log(r)
                elif mode == "batch":
                    rows += run_batch(tree, files, target, out, log)
                else:
                    raise SystemExit(f"unknown mode {mode!r}")
    print(f"{len(files)} items from {args.data}, gramopt from {tree}")
    print("\n".join(HEADER + table(rows, tree.name)))


if __name__ == "__main__":
    main()
