"""Time and peak memory of ``gramopt analyze`` and ``gramopt optimize`` against the number of rules.

    python benchmarks/many_rules.py [--sizes 1000,5000,10000,92000] [--shape tree] [--target portable]
                                    [--commands analyze,optimize] [--timeout 600] [--keep DIR]

The grammars are generated (``many_rules``): N small rules in a tree — rule i references
rules 2i+1 and 2i+2 (when they exist) — each body a mix of literals, a character class, an
alternation, an optional and references, as in machine-written grammars (one rule per
schema property, per enum value, per keyword). ``--shape chain`` makes rule i reference
rule i+1 only (a derivation N rules deep); ``--shape nested`` is one rule of N nested
optional groups, ``root ::= "a" ("a" ("a" …)?)?`` (llama.cpp's converter writes a bounded
repetition so; the reader lifts it into about N/23 rules: ``tests/test_deep_nesting.py``). Each command runs in a child process
(``python -m gramopt``); its peak resident set comes from ``wait4``'s rusage. The figures
show whether the cost is near-linear in N (wall and CPU seconds: on a shared machine CPU carries
less of the others' load): the ratio of time per rule between sizes is
printed beside them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def many_rules(n: int, shape: str = "tree") -> str:
    """A GBNF grammar of ``n`` small rules, or of ``n`` nested groups (module docstring),
    deterministic in ``n``."""
    if shape == "nested":
        return 'root ::= "a" ' + '("a" ' * n + ")?" * n + "\n"
    lines = []
    for i in range(n):
        kids = [k for k in ((2 * i + 1, 2 * i + 2) if shape == "tree" else (i + 1,)) if k < n]
        word = f"w{i % 97}"
        alts = [f'"{word}" [0-9]', f'"k{i % 13}" ("-" | "+")?']
        if kids:
            inner = ' "," '.join(f"r{k}" for k in kids)
            alts.append(f'"(" {inner} ")"')
            alts.append(f'"[" r{kids[0]} "]"')
        lines.append(f"r{i} ::= " + " | ".join(alts))
    lines[0] = lines[0].replace("r0 ::=", "root ::=", 1)
    text = "\n".join(lines) + "\n"
    return text.replace(" r0 ", " root ").replace(" r0)", " root)")


def run(argv: list[str], timeout: float) -> tuple[int, float, float, float]:
    """(exit code, wall s, CPU s, peak RSS MB) of ``python -m gramopt ARGV`` in a child
    process (killed past ``timeout``: exit -9); CPU (user + system) and peak resident set are
    the child's own, from ``wait4``'s rusage."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gramopt", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    timer.cancel()
    return os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,10000")
    ap.add_argument("--shape", choices=("tree", "chain", "nested"), default="tree")
    ap.add_argument("--target", default="portable")
    ap.add_argument("--commands", default="analyze,optimize")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", default=None, help="write the generated grammars here")
    args = ap.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="many-rules-")
    os.makedirs(folder, exist_ok=True)
    print(f"{'command':9} {'rules':>7} {'bytes':>9} {'exit':>4} {'seconds':>8} {'CPU s':>8} {'peak MB':>8} "
          f"{'ms/rule':>8}")
    for n in (int(x) for x in args.sizes.split(",")):
        path = os.path.join(folder, f"{args.shape}-{n}.gbnf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(many_rules(n, args.shape))
        for command in args.commands.split(","):
            cmd = ["analyze", path] if command == "analyze" else \
                ["optimize", path, "-o", path + ".out", "--target", args.target]
            code, wall, cpu, peak = run(cmd, args.timeout)
            print(f"{command:9} {n:7} {os.path.getsize(path):9} {code:4} {wall:8.1f} {cpu:8.1f} {peak:8.0f} "
                  f"{1000 * wall / n:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
