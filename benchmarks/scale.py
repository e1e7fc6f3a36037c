"""Wall time, CPU time and peak memory of ``gramopt analyze`` and ``gramopt optimize`` on
grammars of N rules, for the default target and ``--target xgrammar``.

    python benchmarks/scale.py [--sizes 1000,5000,10000,92000] [--targets default,xgrammar]
                               [--commands analyze,optimize] [--timeout 900] [--keep DIR]
                               [--extra ARG ...] [--shape tree|chain|nested]

The grammars are ``many_rules.many_rules(N)`` (``benchmarks/many_rules.py``: N small rules in
a binary tree, as in machine-written grammars; 92,000 rules is the issue's 6 MB file;
``--shape nested``: N nested optional groups, the 10,000-level chain of issue 24). Each
command runs in a child process (``python -m gramopt``) started from this parent, which
imports nothing of gramopt, so the child's figures are its own: CPU time (user + system)
and peak resident set come from ``wait4``'s rusage (``ru_maxrss``: the kernel's figure,
not a sample); the machine's 1-minute load average as the run ends is printed beside them
(wall time on a shared machine is mostly waiting for a core). ``analyze`` does not depend on the target; it runs once per size. A run past
``--timeout`` is killed and reported with exit -9. Prints one Markdown row per run; the
issue's bounds (24: 10,000 rules analyzed and optimized in < 20 s and < 1 GB, 92,000 in
< 3 minutes) are marked ``over`` where a run misses them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from many_rules import many_rules, run  # noqa: E402  (a text generator and a child runner: import nothing of gramopt)

BOUNDS = {10000: (20.0, 1024.0), 92000: (180.0, None)}
"""Issue 24's bounds per size: (seconds, peak MB or None)."""


def verdict(n: int, cpu: float, peak: float) -> str:
    """``over`` where a run misses issue 24's bound for its size (CPU seconds: the machine is
    shared, so wall time also counts other jobs), else empty."""
    seconds, mb = BOUNDS.get(n, (None, None))
    if seconds is not None and cpu >= seconds or mb is not None and peak >= mb:
        return "over"
    return ""


def commands(path: str, targets: list[str], which: list[str], extra: list[str]) -> list[tuple[str, list[str]]]:
    """(label, argv) of every run for one grammar file."""
    out = []
    if "analyze" in which:
        out.append(("analyze", ["analyze", path]))
    if "optimize" in which:
        for t in targets:
            target = [] if t == "default" else ["--target", t]
            out.append((f"optimize {t}", ["optimize", path, "-o", f"{path}.{t}.out", *target, *extra]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,10000,92000")
    ap.add_argument("--targets", default="default,xgrammar")
    ap.add_argument("--commands", default="analyze,optimize")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--shape", choices=("tree", "chain", "nested"), default="tree")
    ap.add_argument("--keep", default=None, help="write the generated grammars (and outputs) here")
    ap.add_argument("--extra", action="append", default=[], help="one more argument for optimize (repeatable)")
    args = ap.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="gramopt-scale-")
    os.makedirs(folder, exist_ok=True)
    print("| N rules | bytes | stage | exit | wall s | CPU s | peak MB | load 1-min | |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        path = os.path.join(folder, f"{args.shape}-{n}.gbnf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(many_rules(n, args.shape))
        for label, cmd in commands(path, args.targets.split(","), args.commands.split(","), args.extra):
            code, wall, cpu, peak = run(cmd, args.timeout)
            print(f"| {n} | {os.path.getsize(path)} | {label} | {code} | {wall:.1f} | {cpu:.1f} | {peak:.0f} "
                  f"| {os.getloadavg()[0]:.1f} | {verdict(n, cpu, peak)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
