"""Peak memory and time of ``gramopt optimize`` per schema and target, each in its own process.

    python benchmarks/memory_bound.py [--data DIR] [--targets xgrammar,portable] [--limit-mb 2048]
                                      [--timeout 300] [--only GLOB] [--out results.tsv]

Each schema of the JSONSchemaBench/MaskBench sample (``benchmarks/data/jsonschemabench``) is
optimized, with verification, as ``gramopt optimize SCHEMA -o OUT --target T`` in a child
process, one at a time: forked from this process after it imported gramopt and xgrammar
(seconds per run saved; the child's resident set starts at this process's, ~200 MB, near a
fresh ``python -m gramopt`` would), or, with ``--spawn``, a fresh interpreter. The child's
peak resident set is read from ``wait4``'s rusage (``ru_maxrss``: the kernel's figure, not
a sample); a watch thread also reads its ``VmRSS`` every 50 ms and kills it past
``--limit-mb`` (reported as ``killed``), so a run never takes the machine down. A forked
child can inherit a lock that a thread of this process held (torch's and xgrammar's
imports start threads): one that uses no CPU for 20 s is killed and run again, spawned
(reported ``respawned``; its figures are the spawned run's). Prints one line per run (also appended to ``--out``) and,
per target, p50 / p95 / max of peak RSS and wall time, the exit codes, and the runs over
the issue's floor (1.5 GB).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "jsonschemabench"
FLOOR_MB = 1536


def rss_mb(pid: int) -> float:
    """The current resident set of ``pid`` in MB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


STUCK_SECONDS = 20  # a forked child that used no CPU this long is blocked on a lock a parent thread held


def cpu_ticks(pid: int) -> int:
    """User + system CPU ticks of ``pid`` so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def run_one(schema: Path, target: str, limit_mb: float, timeout: float, outdir: str,
            spawn: bool = False) -> dict:
    """One optimize run: exit code, peak RSS (MB), wall seconds, whether the watch killed it."""
    out = os.path.join(outdir, schema.stem + ".out")
    argv = ["optimize", str(schema), "-o", out, "--target", target]
    log = os.path.join(outdir, "stderr.txt")
    t0 = time.perf_counter()
    pid = _spawn(argv, log) if spawn else _fork(argv, log)
    killed: list[str] = []
    done = threading.Event()

    ticks = [cpu_ticks(pid), time.perf_counter()]

    def watch() -> None:
        while not done.is_set():
            now = cpu_ticks(pid)
            if now != ticks[0]:
                ticks[:] = [now, time.perf_counter()]
            why = "memory" if rss_mb(pid) > limit_mb else "time" if time.perf_counter() - t0 > timeout else \
                "stuck" if not spawn and time.perf_counter() - ticks[1] > STUCK_SECONDS else ""
            if why:
                killed.append(why)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, usage = os.wait4(pid, 0)
    done.set()
    wall = time.perf_counter() - t0
    watcher.join()
    with open(log, encoding="utf-8", errors="replace") as f:
        err = f.read().strip().splitlines()
    last = next((line for line in reversed(err) if "error" in line or "note" in line), "")
    return {"schema": schema.name, "target": target, "rc": os.waitstatus_to_exitcode(status),
            "rss_mb": usage.ru_maxrss / 1024, "seconds": wall, "killed": killed[0] if killed else "",
            "message": last[:160]}


def _spawn(argv: list[str], log: str) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log, "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "gramopt", *argv], stdout=subprocess.DEVNULL,
                                stderr=err, env=env, start_new_session=True).pid


def _fork(argv: list[str], log: str) -> int:
    """A child of this process (gramopt already imported) running the command line ``argv``."""
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        from gramopt.cli import main as gramopt_main
        code = gramopt_main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def preload() -> None:
    """Import what every run imports (the CLI, the schema converters' engine) once."""
    sys.path.insert(0, str(ROOT))
    import gramopt.cli  # noqa: F401
    import gramopt.passes  # noqa: F401
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        pass


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def summary(rows: list[dict]) -> str:
    lines = [f"{'target':10} {'runs':>5} {'rss p50':>8} {'p95':>8} {'max':>8} {'s p50':>7} {'p95':>7} "
             f"{'max':>7}  exits / killed / over {FLOOR_MB} MB"]
    for target in dict.fromkeys(r["target"] for r in rows):
        rs = [r for r in rows if r["target"] == target]
        mem, sec = [r["rss_mb"] for r in rs], [r["seconds"] for r in rs]
        exits: dict = {}
        for r in rs:
            exits[r["rc"]] = exits.get(r["rc"], 0) + 1
        over = [r["schema"] for r in rs if r["rss_mb"] > FLOOR_MB or r["killed"] not in ("", "respawned")]
        lines.append(f"{target:10} {len(rs):5} {quantile(mem, .5):8.0f} {quantile(mem, .95):8.0f} {max(mem):8.0f} "
                     f"{quantile(sec, .5):7.1f} {quantile(sec, .95):7.1f} {max(sec):7.1f}  "
                     f"{dict(sorted(exits.items()))} / {sum(1 for r in rs if r['killed'] in ('memory', 'time'))}"
                     f" / {len(over)}"
                     + (f" {over[:8]}" if over else ""))
    return "\n".join(lines)


def read_tsv(path: str) -> list[dict]:
    """The rows a run appended to ``--out`` (schema, target, rc, rss_mb, seconds, killed, message)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            rows.append({"schema": p[0], "target": p[1], "rc": int(p[2]), "rss_mb": float(p[3]),
                         "seconds": float(p[4]), "killed": p[5], "message": p[6] if len(p) > 6 else ""})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--targets", default="xgrammar,portable")
    ap.add_argument("--limit-mb", type=float, default=2048)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", default="*.json", help="glob of schema file names")
    ap.add_argument("--out", default=None, help="append one TSV line per run here")
    ap.add_argument("--spawn", action="store_true", help="a fresh interpreter per run (slower)")
    ap.add_argument("--summarize", default=None, help="only print the summary of a TSV written by --out")
    args = ap.parse_args(argv)
    if args.summarize:
        print(summary(read_tsv(args.summarize)))
        return 0
    if not args.spawn:
        preload()
    schemas = sorted(p for p in Path(args.data).glob("*.json") if fnmatch.fnmatch(p.name, args.only))
    rows = []
    with tempfile.TemporaryDirectory() as outdir:
        for target in args.targets.split(","):
            for schema in schemas:
                r = run_one(schema, target, args.limit_mb, args.timeout, outdir, args.spawn)
                if r["killed"] == "stuck":  # a fork inherited a held lock: that run again, fresh
                    r = run_one(schema, target, args.limit_mb, args.timeout, outdir, True)
                    r["killed"] = r["killed"] or "respawned"
                rows.append(r)
                line = "\t".join(str(r[k]) if not isinstance(r[k], float) else f"{r[k]:.1f}" for k in r)
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(line + "\n")
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
