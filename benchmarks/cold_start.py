"""Cold start and verification cost of a gramopt tree: prints a markdown table.

    python benchmarks/cold_start.py [--tree NAME=PATH ...] [--decode json,arithmetic,chess,c]
                                    [--steps 64] [--seeds 2] [--json OUT.json] [--merge A.json ...]

Per tree (a checkout's root; default ``after=`` this checkout), each in a fresh
interpreter with ``PYTHONPATH`` = the tree:

* **cold first mask**: an empty temporary kernel cache (``GRAMOPT_CACHE`` and
  ``NUMBA_CACHE_DIR`` both pointed at it, so a tree that caches in-tree with numba's own
  locator starts empty too), then import, ``Vocab.qwen()``, ``Matcher`` on the JSON grammar
  and its first mask: wall and CPU seconds (the child's user + system time);
* **warm first mask**: the same in a second process over the cache the first one filled;
* **verify --decode**: for each grammar G of ``--decode``, the original
  ``corpus/gbnf/llamacpp__G.gbnf`` against ``gramopt optimize`` (this checkout) of its
  ``obfuscate(seed=0)`` variant, ``--steps`` × ``--seeds``, wall and CPU; one short untimed
  verify first compiles the kernels the decoding loop uses, so the figures are warm.

A tree under test is never written into when its cache is redirected: copy a checkout
(``git archive HEAD | tar -x -C /tmp/x``) rather than pointing at a shared one. Timings
on a shared machine vary with its load: the load average is printed with each table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GRAMOPT_CORPUS", HERE / "corpus"))

FIRST_MASK = """
import json, sys, time
t0 = time.perf_counter()
from gramopt.formats import read
from gramopt.runtime import Matcher, Vocab, allocate_token_bitmask
t1 = time.perf_counter()
g = read(sys.argv[1]); v = Vocab.qwen()
t2 = time.perf_counter()
m = Matcher(g, v)
t3 = time.perf_counter()
bm = allocate_token_bitmask(1, len(v)); m.fill_next_token_bitmask(bm)
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "vocab_s": t2 - t1, "matcher_s": t3 - t2, "mask_s": t4 - t3,
                  "allowed": int(sum(bin(x & 0xFFFFFFFF).count("1") for x in bm[0].tolist()))}))
"""


def run_child(args: list[str], tree: Path, cache: str | None, timeout: int) -> dict:
    """Run ``python ARGS`` with ``tree`` first on the path; wall, CPU (user + system of the
    child), return code, stdout and the last line of stderr."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    if cache is not None:
        env.update(GRAMOPT_CACHE=cache, NUMBA_CACHE_DIR=cache)
    before = os.times()
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, *args], cwd=str(tree), env=env, capture_output=True,
                           text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = "timeout", "", ""
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall_s": wall, "cpu_s": cpu, "rc": rc, "stdout": out,
            "stderr_tail": err.strip().splitlines()[-1] if err.strip() else ""}


def optimized_variant(name: str, folder: Path) -> tuple[Path, Path]:
    """(original, gramopt's optimization of its obfuscate(seed=0) variant), made with this checkout."""
    sys.path.insert(0, str(HERE))
    from gramopt.bench.obfuscate import obfuscate
    from gramopt.formats import read, write
    orig = CORPUS / "gbnf" / f"llamacpp__{name}.gbnf"
    obf, opt = folder / f"{name}.obf.gbnf", folder / f"{name}.opt.gbnf"
    if not opt.exists():
        obf.write_text(write(obfuscate(read(str(orig)), seed=0), "gbnf"))
        r = run_child(["-m", "gramopt", "optimize", str(obf), "-o", str(opt)], HERE, None, 1800)
        if r["rc"] != 0:
            raise SystemExit(f"optimize {obf} failed: {r['stderr_tail']}")
    return orig, opt


