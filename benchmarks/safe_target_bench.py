"""Is the default target's output ever slower than its input? xgrammar and llguidance, per mask.

    python benchmarks/safe_target_bench.py                      # every corpus gbnf/ebnf grammar with samples
    python benchmarks/safe_target_bench.py --grammars json,c    # rows whose file name contains one
    python benchmarks/safe_target_bench.py --target generic     # another target, for comparison
    python benchmarks/safe_target_bench.py --out benchmarks/results/safe-target-DATE.md
    python benchmarks/safe_target_bench.py --control            # A/A: output = input, the noise floor
    python benchmarks/safe_target_bench.py --time-identical     # time outputs identical to their input too

Per grammar of the corpus (gbnf/ebnf with ``*.sample*.txt``): the input as gramopt reads it
("input") and ``optimize(g, target=T)`` ("output", T the default target unless named;
``verify=False``: the grammar is the same, verification only decides whether the CLI writes
it, and ``tests/test_optimize_corpus.py`` verifies the corpus). An output whose text in the
input's dialect is the input's own (``write(out) == write(g)``) is reported as *identical*
without timing: the same bytes compile to the same matcher (``--time-identical`` times them
anyway). The others are compiled once in xgrammar 0.2.8 (xgrammar EBNF, 1 thread, no cache)
and llguidance 1.9.1 (GBNF, as its adapter prints it), Qwen vocabulary. Every sample is
Qwen-tokenized and cut to its first ``--max-tokens`` tokens; along it the four matchers run
*interleaved*: at each step xgrammar-input, xgrammar-output, llguidance-input,
llguidance-output fill their masks (each timed; one untimed warm-up mask first), the two
masks of one engine are compared bit for bit, and all four accept the sample's token. Which
form fills first alternates from step to step and from run to run, so every step is timed
in both orders. An engine whose input rejects a sample token stops there (both its forms),
the other goes on. Where one engine's two masks differ, both are compared with gramopt's
exact runtime mask at that step (``gramopt.runtime.Matcher``): the row says which form is
right (xgrammar 0.2.8 computes wrong masks for a directly self-recursive root, which the
output's root wrapper avoids: ``../shared/ENGINES.md``).

Timing, robust to a shared machine: the trajectory is run once untimed (llguidance builds its
lexer lazily), then ``--repeats`` times, and each step's time is the minimum over the runs
(a neighbour's burst lengthens some runs of a step, never shortens one) of its wall time, or
of the thread's CPU time where the step takes 100 μs or more (such a step is preempted in
every run under load: ``step_times``); p50 and p95 are over all steps of all samples. An A/A run (``--control``: the input compiled twice) measures
what that leaves: its ratios are the noise floor.

Ratio = input time / output time (> 1: the output is faster). The summary counts, per engine,
the grammars with ratio ≥ 0.95 at p50 and at p95 (the done-when of issue 13: all of them).
Times are wall clock: compare the ratios, measured side by side.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from corpus_location import CORPUS  # noqa: E402  (the tests' own rule: $GRAMOPT_CORPUS, corpus/, …)

ENGINES = ("xgrammar", "llguidance")
GOAL = 0.95
LONG = 100e-6  # seconds: steps at least this long are timed by CPU time (``step_times``)


def corpus_paths(corpus) -> list[str]:
    out = []
    for folder, ext in (("gbnf", ".gbnf"), ("ebnf", ".ebnf")):
        for p in sorted(glob.glob(os.path.join(str(corpus), folder, "*" + ext))):
            if glob.glob(p[: -len(ext)] + ".sample*.txt"):
                out.append(p)
    return out


class Side:
    """One engine's two matchers (input, output) along a trajectory."""

    def __init__(self, name, eng, ha, hb, n):
        self.name, self.eng, self.n = name, eng, n
        self.ha, self.hb = ha, hb
        self.buf_a = np.zeros((n + 31) // 32, np.int32)
        self.buf_b = np.zeros((n + 31) // 32, np.int32)
        self.alive = True
        self.diff = None   # first step where the masks differ
        self.diff_masks = None  # (input's, output's) masks there
        self.stop = None   # step where the input rejected the sample token

    def _fresh(self, h):
        # a new matcher per run: llguidance's stays in its error state through reset() once it
        # rejected a token; its deep copy shares the compiled grammar and lexer
        return self.eng.matcher(h.deep_copy() if hasattr(h, "deep_copy") else h)

    def reset(self):
        self.ma, self.mb = self._fresh(self.ha), self._fresh(self.hb)
        self.alive, self.diff, self.diff_masks, self.stop = True, None, None, None
        self.ma.fill(self.buf_a)  # warm-up, untimed (dropped below)
        self.mb.fill(self.buf_b)
        self.ma.fill_s.clear()
        self.mb.fill_s.clear()
        self.cpu_a, self.cpu_b = [], []

    def fill(self, step, flip):
        if flip:  # which form goes first alternates (what one fills is warm in the cache for the other)
            _timed_fill(self.mb, self.buf_b, self.cpu_b)
            _timed_fill(self.ma, self.buf_a, self.cpu_a)
        else:
            _timed_fill(self.ma, self.buf_a, self.cpu_a)
            _timed_fill(self.mb, self.buf_b, self.cpu_b)
        if self.diff is None and not np.array_equal(self.buf_a, self.buf_b):
            self.diff, self.diff_masks = step, (self.buf_a.copy(), self.buf_b.copy())

    def accept(self, step, tok):
        if not self.ma.accept(tok):
            self.alive, self.stop = False, step
        elif not self.mb.accept(tok):
            self.alive = False
            self.diff = step if self.diff is None else self.diff


def _timed_fill(m, buf, cpu):
    """``m.fill(buf)``: the adapter records its wall time in ``fill_s``; the thread's CPU
    time around it goes to ``cpu`` (~1.3 μs of clock overhead, outside the wall window)."""
    c = time.thread_time_ns()
    m.fill(buf)
    cpu.append((time.thread_time_ns() - c) * 1e-9)


def step_times(wall_a, wall_b, cpu_a, cpu_b):
    """Per step, the two forms' times on one clock: the wall-clock minimum over the runs,
    or, where either form's minimum is ``LONG`` or more, the CPU-time minimum (a step that
    long is preempted in every run on a loaded machine; CPU time is not, and its clock
    overhead is < 2% there)."""
    long = np.maximum(wall_a, wall_b) >= LONG
    return np.where(long, cpu_a, wall_a), np.where(long, cpu_b, wall_b)


def exact_mask(exact, toks, step, n_words):
    """gramopt's exact runtime mask after the first ``step`` tokens of ``toks``."""
    exact.reset()
    for t in toks[:step]:
        if not exact.accept_token(t):
            return None
    row = np.zeros((1, n_words), np.int32)
    exact.fill_next_token_bitmask(row, 0)
    return row[0]


def diff_verdict(masks, ref) -> str:
    """Which of (input's, output's) masks at a differing step equals the exact one."""
    if ref is None:
        return "no exact mask"
    a, b = (np.array_equal(m, ref) for m in masks)
    return {(True, False): "output wrong", (False, True): "input wrong, output exact",
            (False, False): "neither exact"}.get((a, b), "?")


def run_sample(sides, toks, eos, complete, repeats):
    """Per side: (seconds per step for input, for output), each step's minimum over
    ``repeats`` runs on the clock ``step_times`` picks, after one untimed run (llguidance
    builds its lexer's automaton lazily, on first use)."""
    steps = list(toks) + ([eos] if complete else [])
    best = {s.name: None for s in sides}
    for run in range(repeats + 1):
        for s in sides:
            s.reset()
        for i, t in enumerate(steps):
            live = [s for s in sides if s.alive]
            if not live:
                break
            for s in live:
                s.fill(i, (i + run) % 2)
            if t == eos:
                break
            for s in live:
                s.accept(i, t)
        if run == 0:
            continue
        for s in sides:
            k = min(len(s.ma.fill_s), len(s.mb.fill_s))
            now = [np.array(x[:k]) for x in (s.ma.fill_s, s.mb.fill_s, s.cpu_a, s.cpu_b)]
            prev = best[s.name]
            best[s.name] = now if prev is None else [np.minimum(p[:k], x[:k]) for p, x in zip(prev, now)]
    return {name: step_times(*v) for name, v in best.items()}


def measure(engs, env, path, target, max_tokens, repeats, control=False, time_identical=False):
    import gramopt
    from gramopt.engines import EngineError
    row = {"name": os.path.basename(path), "error": None, "fallback": None, "rules": None}
    try:
        g = gramopt.read(path)
    except Exception as e:  # noqa: BLE001 - a benchmark row, not a crash
        row["error"] = f"read: {str(e).splitlines()[0][:90]}"
        return row
    t = time.perf_counter()
    try:
        res = gramopt.optimize(g, target=target, verify=False)
    except Exception as e:  # noqa: BLE001
        row["error"] = f"optimize: {type(e).__name__}: {str(e).splitlines()[0][:90]}"
        return row
    row["optimize_s"] = time.perf_counter() - t
    out = g if control else res.grammar
    row["rules"] = (len(g.rules), len(out.rules))
    row["unchanged"] = gramopt.write(out, g.dialect) == gramopt.write(g, g.dialect)
    row["fallback"] = None if control else next((n for n in res.report.notes if n.startswith("kept ")), None)
    if row["unchanged"] and not (control or time_identical):
        return row  # the same bytes: the same matcher in every engine (module docstring)
    sides = []
    for name, eng in engs.items():
        try:
            ha = eng.compile(g)
        except EngineError as e:
            row[name] = {"error": f"input not loaded: {str(e)[:70]}"}
            continue
        try:
            hb = eng.compile(out)
        except EngineError as e:
            row[name] = {"error": f"OUTPUT NOT LOADED: {str(e)[:70]}"}
            continue
        sides.append(Side(name, eng, ha, hb, len(env.vocab)))
    times = {s.name: ([], []) for s in sides}
    flags = {s.name: [] for s in sides}
    stem = path[: path.rfind(".")]
    eos = env.vocab.eos_ids[0]
    exact = None
    for sp in sorted(glob.glob(stem + ".sample*.txt")):
        toks, complete = env.tokenizer.trajectory(open(sp, encoding="utf-8").read(), max_tokens)
        best = run_sample(sides, toks, eos, complete, repeats)
        tag = os.path.basename(sp)[len(os.path.basename(stem)) + 1:-4]
        for s in sides:
            times[s.name][0].extend(best[s.name][0])
            times[s.name][1].extend(best[s.name][1])
            if s.diff is not None:
                if exact is None:
                    from gramopt.runtime import Matcher
                    exact = Matcher(g, env.vocab)
                verdict = diff_verdict(s.diff_masks, exact_mask(exact, toks, s.diff, len(s.buf_a)))
                flags[s.name].append(f"{'masks differ' if verdict.startswith('input wrong') else 'MASKS DIFFER'} "
                                     f"{tag}@{s.diff}: {verdict}")
            if s.stop is not None:
                flags[s.name].append(f"input rejects {tag}@{s.stop}")
    for s in sides:
        a, b = (np.array(x) * 1e6 for x in times[s.name])
        if not len(a):
            row[s.name] = {"error": "no steps"}
            continue
        row[s.name] = {"steps": len(a), "p50_a": float(np.percentile(a, 50)), "p95_a": float(np.percentile(a, 95)),
                       "p50_b": float(np.percentile(b, 50)), "p95_b": float(np.percentile(b, 95)),
                       "flags": flags[s.name]}
        r = row[s.name]
        r["r50"], r["r95"] = r["p50_a"] / r["p50_b"], r["p95_a"] / r["p95_b"]
    return row


def timed(row) -> bool:
    return not row["error"] and any(e in row for e in ENGINES)


def fmt(row) -> str:
    if row["error"]:
        return f"| {row['name']} | – | {row['error']} | | | | | | | |"
    cells = [row["name"], f"{row['rules'][0]}→{row['rules'][1]}" + (" =" if row["unchanged"] else "")]
    if not timed(row):
        return "| " + " | ".join(cells + ["identical"] + [""] * 7 + ["output = input, byte for byte: not timed"]) + " |"
    notes = [row["fallback"]] if row["fallback"] else []
    for e in ENGINES:
        r = row.get(e, {"error": "not run"})
        if "error" in r:
            cells += ["", "", "", ""]
            notes.append(f"{e}: {r['error']}")
            continue
        cells += [f"{r['p50_a']:.1f} → {r['p50_b']:.1f}", f"{r['r50']:.2f}×",
                  f"{r['p95_a']:.1f} → {r['p95_b']:.1f}", f"{r['r95']:.2f}×"]
        notes += [f"{e}: {f}" for f in r["flags"]]
    return "| " + " | ".join(cells + ["; ".join(notes)]) + " |"


HEADER = ("| grammar | rules | xgrammar p50 μs | × | xgrammar p95 μs | × | llguidance p50 μs | × | "
          "llguidance p95 μs | × | notes |\n|---|---|---|---|---|---|---|---|---|---|---|")


def summary(rows) -> list[str]:
    """Per engine: grammars ≥ GOAL at p50 and p95 among the timed rows, the identical
    outputs (no slower by construction) counted apart; rows whose masks differ are named
    with the exact runtime's verdict."""
    lines = []
    ok_rows = [r for r in rows if not r["error"]]
    same = [r for r in ok_rows if not timed(r)]
    lines.append(f"{len(rows)} grammars: {len(same)} outputs identical to the input (not timed), "
                 f"{sum(1 for r in ok_rows if timed(r))} timed, {sum(1 for r in rows if r['error'])} not measured")
    for e in ENGINES:
        ok = [r for r in ok_rows if "r50" in r.get(e, {})]
        g50 = [r["name"] for r in ok if r[e]["r50"] < GOAL]
        g95 = [r["name"] for r in ok if r[e]["r95"] < GOAL]
        both = sum(1 for r in ok if r[e]["r50"] >= GOAL and r[e]["r95"] >= GOAL)
        diff = [f"{r['name']} ({'; '.join(f for f in r[e]['flags'] if 'differ' in f.lower())})"
                for r in ok if any("differ" in f.lower() for f in r[e]["flags"])]
        lines.append(f"{e}: {both}/{len(ok)} timed grammars ≥ {GOAL}× at p50 and p95 "
                     f"({len(ok) - len(g50)}/{len(ok)} at p50, {len(ok) - len(g95)}/{len(ok)} at p95), "
                     f"+ {len(same)} identical"
                     + (f"; below at p50: {', '.join(g50)}" if g50 else "")
                     + (f"; below at p95: {', '.join(g95)}" if g95 else "")
                     + (f"; masks differ: {', '.join(diff)}" if diff else ""))
        unloaded = [r["name"] for r in ok_rows if "OUTPUT NOT LOADED" in r.get(e, {}).get("error", "")]
        if unloaded:
            lines.append(f"{e}: output not loaded (input loads): {', '.join(unloaded)}")
    fell = [r["name"] for r in rows if r.get("fallback")]
    lines.append(f"guard kept the input (with the fix-ups) on {len(fell)}")
    return lines


def main(argv=None) -> int:
    from gramopt import targets
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default=targets.DEFAULT)
    ap.add_argument("--grammars", default="", help="comma-separated substrings of corpus file names")
    ap.add_argument("--max-tokens", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", default="", help="markdown file to write the table to")
    ap.add_argument("--control", action="store_true",
                    help="A/A run: the output is the input itself (the ratios' noise floor)")
    ap.add_argument("--time-identical", action="store_true",
                    help="time outputs identical to their input too (the ratios' noise floor on them)")
    args = ap.parse_args(argv)

    from gramopt.engines import ENGINES as ADAPTERS, Env
    from gramopt.runtime import Vocab
    env = Env.create(Vocab.qwen())
    engs = {e: ADAPTERS[e](env) for e in ENGINES}
    for e, eng in engs.items():
        if eng.missing:
            print(f"{e}: {eng.missing}", file=sys.stderr)
            return 2
        eng.prepare()
    paths = corpus_paths(CORPUS)
    if args.grammars:
        keys = [k for k in args.grammars.split(",") if k]
        paths = [p for p in paths if any(k in os.path.basename(p) for k in keys)]
    head = (f"{'CONTROL (output = input), ' if args.control else ''}target {args.target}: {len(paths)} corpus gbnf/ebnf grammars with samples ({CORPUS}), ≤ "
            f"{args.max_tokens} Qwen tokens per sample, per-step minimum of {args.repeats} runs, "
            f"engines interleaved; ratio = input / output time (≥ {GOAL}: not slower)")
    print(head)
    print(HEADER, flush=True)
    rows, t0 = [], time.perf_counter()
    for p in paths:
        r = measure(engs, env, p, args.target, args.max_tokens, args.repeats, args.control, args.time_identical)
        rows.append(r)
        print(fmt(r), flush=True)
    lines = summary(rows)
    print()
    print("\n".join(lines))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(f"# {__doc__.splitlines()[0]}\n\n`python benchmarks/safe_target_bench.py "
                    f"{' '.join(argv if argv is not None else sys.argv[1:])}` on "
                    f"{datetime.date.today().isoformat()}\n\n{head}\n\n{HEADER}\n")
            f.write("\n".join(fmt(r) for r in rows) + "\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
