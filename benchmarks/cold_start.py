"""Cold start and verification cost of a gramopt tree: prints a markdown table.

    python benchmarks/cold_start.py [--tree NAME=PATH ...] [--modes auto,compiled]
                                    [--decode json,arithmetic,chess,c] [--steps 64] [--seeds 2]
                                    [--json OUT.json] [--merge A.json ...]

Per tree (a checkout's root; default ``after=`` this checkout), each in a fresh
interpreter with ``PYTHONPATH`` = the tree:

* **cold first mask**, per kernel mode of ``--modes`` (``GRAMOPT_KERNELS``, runtime/jit.py;
  a tree without modes runs its own way once): an empty temporary kernel cache
  (``GRAMOPT_CACHE`` and ``NUMBA_CACHE_DIR`` both pointed at it, so a tree that caches
  in-tree with numba's own locator starts empty too), then import, ``Vocab.qwen()``,
  ``Matcher`` on the JSON grammar and its first mask: wall and CPU seconds of the process
  (user + system), and the phases (the first mask's time from the process's launch too,
  interpreter start included); then the next 16 masks along the grammar's first
  sample (Qwen tokens), timed in the same process: what a decoder gets while a new
  environment's kernels compile (``auto``: from the kernels' Python twins);
* **background compile** (``auto``): seconds from the cold process's start until the
  cache's ready stamp is written (and the CPU seconds the compiling process reports in it);
* **warm first mask**: the same script in a second process over the cache the first one
  (and its background compile) filled;
* **verify --decode**: for each grammar G of ``--decode``, the original
  ``corpus/gbnf/llamacpp__G.gbnf`` against ``gramopt optimize`` (this checkout) of its
  ``obfuscate(seed=0)`` variant, ``--steps`` × ``--seeds``, wall and CPU; one short untimed
  verify first compiles the kernels the decoding loop uses, so the figures are warm.

A tree under test is never written into when its cache is redirected: copy a checkout
(``git archive HEAD | tar -x -C /tmp/x``) rather than pointing at a shared one. Timings
on a shared machine vary with its load: each row shows the 1-minute load average when
its process started (CPU seconds move much less than wall seconds).
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
at_first_mask = time.time()
allowed = int(sum(bin(x & 0xFFFFFFFF).count("1") for x in bm[0].tolist()))
from gramopt.runtime.tokenize import Tokenizer
steps = []
for tok in Tokenizer.for_vocab(v).encode(open(sys.argv[2]).read())[:16]:
    if not m.accept_token(tok):
        break
    t = time.perf_counter(); m.fill_next_token_bitmask(bm); steps.append(time.perf_counter() - t)
print(json.dumps({"import_s": t1 - t0, "vocab_s": t2 - t1, "matcher_s": t3 - t2, "mask_s": t4 - t3,
                  "allowed": allowed, "steps": len(steps), "at_first_mask": at_first_mask,
                  "steps_s": sum(steps), "slowest_step_s": max(steps, default=0.0)}))
"""


