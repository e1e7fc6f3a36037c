"""``Matcher()`` in a fresh process, per grammar: what a server pays for its first grammar.

    python benchmarks/compile_bench.py [--runs 3] [--grammars SUBSTR,...] [--all]
                                       [--after xgrammar] [--gc-freeze] [--trees DIR,DIR]

Each measurement is one child process (``--child``): it loads the Qwen vocabulary and its
trie, loads numba's compiled kernels through a one-rule grammar (the one-off start-up,
not timed), parses the grammar file (timed apart: ``parse``), then times
``Matcher(grammar, vocab)`` and the first mask. Python's garbage collector runs as it
would in the user's process (no ``gc.freeze`` unless ``--gc-freeze``); ``gc.callbacks``
times every collection that falls inside ``Matcher()``, so the table shows how much of it
was full (generation 2) collections, and how many collections of each generation ran
(generation 0 runs every 700 net allocations of tracked container objects: a work count
of the compile's Python garbage). ``--after xgrammar`` compiles the grammar with xgrammar
first in the same child (it imports torch, so the heap a full collection walks is larger:
the situation of benchmarks/runtime_bench.py).

The table prints the median over ``--runs`` children (and the min and max of Matcher()).
``--trees`` names source trees of gramopt (e.g. an older commit unpacked with ``git
archive``) to measure side by side: each child imports gramopt from one of them, the
trees alternating run by run, one row per grammar and tree (default: this checkout).
Default grammars: the large maskbench ones named in issue 15 and a few small ones;
``--all`` takes every corpus gbnf/ebnf grammar.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

DEFAULT = ("maskbench-xgrammar__Github_hard-o58762.ebnf", "maskbench-llamacpp__Github_hard-o58762.gbnf",
           "maskbench-xgrammar__Github_ultra-o46393.ebnf", "maskbench-llamacpp__Github_ultra-o46393.gbnf",
           "maskbench-xgrammar__Github_ultra-o16062.ebnf", "maskbench-llamacpp__Github_ultra-o16062.gbnf",
           "transformers-cfg__calflow.ebnf", "llamacpp__json.gbnf", "llamacpp__c.gbnf")


def child(path: str, after: str, freeze: bool) -> dict:
    """One measurement in this (fresh) process; returns the figures as a dict."""
    import gc

    from gramopt.formats import parse
    from gramopt.grammar import Grammar, Literal, Rule
    from gramopt.runtime import Matcher, Vocab

    vocab = Vocab.qwen()
    _ = vocab.trie
    Matcher(Grammar((Rule("root", Literal("a")),), "root"), Vocab.from_bytes([b"a"], eos=1)).allowed_tokens()
    dialect = path.rsplit(".", 1)[1]
    t = time.perf_counter()
    g = parse(open(path, encoding="utf-8").read(), dialect)
    parse_s = time.perf_counter() - t
    xgr_s = None
    if after == "xgrammar":
        from gramopt.engines.xgrammar import compile_grammar as xgr_compile
        t = time.perf_counter()
        xgr_compile(g, vocab)
        xgr_s = time.perf_counter() - t
    if freeze:
        gc.collect()
        gc.freeze()
    heap = len(gc.get_objects())
    colls = [0, 0, 0]
    full = [0.0]
    start = [0.0]

    def watch(phase, info):
        if phase == "start":
            start[0] = time.perf_counter()
        else:
            colls[info["generation"]] += 1
            if info["generation"] == 2:
                full[0] += time.perf_counter() - start[0]

    gc.callbacks.append(watch)
    t = time.perf_counter()
    m = Matcher(g, vocab)
    matcher_s = time.perf_counter() - t
    m.compute_mask()
    mask_s = time.perf_counter() - t - matcher_s
    gc.callbacks.remove(watch)
    return dict(parse=parse_s, xgr=xgr_s, matcher=matcher_s, mask=mask_s, full_gc=full[0], colls=colls,
                heap=heap, states=m.cg.n_states, rules=m.cg.n_rules)


def run_child(path: str, after: str, freeze: bool, tree: str | None = None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", os.path.abspath(path), "--after", after]
    cmd += ["--gc-freeze"] if freeze else []
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree or None)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return dict(error=(out.stderr.strip().splitlines() or ["no output"])[-1][:80])
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per grammar")
    ap.add_argument("--grammars", default="", help="comma-separated substrings of file names")
    ap.add_argument("--all", action="store_true", help="every corpus gbnf/ebnf grammar")
    ap.add_argument("--after", default="none", choices=("none", "xgrammar"))
    ap.add_argument("--gc-freeze", action="store_true")
    ap.add_argument("--trees", default="", help="comma-separated gramopt source trees to compare")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.after, args.gc_freeze)))
        return

    from gramopt.bench.suites import corpus_dir
    corpus = corpus_dir() or "corpus"
    paths = sorted(glob.glob(f"{corpus}/gbnf/*.gbnf") + glob.glob(f"{corpus}/ebnf/*.ebnf"))
    filters = [f for f in args.grammars.split(",") if f]
    if filters:
        paths = [p for p in paths if any(f in os.path.basename(p) for f in filters)]
    elif not args.all:
        paths = [p for p in paths if os.path.basename(p) in DEFAULT]
    trees = [t for t in args.trees.split(",") if t] or [None]
    print(f"(fresh process per run, median of {args.runs}; ms; after={args.after}; "
          f"gc.freeze={'yes' if args.gc_freeze else 'no'}; load average {os.getloadavg()[0]:.2f})")
    for i, t in enumerate(trees):
        print(f"tree {i}: {t or 'this checkout'}")
    print(f"{'grammar':48} {'tree':>4} {'states':>7} {'parse':>8} {'Matcher()':>10} {'min':>8} {'max':>8} "
          f"{'1st mask':>8} {'full gc':>8} {'gc0/1/2':>10}")
    for path in paths:
        res: dict[int, list] = {i: [] for i in range(len(trees))}
        for _ in range(args.runs):  # the trees alternate, so a load spike falls on all alike
            for i, t in enumerate(trees):
                res[i].append(run_child(path, args.after, args.gc_freeze, t))
        name = os.path.basename(path)[:48]
        for i in res:
            ok = [r for r in res[i] if "error" not in r]
            if not ok:
                print(f"{name:48} {i:4}  error: {res[i][0]['error']}")
                continue
            ok.sort(key=lambda r: r["matcher"])
            mid = ok[len(ok) // 2]
            print(f"{name:48} {i:4} {mid['states']:7} {mid['parse'] * 1e3:8.1f} {mid['matcher'] * 1e3:10.1f} "
                  f"{ok[0]['matcher'] * 1e3:8.1f} {ok[-1]['matcher'] * 1e3:8.1f} {mid['mask'] * 1e3:8.1f} "
                  f"{mid['full_gc'] * 1e3:8.1f} {'/'.join(map(str, mid['colls'])):>10}", flush=True)


if __name__ == "__main__":
    main()
