"""Per-mask latency of gramopt's runtime vs xgrammar and llguidance, same grammars, same
token trajectories, Qwen vocabulary (151,644 tokens), one process.

    python benchmarks/runtime_bench.py [--reps 3] [--max-tokens 150] [--grammars json,c,...]

For each grammar and sample: the sample is tokenized with Qwen's BPE; each engine fills a
mask before every token (and before EOS) and then accepts the token. Printed: compile time
(gramopt: automata + per-state token classes for every root state, i.e. everything a
mask needs; the numba JIT / cache load is reported once, separately), p50/p95/max per mask
in microseconds over all steps of all repetitions after a warm-up pass, and ratios to
gramopt. Grammars come from the corpus through ``gramopt.formats`` when its reader is
installed; otherwise built-in IR grammars (json, expr, text) are used. The engines are
driven by ``gramopt.bench.engines`` (the drivers ``gramopt bench`` uses), which print the
grammar for each engine with ``gramopt.formats``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

CORPUS = "/work/shared/corpus"
CORPUS_SET = {
    "json": "gbnf/llamacpp__json.gbnf",
    "maskbench-hard": "ebnf/maskbench-xgrammar__Github_hard-o58762.ebnf",
    "c": "gbnf/llamacpp__c.gbnf",
    "arithmetic": "gbnf/llamacpp__arithmetic.gbnf",
    "xgr-json": "ebnf/xgrammar__builtin_json.ebnf",
}


def pct(xs):
    a = np.array(xs) * 1e6
    return np.percentile(a, 50), np.percentile(a, 95), a.max()


def load_cases(names):
    """(name, Grammar, text for xgrammar/llguidance, sample text)."""
    cases = []
    try:
        from gramopt.formats import parse
        parse('root ::= "a"', "gbnf")
    except Exception:  # noqa: BLE001
        parse = None
    from test_runtime_engines import IR_CASES, _fill_empty_alternatives, ebnf_text
    if parse is not None:
        for name in names:
            rel = CORPUS_SET.get(name)
            if rel is None:
                continue
            path = f"{CORPUS}/{rel}"
            dialect = "gbnf" if path.endswith(".gbnf") else "ebnf"
            text = open(path, encoding="utf-8").read()
            g = parse(text, dialect)
            stem = path[: -len(dialect) - 1]
            for sample in sorted(glob.glob(stem + ".sample*.txt"))[:1]:
                etext = _fill_empty_alternatives(text) if dialect == "gbnf" else text
                cases.append((name, g, (etext, etext), open(sample, encoding="utf-8").read()))
    if not cases:
        print("(gramopt.formats reader not available: using built-in IR grammars)")
        seen = set()
        for name, make, sample in IR_CASES:
            if name in seen:
                continue
            seen.add(name)
            g = make()
            cases.append((f"ir-{name}", g, (ebnf_text(g), ebnf_text(g, "llguidance")), sample))
    return cases


def _drive(driver, g, toks, reps):
    """Compile (timed) and run ``reps`` measured passes after one warm-up, through the
    package's engine drivers (``gramopt.bench.engines``, shared with ``gramopt bench``)."""
    handle, compile_s = driver.timed_compile(g)
    times = []
    for rep in range(reps + 1):
        t = driver.run(handle, toks)
        if rep:
            times += t
    return handle, dict(compile=compile_s, times=times)


def bench_gramopt(driver, g, toks, reps):
    table, res = _drive(driver, g, toks, reps)
    counters: list = []
    driver.run(table, toks, counters)
    res.update(n_classes=len(table.classes), trie_nodes=float(np.mean([c.trie_nodes for c in counters])),
               items=float(np.mean([c.items for c in counters])))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=150)
    ap.add_argument("--grammars", default=",".join(CORPUS_SET))
    ap.add_argument("--engines", default="gramopt,xgrammar,llguidance")
    args = ap.parse_args()
    engines = args.engines.split(",")

    t0 = time.perf_counter()
    from gramopt.grammar import Grammar, Literal, Rule
    from gramopt.runtime import Matcher, Vocab
    vocab = Vocab.qwen()
    t1 = time.perf_counter()
    _ = vocab.trie
    t2 = time.perf_counter()
    Matcher(Grammar((Rule("root", Literal("a")),), "root"), Vocab.from_bytes([b"a"], eos=1)).allowed_tokens()
    t3 = time.perf_counter()
    print(f"vocab load {t1 - t0:.2f}s, trie {vocab.trie.n_nodes} nodes {t2 - t1:.2f}s, "
          f"numba JIT/cache load (first tiny mask) {t3 - t2:.2f}s")

    from gramopt.bench.engines import DRIVERS, EngineError, Env
    env = Env.create(vocab)
    drivers = {e: DRIVERS[e](env) for e in engines if e in DRIVERS}
    for e, d in drivers.items():
        if d.missing:
            print(f"({e} skipped: {d.missing})")

    rows = []
    for name, g, etext, sample in load_cases(args.grammars.split(",")):
        toks, _ = env.tokenizer.trajectory(sample, args.max_tokens)
        res = {}
        for eng, drv in drivers.items():
            if drv.missing:
                continue
            try:
                res[eng] = (bench_gramopt(drv, g, toks, args.reps) if eng == "gramopt"
                            else _drive(drv, g, toks, args.reps)[1])
            except EngineError as e:
                res[eng] = dict(error=str(e).splitlines()[0][:60])
        rows.append((name, len(toks), res))

    print()
    print(f"{'grammar':16} {'steps':>5} {'engine':10} {'compile ms':>11} {'p50 us':>9} {'p95 us':>9} "
          f"{'max us':>9} {'p50 x':>7} {'p95 x':>7}  notes")
    for name, n, res in rows:
        base = res.get("gramopt", {})
        b50, b95 = (pct(base["times"])[:2] if "times" in base else (None, None))
        for eng in engines:
            r = res.get(eng)
            if r is None:
                continue
            if "error" in r:
                print(f"{name:16} {n:5} {eng:10} {'-':>11} {'error: ' + r['error']}")
                continue
            p50, p95, mx = pct(r["times"])
            comp = r["compile"] * 1e3
            note = ""
            if eng == "gramopt":
                note = (f"automata + token classes ({r['n_classes']} states); mean trie nodes "
                        f"{r['trie_nodes']:.0f}, items {r['items']:.0f}")
            x50 = f"{p50 / b50:7.2f}" if b50 else "      -"
            x95 = f"{p95 / b95:7.2f}" if b95 else "      -"
            print(f"{name:16} {n:5} {eng:10} {comp:11.1f} {p50:9.1f} {p95:9.1f} {mx:9.1f} {x50} {x95}  {note}")
    print("\n(p50 x / p95 x: engine time ÷ gramopt time; > 1 means gramopt is faster)")


if __name__ == "__main__":
    main()
