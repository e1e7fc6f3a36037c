"""Peak resident memory of one ``gramopt optimize`` per stage (the main thread's ``gramopt.stage``).

    python benchmarks/stage_memory.py SCHEMA_OR_GRAMMAR [optimize options…] [--json FILE]
    python benchmarks/stage_memory.py --worker FILE [FILE …] [--timeline]   one batch worker, item by item

Runs ``gramopt optimize ARGS`` in this process, with a thread reading ``VmRSS`` every 20 ms
and filing it under the stage the main thread is in (reading, each pass, the engine check,
verification, writing): the largest reading per stage, in the order the stages came, and the
process's high-water mark (``VmHWM``). ``--worker``: the files optimized in turn by one process
through ``gramopt.cli.batch.optimize_item`` (what a batch's worker runs; default target), a line
per item with its resident memory before it and each stage's peak (a stage named after a pass
is also each round of the passes' fixpoint and the judge's repairs replaying it: ``--timeline``
keeps each run of a stage apart, in order). Linux only (``/proc/self/status``). Where the peak
sits says which stage to make lighter: WashingtonPost wp_26's, in a worker, was the lowering of
one 2,110-node rule in the passes' second round (``egraph.lower.MAX_TERM_NODES``).
"""

from __future__ import annotations

import json
import runpy
import sys
import threading
import time


def status_mb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) // 1024
    return 0


def watched(thread: threading.Thread, peaks: dict, done: threading.Event,
            timeline: list | None = None) -> threading.Thread:
    """A daemon filing ``VmRSS`` every 20 ms under ``thread``'s stage in ``peaks`` and, given
    ``timeline``, as ``[stage, peak MB, readings]`` per run of readings in one stage, in order."""
    from gramopt import stage

    def watch() -> None:
        while not done.is_set():
            name, mb = stage.current(thread), status_mb("VmRSS:")
            peaks[name] = max(peaks.get(name, 0), mb)
            if timeline is not None:
                if timeline and timeline[-1][0] == name:
                    timeline[-1][1] = max(timeline[-1][1], mb)
                    timeline[-1][2] += 1
                else:
                    timeline.append([name, mb, 1])
            time.sleep(0.02)
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    return w


def worker(files: list[str], timelines: bool = False) -> int:
    """``--worker``: one process optimizes ``files`` in turn; per item the memory before it and
    each stage's peak (MB); ``--timeline``: each run of one stage in order instead (the judge's
    repairs replay the passes: there a pass's name comes again after the engine check)."""
    import os
    import tempfile
    from dataclasses import asdict
    from gramopt.cli.batch import batch_items, optimize_item
    peaks: dict[str, int] = {}
    timeline: list = []
    done = threading.Event()
    watched(threading.main_thread(), peaks, done, timeline)
    print("| item | before MB | stage peaks MB |\n|---|---:|---|")
    with tempfile.TemporaryDirectory() as out:
        for f in files:
            item = batch_items(f, out, target="portable")[0]
            before = status_mb("VmRSS:")
            peaks.clear()
            timeline.clear()
            optimize_item(asdict(item), {"target": "portable"}, None)
            time.sleep(0.05)
            if timelines:  # each run with its length (readings are 20 ms apart)
                stages = ", ".join(f"{k} {v:,} ({n * 0.02:.2f} s)" for k, v, n in timeline if k != "starting")
            else:
                stages = ", ".join(f"{k} {v:,}" for k, v in peaks.items() if k != "starting")
            print(f"| {os.path.basename(f)} | {before:,} | {stages} |", flush=True)
    done.set()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        sys.setrecursionlimit(100_000)
        files = [a for a in argv[1:] if a != "--timeline"]
        return worker(files, timelines="--timeline" in argv)
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    sys.setrecursionlimit(100_000)
    peaks: dict[str, int] = {}
    done = threading.Event()
    watcher = watched(threading.main_thread(), peaks, done)
    t0 = time.perf_counter()
    sys.argv = ["gramopt", "optimize", *argv]
    code = 0
    try:
        runpy.run_module("gramopt", run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    done.set()
    watcher.join()
    peaks.pop("starting", None)  # before the command and after it
    row = {"args": argv, "exit": code, "seconds": round(time.perf_counter() - t0, 2),
           "stages_mb": peaks, "peak_mb": status_mb("VmHWM:")}
    print("| stage | peak RSS MB |\n|---|---:|")
    for name, mb in peaks.items():
        print(f"| {name} | {mb:,} |")
    print(f"| (process high-water mark) | {row['peak_mb']:,} |")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(row, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