def run_child(args: list[str], tree: Path, cache: str | None, timeout: int, env_extra: dict | None = None) -> dict:
    """Run ``python ARGS`` with ``tree`` first on the path; wall, CPU (user + system of the
    child), return code, stdout, the last line of stderr and the load average at its start."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1", **(env_extra or {}))
    if cache is not None:
        env.update(GRAMOPT_CACHE=cache, NUMBA_CACHE_DIR=cache)
    load = os.getloadavg()[0]
    before = os.times()
    launched = time.time()
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
    return {"wall_s": wall, "cpu_s": cpu, "rc": rc, "stdout": out, "load": load, "started": t, "launched": launched,
            "stderr_tail": err.strip().splitlines()[-1] if err.strip() else ""}


def wait_background(cache: str, started: float, timeout: int) -> dict | None:
    """After a cold ``auto`` process: wait until its background compile has written the
    ready stamp and released its lock; seconds since that process started, and what the
    stamp says (None: no background compile was started)."""
    folder = Path(cache) / "numba"

    def locked() -> bool:
        return bool(list(folder.glob("warming-*")))

    if not locked() and not list(folder.glob("ready-*")):
        return None
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        stamps = list(folder.glob("ready-*"))
        if stamps and not locked():
            info = json.loads(stamps[0].read_text())
            return {"wall_s": time.perf_counter() - started, "cpu_s": info.get("cpu_s"),
                    "load": os.getloadavg()[0]}
        if not locked():
            return {"wall_s": time.perf_counter() - started, "failed": True,
                    "log": (folder / "warm.log").read_text()[-400:] if (folder / "warm.log").exists() else ""}
        time.sleep(0.2)
    return {"wall_s": time.perf_counter() - started, "failed": True, "log": "timeout"}


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


def measure_tree(name: str, tree: Path, modes: list[str], grammars: list[str], steps: int, seeds: int,
                 work: Path, timeout: int) -> dict:
    json_gbnf = str(CORPUS / "gbnf" / "llamacpp__json.gbnf")
    sample = str(CORPUS / "gbnf" / "llamacpp__json.sample1.txt")
    has_modes = (tree / "gramopt" / "runtime" / "twins.py").exists()
    out: dict = {"tree": str(tree), "runs": {}}
    cache = None
    for mode in (modes if has_modes else ["own"]):
        cache = tempfile.mkdtemp(prefix=f"gramopt-cold-{name}-{mode}-")
        extra = {} if mode == "own" else {"GRAMOPT_KERNELS": mode}
        run: dict = {}
        for phase in ("cold", "warm"):
            r = run_child(["-c", FIRST_MASK, json_gbnf, sample], tree, cache, timeout, extra)
            r["phases"] = json.loads(r["stdout"]) if r["rc"] == 0 else {}
            if "at_first_mask" in r["phases"]:  # from the process's launch (interpreter start included)
                r["phases"]["launch_to_first_mask_s"] = r["phases"]["at_first_mask"] - r["launched"]
            run[phase] = r
            print(f"{name} {mode} {phase}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, load {r['load']:.1f}, "
                  f"{r['phases'] or r['stderr_tail']}", file=sys.stderr)
            if phase == "cold":
                run["background"] = wait_background(cache, r["started"], timeout)
                print(f"{name} {mode} background: {run['background']}", file=sys.stderr)
        out["runs"][mode] = run
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
        decode[g] = {k: r[k] for k in ("wall_s", "cpu_s", "rc", "stderr_tail", "load")}
        decode[g]["result"] = next((ln for ln in r["stdout"].splitlines() if ln.startswith("result:")), "")
        print(f"{name} verify {g}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, rc {r['rc']}", file=sys.stderr)
    out["decode"] = decode
    return out


def table(results: dict, settings: dict) -> str:
    lines = [f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); "
             f"verify --decode: {settings.get('steps')} steps × {settings.get('seeds')} seeds", "",
             "| tree | kernels | measure | wall s | CPU s | load |", "|---|---|---|---:|---:|---:|"]

    def row(tree, mode, label, r):
        if not r:
            return
        wall = f"{r['wall_s']:.2f}" + (f" (rc {r['rc']})" if r.get("rc") not in (0, None) else "")
        wall += " (failed)" if r.get("failed") else ""
        cpu = "—" if r.get("cpu_s") is None else f"{r['cpu_s']:.2f}"
        lines.append(f"| {tree} | {mode} | {label} | {wall} | {cpu} | {r.get('load', float('nan')):.1f} |")

    for res in results.values():  # files written before the kernel modes: one run, the tree's own
        res.setdefault("runs", {"own": {k: res[k] for k in ("cold", "warm") if k in res}})
    for n, res in results.items():
        for mode, run in res.get("runs", {}).items():
            row(n, mode, "empty cache: the whole process (phases below)",
                run.get("cold"))
            row(n, mode, "background compile done (s after that process started; CPU its own)", run.get("background"))
            row(n, mode, "second process (cache filled)", run.get("warm"))
        for g, r in sorted(res.get("decode", {}).items()):
            row(n, "", f"verify --decode {g}", r)
    lines.append("")
    for n, res in results.items():
        for mode, run in res.get("runs", {}).items():
            for k in ("cold", "warm"):
                p = run.get(k, {}).get("phases", {})
                if p:
                    first = sum(p[x] for x in ("import_s", "vocab_s", "matcher_s", "mask_s"))
                    line = (f"- {n} {mode} {k}: import {p['import_s']:.2f} s, vocab {p['vocab_s']:.2f} s, "
                            f"Matcher {p['matcher_s']:.2f} s, first mask {p['mask_s']:.3f} s "
                            f"({p['allowed']} tokens allowed): **first mask {first:.2f} s after start**")
                    if "launch_to_first_mask_s" in p:
                        line += f" ({p['launch_to_first_mask_s']:.2f} s after the process was launched)"
                    if "steps" in p:
                        line += (f"; next {p['steps']} masks {p['steps_s']:.2f} s "
                                 f"(slowest {p['slowest_step_s']:.3f} s)")
                    lines.append(line)
        lines.append(f"- {n}: kernel cache outside the package folder: {res.get('cache_outside_package')}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--modes", default="auto,compiled", help="GRAMOPT_KERNELS values to run cold (runtime/jit.py)")
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
    modes = [m for m in a.modes.split(",") if m]
    results = {n: measure_tree(n, Path(p).resolve(), modes, grammars, a.steps, a.seeds, work, a.timeout)
               for n, p in trees}
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": settings, "results": results}, indent=1))
    print(table(results, settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
