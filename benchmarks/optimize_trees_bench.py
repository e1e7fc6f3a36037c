"""``gramopt optimize`` on large grammars under two source trees, side by side: wall, CPU,
peak memory, and whether the output bytes are the same.

    python benchmarks/optimize_trees_bench.py --trees BEFORE,AFTER [--reps 1]
                                              [--cases commandtalk-earley,enum50k-generic]

Each measurement is one ``python -m gramopt.cli optimize CASE -o OUT`` child with
``PYTHONPATH`` set to the tree (the command a user runs: reading, every pass, verification,
writing). Its CPU (user + system) and peak resident memory are its own, read with ``wait4``
from this small parent (a child forked from a large process would count the parent's pages
as its own). The trees alternate within each repetition, so the machine's load falls on
both alike; the table prints the median per case and tree. Cases:

- ``commandtalk-earley``: NLTK's commandtalk (4,721 rules) with ``--target earley`` (leaf
  rules inlined into every user, then the clean-up rounds over the grown grammar);
- ``enum50k-generic``: ``root ::= "w0" | "w1" | … | "w49999"`` with ``--target generic``
  (factoring into a trie; the rule is over the e-graph's limits);
- ``commandtalk-generic``: commandtalk with ``--target generic``.

Figures, not asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDTALK = "corpus/cfg/nltk__commandtalk.cfg"


def _enum(n: int, folder: str) -> str:
    path = os.path.join(folder, f"enum{n}.gbnf")
    with open(path, "w", encoding="utf-8") as f:
        f.write("root ::= " + " | ".join(f'"w{i}"' for i in range(n)) + "\n")
    return path


def cases(folder: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (input path relative to a tree, or absolute; options)"""
    return {"commandtalk-earley": (COMMANDTALK, ["--target", "earley"]),
            "commandtalk-generic": (COMMANDTALK, ["--target", "generic"]),
            "enum50k-generic": (_enum(50_000, folder), ["--target", "generic"])}


def measure(tree: str, src: str, options: list[str], out: str) -> dict:
    """One child: wall seconds, CPU seconds, peak RSS (MB), exit status, output bytes."""
    env = dict(os.environ, PYTHONPATH=tree)
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gramopt.cli", "optimize", src, "-o", out, "-q", *options],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode("utf-8", "replace")
    proc.stderr.close()
    text = Path(out).read_bytes() if os.path.exists(out) else b""
    stop = next((ln for ln in stderr.splitlines() if "verification stopped" in ln), "")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "rc": proc.returncode, "out": text, "verify_spent": bool(stop)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", required=True, help="BEFORE,AFTER: source trees of gramopt")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--cases", default="commandtalk-earley,enum50k-generic")
    args = ap.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        known = cases(tmp)
        names = args.cases.split(",")
        rows: dict[tuple[str, str], list[dict]] = {}
        for rep in range(args.reps):
            for name in names:
                src, options = known[name]
                for i, tree in enumerate(trees if rep % 2 == 0 else trees[::-1]):
                    out = os.path.join(tmp, f"{name}.{trees.index(tree)}.{rep}{Path(src).suffix}")
                    r = measure(tree, src, options, out)
                    rows.setdefault((name, tree), []).append(r)
                    print(f"  {name} {Path(tree).name} rep {rep}: wall {r['wall']:.1f} s, cpu {r['cpu']:.1f} s, "
                          f"rss {r['rss_mb']:.0f} MB, rc {r['rc']}", file=sys.stderr, flush=True)
        print(f"| case | tree | wall s | CPU s | peak RSS MB | exit | verification budget spent |")
        print("|---|---|---:|---:|---:|---:|---|")
        for name in names:
            for tree in trees:
                rs = rows[(name, tree)]
                med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
                print(f"| {name} | {Path(tree).name} | {med('wall'):.1f} | {med('cpu'):.1f} | {med('rss_mb'):.0f} | "
                      f"{rs[0]['rc']} | {'yes' if rs[0]['verify_spent'] else 'no'} |")
        for name in names:
            outs = {r["out"] for tree in trees for r in rows[(name, tree)]}
            b, a = (statistics.median(r["cpu"] for r in rows[(name, t)]) for t in trees)
            print(f"{name}: output bytes {'identical' if len(outs) == 1 else 'DIFFER'} over "
                  f"{sum(len(rows[(name, t)]) for t in trees)} runs; CPU {b:.1f} -> {a:.1f} s ({b / a:.2f}x)")


if __name__ == "__main__":
    main()