def measure_tree(name: str, tree: Path, grammars: list[str], steps: int, seeds: int, work: Path,
                 timeout: int) -> dict:
    json_gbnf = str(CORPUS / "gbnf" / "llamacpp__json.gbnf")
    cache = tempfile.mkdtemp(prefix=f"gramopt-cold-{name}-")
    out: dict = {"tree": str(tree)}
    for phase in ("cold", "warm"):
        r = run_child(["-c", FIRST_MASK, json_gbnf], tree, cache, timeout)
        r["phases"] = json.loads(r["stdout"]) if r["rc"] == 0 else {}
        out[phase] = r
        print(f"{name} {phase}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, {r['phases']}", file=sys.stderr)
    out["cache_outside_package"] = not any(p.suffix == ".nbi" for p in (tree / "gramopt").rglob("*"))
    decode = {}
    if grammars:
        orig, opt = optimized_variant("json", work)
        run_child(["-m", "gramopt", "verify", str(orig), str(opt), "--decode", "--steps", "2", "--seeds", "1",
                   "-q", "--no-measure"], tree, cache, timeout)  # compile the decoding loop's kernels
    for g in grammars:
        orig, opt = optimized_variant(g, work)
        r = run_child(["-m", "gramopt", "verify", str(orig), str(opt), "--decode", "--steps", str(steps),
                       "--seeds", str(seeds), "-q"], tree, cache, timeout)
        decode[g] = {k: r[k] for k in ("wall_s", "cpu_s", "rc", "stderr_tail")}
        decode[g]["result"] = next((ln for ln in r["stdout"].splitlines() if ln.startswith("result:")), "")
        print(f"{name} verify {g}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, rc {r['rc']}", file=sys.stderr)
    out["decode"] = decode
    return out


def table(results: dict, settings: dict) -> str:
    names = list(results)
    lines = [f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); "
             f"verify --decode: {settings.get('steps')} steps × {settings.get('seeds')} seeds", "",
             "| measure | " + " | ".join(f"{n} wall s | {n} CPU s" for n in names) + " |",
             "|---|" + "---:|---:|" * len(names)]

    def row(label, get):
        cells = []
        for n in names:
            r = get(results[n])
            if r is None:
                cells += ["—", "—"]
            elif r.get("rc") not in (0, None):
                cells += [f"{r['wall_s']:.1f} (rc {r['rc']})", f"{r['cpu_s']:.1f}"]
            else:
                cells += [f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("first mask, empty cache (whole process: import, Qwen vocab, Matcher on json, 1 mask)", lambda r: r.get("cold"))
    row("first mask, second process (cache filled)", lambda r: r.get("warm"))
    for g in sorted({g for r in results.values() for g in r.get("decode", {})}):
        row(f"verify --decode {g}", lambda r, g=g: r.get("decode", {}).get(g))
    lines.append("")
    for n in names:
        ph = {k: results[n].get(k, {}).get("phases", {}) for k in ("cold", "warm")}
        for k, p in ph.items():
            if p:
                lines.append(f"- {n} {k}: import {p['import_s']:.1f} s, vocab {p['vocab_s']:.1f} s, Matcher "
                             f"{p['matcher_s']:.1f} s, first mask {p['mask_s']:.2f} s ({p['allowed']} tokens allowed)")
        lines.append(f"- {n}: kernel cache outside the package folder: {results[n].get('cache_outside_package')}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--decode", default="json,arithmetic,chess,c")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1800, help="per child process, seconds")
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--merge", nargs="*", help="print the table of earlier --json files instead")
    a = ap.parse_args(argv)
    settings = {"steps": a.steps, "seeds": a.seeds}
    if a.merge:
        results = {}
        for f in a.merge:
            data = json.loads(Path(f).read_text())
            results.update(data["results"])
            settings = data["settings"]
        print(table(results, settings))
        return 0
    trees = [t.split("=", 1) for t in a.tree] or [["after", str(HERE)]]
    grammars = [g for g in a.decode.split(",") if g]
    work = Path(tempfile.mkdtemp(prefix="gramopt-cold-grammars-"))
    results = {n: measure_tree(n, Path(p).resolve(), grammars, a.steps, a.seeds, work, a.timeout) for n, p in trees}
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": settings, "results": results}, indent=1))
    print(table(results, settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
