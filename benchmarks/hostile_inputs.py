"""Issue 13's hostile-input reproductions, each run as a user runs it: exit code, wall time,
CPU time and peak resident memory of the command, and the first line of stderr, beside
the outcome a results file records for the same reproduction. Prints a markdown table.

    python benchmarks/hostile_inputs.py [--quick] [--before FILE] [--json OUT]

--quick: 8,000 words instead of 50,000. --before: the results file of the "before" column
(default ``benchmarks/results/hostile-before-issue13.json``, what issue 13 reported on main
before the fixes); it must name every reproduction and nothing else, or the run stops
(exit 2) before starting. --json: this run's exit codes written in the same format, so a
later run can show them as its "before" column.

Grammars are generated into a temporary folder; the JSON grammar is tests/data's vendored
copy of llama.cpp's json.gbnf. Timings are as noisy as the machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import stat
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


def gramopt(*argv, interrupt_when: Path | None = None, prefer: str = "") -> tuple[int, float, float, float, str]:
    """(exit code, wall seconds, CPU seconds, peak MB of the command, first stderr line, or
    the first that contains ``prefer``). With ``interrupt_when``: Ctrl-C (SIGINT to its
    process group) once that file exists."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "gramopt", *map(str, argv)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
                         # a job started in the background of a non-interactive shell inherits
                         # SIGINT ignored, and gramopt (as any program) keeps it so: restore it
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    if interrupt_when is not None:
        while not interrupt_when.exists() and p.poll() is None:
            time.sleep(0.05)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)  # reaped here, so its own peak memory is known
    p.returncode = rc = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[")]
    first = next((ln for ln in lines if "error" in ln or "warning" in ln or "note" in ln or "interrupted" in ln),
                 lines[0] if lines else "")
    first = next((ln for ln in lines if prefer and prefer in ln), first)
    if ": warning: " in first and ".gramopt-cache" in first:  # a cache entry's long path
        first = "…/.gramopt-cache/…: warning: " + first.split(": warning: ", 1)[1]
    return rc, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, first[:120]


BEFORE = ROOT / "benchmarks" / "results" / "hostile-before-issue13.json"


def read_before(path: Path, keys) -> dict:
    """The results file at ``path`` ({"column", "rows": {reproduction: outcome}}); raises
    ValueError unless its rows name exactly ``keys``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = data["rows"]
    missing, unknown = [k for k in keys if k not in rows], sorted(set(rows) - set(keys))
    if missing or unknown:
        raise ValueError(f"{path}: the results file and the reproductions differ: "
                         f"missing {missing}, unknown {unknown}")
    return data


def cases(d: Path, quick: bool) -> list:
    """(key, label, argv or a function making it) for each reproduction; files under ``d``
    (written by ``write_inputs``). A key's outcome in a results file goes on its first row."""
    folder, slow = d / "in", d / "slow"
    big = d / ("alt50000.gbnf" if not quick else "alt8000.gbnf")

    def bad_cache() -> list:
        """A first run fills the cache; its entry is replaced by JSON of the wrong shape."""
        gramopt("optimize", folder, "-o", d / "cached", "-q", "-j", "1")
        for p in (d / "cached" / ".gramopt-cache").rglob("*"):
            if p.is_file():
                p.write_text("[1, 2, 3]", encoding="utf-8")
        return ["optimize", folder, "-o", d / "cached", "-q", "-j", "1"]

    return [
        ("rep", '"a"{0,100000000} optimize', ["optimize", d / "rep.gbnf", "-o", d / "o1.gbnf"]),
        ("nest1000-opt", '((("a"{0,1000}){0,1000}){0,1000}) optimize', ["optimize", d / "nest.gbnf", "-o", d / "o2.gbnf"]),
        ("nest1000-verify", '((("a"{0,1000}){0,1000}){0,1000}) verify', ["verify", d / "nest.gbnf", d / "nest.gbnf"]),
        ("nest60-opt", '((("a"{0,60}){0,60}){0,60}) optimize', ["optimize", d / "nest60.gbnf", "-o", d / "o2b.gbnf"]),
        ("nest60-verify", '((("a"{0,60}){0,60}){0,60}) verify vs its optimized form',
         ["verify", d / "nest60.gbnf", d / "nest60opt.gbnf"]),
        ("alt8000", "8,000 alternatives optimize", ["optimize", d / "alt8000.gbnf", "-o", d / "o3.gbnf"]),
        *([("alt50000", "50,000 alternatives optimize", ["optimize", d / "alt50000.gbnf", "-o", d / "o4.gbnf"])]
          if not quick else []),
        *([("alt50000-generic", "50,000 alternatives optimize --target generic (factoring)",
            ["optimize", d / "alt50000.gbnf", "-o", d / "o4g.gbnf", "--target", "generic"])]
          if not quick else []),
        ("cleanup-work", f"{big.stem} optimize --target generic --max-cleanup-work 1000000",
         ["optimize", big, "-o", d / "o4c.gbnf", "--target", "generic", "--max-cleanup-work", "1000000"]),
        ("inline-work", "chain of 1,000 rules optimize --target generic --max-inline-work 2000",
         ["optimize", d / "chain1000.gbnf", "-o", d / "o6i.gbnf", "--target", "generic", "--max-inline-work", "2000"]),
        # generic: the default target keeps an enum as written in ~2 s and < 100 MB, so the
        # bounds are shown where the work is (factoring, then verifying the trie)
        ("max-seconds", f"{big.stem} optimize --target generic --max-seconds 2",
         ["optimize", big, "-o", d / "o4s.gbnf", "--target", "generic", "--max-seconds", "2"]),
        ("max-memory", f"{big.stem} optimize --target generic --max-memory 100M",
         ["optimize", big, "-o", d / "o4m.gbnf", "--target", "generic", "--max-memory", "100M"]),
        ("neg-limit", "optimize --max-nodes -1", ["optimize", d / "x.gbnf", "-o", d / "o4n.gbnf", "--max-nodes", "-1"]),
        ("chain120-back", "chain of 120 rules: optimize, then read back", ["optimize", d / "chain120.gbnf", "-o", d / "o5a.gbnf"]),
        ("chain120-back", "  ... its output read back (analyze)", ["analyze", d / "o5a.gbnf"]),
        ("chain150", "chain of 150 rules optimize", ["optimize", d / "chain150.gbnf", "-o", d / "o5.gbnf"]),
        ("chain1000", "chain of 1,000 rules optimize", ["optimize", d / "chain1000.gbnf", "-o", d / "o6.gbnf"]),
        ("chain1000-back", "  ... its output read back (analyze)", ["analyze", d / "o6.gbnf"]),
        ("latin", "Latin-1 .cfg optimize", ["optimize", d / "latin.cfg", "-o", d / "o7.cfg"]),
        ("bom", "UTF-8 BOM optimize", ["optimize", d / "bom.gbnf", "-o", d / "o8.gbnf"]),
        ("empty", 'empty language (root ::= "a" root)', ["optimize", d / "empty.gbnf", "-o", d / "o9.gbnf"]),
        ("empty-strict", "  ... with --strict", ["optimize", d / "empty.gbnf", "-o", d / "o10.gbnf", "--strict"]),
        ("decode", 'json "null"->"nul" verify --decode --steps 64 --seeds 2',
         ["verify", JSON, d / "bad.gbnf", "--decode", "--steps", "64", "--seeds", "2", "--no-measure"]),
        ("convert-self", "convert X -o X", ["convert", d / "x.gbnf", "-o", d / "x.gbnf"]),
        ("missing-dir", "optimize -o missing/dir/out", ["optimize", d / "x.gbnf", "-o", d / "missing" / "out.gbnf"]),
        ("dev-full", "convert -o /dev/full", ["convert", d / "x.gbnf", "-o", "/dev/full"]),
        ("folder-same", "folder: optimize DIR -o DIR", ["optimize", folder, "-o", folder, "-q"]),
        ("folder-inside", "folder: optimize DIR -o DIR/out", ["optimize", folder, "-o", folder / "out", "-q"]),
        ("folder-badcache", "folder: rerun over a wrong-shaped cache entry", bad_cache),
        ("folder-ctrl-c", "folder: Ctrl-C once the first output is written (--target generic: verified work)",
         ["optimize", slow, "-o", d / "slowout", "-j", "2", "-q", "--target", "generic"]),
    ]


def write_inputs(d: Path, quick: bool) -> None:
    """The reproductions' input files, under ``d``."""
    n_words = 8000 if quick else 50_000
    files = {
        "rep.gbnf": 'root ::= "a"{0,100000000}\n',
        "nest.gbnf": 'root ::= ((("a"{0,1000}){0,1000}){0,1000})\n',
        "nest60.gbnf": 'root ::= ((("a"{0,60}){0,60}){0,60})\n',
        "nest60opt.gbnf": 'root ::= (("a"{0,60}){60}){60}\n',
        "alt8000.gbnf": "root ::= " + " | ".join(f'"{w}"' for w in words(8000)) + "\n",
        "chain120.gbnf": chain(120),
        "chain150.gbnf": chain(150),
        "chain1000.gbnf": chain(1000),
        "empty.gbnf": 'root ::= "a" root\n',
    }
    if not quick:
        files["alt50000.gbnf"] = "root ::= " + " | ".join(f'"{w}"' for w in words(50_000)) + "\n"
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    (d / "bom.gbnf").write_bytes(b'\xef\xbb\xbfroot ::= "a" | "b"\n')
    (d / "latin.cfg").write_bytes('S -> "caf\xe9" | "na\xefve" S\n'.encode("latin-1"))
    (d / "bad.gbnf").write_text(JSON.read_text(encoding="utf-8").replace('"null"', '"nul"'), encoding="utf-8")
    (d / "x.gbnf").write_text('root ::= "a" | "b"\n', encoding="utf-8")
    folder = d / "in"
    folder.mkdir()
    (folder / "a.gbnf").write_text('root ::= "ab" | "ac"\n', encoding="utf-8")
    (folder / "b.gbnf").write_text('root ::= "x" "y" | "x" "z"\n', encoding="utf-8")
    slow = d / "slow"
    slow.mkdir()
    (slow / "a0.gbnf").write_text('root ::= "a" | "b"\n', encoding="utf-8")
    for k in range(4):
        (slow / f"b{k}.gbnf").write_text(f'root ::= ((("a{k}"{{0,60}}){{0,60}}){{0,60}})\n', encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before", type=Path, default=BEFORE, help="results file of the 'before' column")
    ap.add_argument("--json", type=Path, default=None, help="write this run's exit codes as a results file")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="gramopt-hostile-"))
    todo = cases(d, args.quick)
    try:
        before = read_before(args.before, list(dict.fromkeys(k for k, _, _ in cases(d, False))))
    except (OSError, ValueError, KeyError) as e:
        shutil.rmtree(d, ignore_errors=True)
        print(f"hostile_inputs.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    write_inputs(d, args.quick)
    folder = d / "in"
    print(f"| reproduction | {before['column']} | exit now | wall s | CPU s | peak MB | stderr (first line) |")
    print("|---|---|---|---|---|---|---|")
    old_umask = os.umask(0o022)
    try:
        shown: set[str] = set()
        now: dict[str, list[str]] = {}
        for key, label, argv in todo:
            if callable(argv):
                argv = argv()
            watch = d / "slowout" / "a0.gbnf" if key == "folder-ctrl-c" else None
            prefer = {"cleanup-work": "pass cleanup", "inline-work": "pass inline"}.get(key, "")
            rc, secs, cpu, peak, first = gramopt(*argv, interrupt_when=watch, prefer=prefer)
            first = first.replace(str(d) + "/", "").replace(str(d), "").replace("|", "\\|")
            was = before["rows"][key] if key not in shown else ""
            shown.add(key)
            now.setdefault(key, []).append(str(rc))
            print(f"| {label} | {was} | {rc} | {secs:.1f} | {cpu:.1f} | {peak:.0f} | {first} |", flush=True)
        if (d / "slowout").exists():
            time.sleep(2)
            written = sorted(p.name for p in (d / "slowout").glob("*.gbnf"))
            print(f"\nCtrl-C: outputs on disk 2 s after the command ended: {written}")
    finally:
        os.umask(old_umask)
    if args.json is not None:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        at = rev.stdout.strip() or "?"
        run = {"source": f"benchmarks/hostile_inputs.py{' --quick' if args.quick else ''} at {at}",
               "column": f"exit at {at}", "rows": {k: ", ".join(v) for k, v in now.items()}}
        args.json.write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    print(f"/dev/full is still a character device: {Path('/dev/full').is_char_device()}")
    mode = stat.S_IMODE(os.stat(d / "o8.gbnf").st_mode) if (d / "o8.gbnf").exists() else None
    print(f"output mode under umask 022: {oct(mode) if mode is not None else 'no output'} (was 0o600)")
    unchanged = (folder / "a.gbnf").read_text(encoding="utf-8") == 'root ::= "ab" | "ac"\n'
    print(f"folder inputs unchanged: {unchanged}")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
