"""Issue 13's hostile-input reproductions, each run as a user runs it: exit code, wall time,
peak resident memory, and the first line of stderr. Prints a markdown table.

    python benchmarks/hostile_inputs.py [--quick]      (--quick: 8,000 words instead of 50,000)

Grammars are generated into a temporary folder; the JSON grammar is tests/data's vendored
copy of llama.cpp's json.gbnf.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON = ROOT / "tests" / "data" / "gbnf" / "llamacpp__json.gbnf"


def words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))))
    return sorted(out)


def chain(n: int) -> str:
    lines = ["root ::= r0"] + [f'r{i} ::= "x{i}" r{i + 1} | "y"' for i in range(n - 1)] + [f'r{n - 1} ::= "z"']
    return "\n".join(lines) + "\n"


def gramopt(*argv) -> tuple[int, float, float, float, str]:
    """(exit code, wall seconds, CPU seconds, peak MB of the child, first stderr line)."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "gramopt", *map(str, argv)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)  # reaped here, so its own peak memory is known
    p.returncode = rc = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t
    first = next((ln for ln in err.splitlines() if ln.strip()), "")
    return rc, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, first[:110]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="gramopt-hostile-"))
    files = {
        "rep.gbnf": 'root ::= "a"{0,100000000}\n',
        "nest.gbnf": 'root ::= ((("a"{0,1000}){0,1000}){0,1000})\n',
        "alt8000.gbnf": "root ::= " + " | ".join(f'"{w}"' for w in words(8000)) + "\n",
        "chain150.gbnf": chain(150),
        "chain1000.gbnf": chain(1000),
        "empty.gbnf": 'root ::= "a" root\n',
    }
    if not args.quick:
        files["alt50000.gbnf"] = "root ::= " + " | ".join(f'"{w}"' for w in words(50_000)) + "\n"
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    (d / "bom.gbnf").write_bytes(b'\xef\xbb\xbfroot ::= "a" | "b"\n')
    (d / "latin.cfg").write_bytes('S -> "caf\xe9" | "na\xefve" S\n'.encode("latin-1"))
    (d / "bad.gbnf").write_text(JSON.read_text(encoding="utf-8").replace('"null"', '"nul"'), encoding="utf-8")
    (d / "x.gbnf").write_text('root ::= "a" | "b"\n', encoding="utf-8")
    cases = [
        ('"a"{0,100000000} optimize', ["optimize", d / "rep.gbnf", "-o", d / "o1.gbnf"]),
        ('((("a"{0,1000}){0,1000}){0,1000}) optimize', ["optimize", d / "nest.gbnf", "-o", d / "o2.gbnf"]),
        ('((("a"{0,1000}){0,1000}){0,1000}) verify', ["verify", d / "nest.gbnf", d / "nest.gbnf"]),
        ("8,000 alternatives optimize", ["optimize", d / "alt8000.gbnf", "-o", d / "o3.gbnf"]),
        *([("50,000 alternatives optimize", ["optimize", d / "alt50000.gbnf", "-o", d / "o4.gbnf"])]
          if not args.quick else []),
        ("chain of 150 rules optimize", ["optimize", d / "chain150.gbnf", "-o", d / "o5.gbnf"]),
        ("chain of 1,000 rules optimize", ["optimize", d / "chain1000.gbnf", "-o", d / "o6.gbnf"]),
        ("  ... its output read back (analyze)", ["analyze", d / "o6.gbnf"]),
        ("Latin-1 .cfg optimize", ["optimize", d / "latin.cfg", "-o", d / "o7.cfg"]),
        ("UTF-8 BOM optimize", ["optimize", d / "bom.gbnf", "-o", d / "o8.gbnf"]),
        ('empty language (root ::= "a" root)', ["optimize", d / "empty.gbnf", "-o", d / "o9.gbnf"]),
        ("  ... with --strict", ["optimize", d / "empty.gbnf", "-o", d / "o10.gbnf", "--strict"]),
        ('json "null"->"nul" verify --decode --steps 64 --seeds 2',
         ["verify", JSON, d / "bad.gbnf", "--decode", "--steps", "64", "--seeds", "2"]),
        ("convert X -o X", ["convert", d / "x.gbnf", "-o", d / "x.gbnf"]),
        ("optimize -o missing/dir/out", ["optimize", d / "x.gbnf", "-o", d / "missing" / "out.gbnf"]),
        ("convert -o /dev/full", ["convert", d / "x.gbnf", "-o", "/dev/full"]),
    ]
    print("| reproduction | exit | wall s | CPU s | peak MB | stderr (first line) |")
    print("|---|---|---|---|---|---|")
    for label, argv in cases:
        rc, secs, cpu, peak, first = gramopt(*argv)
        first = first.replace(str(d) + "/", "").replace(str(d), "").replace("|", "\\|")
        print(f"| {label} | {rc} | {secs:.1f} | {cpu:.1f} | {peak:.0f} | {first} |", flush=True)
    print(f"\n/dev/full is still a character device: {Path('/dev/full').is_char_device()}")


if __name__ == "__main__":
    main()
