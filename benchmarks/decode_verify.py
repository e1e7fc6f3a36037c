"""Lockstep decoding check over corpus grammars: every grammar the optimizer changes.

    python benchmarks/decode_verify.py [PATHS...] [--steps 128] [--seeds 3] [--batch 1]
                                       [--vocab qwen|bytes] [--device auto] [--xgrammar]
                                       [--measure] [--json OUT.json]

For each grammar (default: every .gbnf/.ebnf/.goebnf of the corpus): optimize it (generic
target); skip it when nothing changed or the byte-level runtime cannot compile it; then
decode under the original with a tiny seeded transformer (biased by the grammar's sample
texts) and compare the optimized grammar's masks step by step (and xgrammar's with
--xgrammar). Prints one line per grammar and a summary; with --measure also the serving
figures (tokens/s, mask p50 speedup, overlap). Exit 3 if any optimized grammar differs.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def corpus_paths() -> list[str]:
    from corpus_location import CORPUS
    c = str(CORPUS)
    return sorted(glob.glob(f"{c}/gbnf/*.gbnf") + glob.glob(f"{c}/ebnf/*.ebnf") + glob.glob(f"{c}/ebnf/*.goebnf"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", default="qwen", choices=("qwen", "bytes"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--xgrammar", action="store_true", help="compare xgrammar's masks too")
    ap.add_argument("--measure", action="store_true", help="serving runs: tokens/s, speedup, overlap")
    ap.add_argument("--json", help="write every grammar's summary here")
    args = ap.parse_args()

    import torch
    from gramopt.formats import read
    from gramopt.grammar import GrammarError
    from gramopt.passes import optimize
    from gramopt.runtime import RuntimeGrammarError, Vocab
    from gramopt.decoding.loop import Sampling, resolve_device
    from gramopt.decoding.model import TinyCausalLM, prior_from_texts
    from gramopt.engines import oracle_engines
    from gramopt.decoding.lockstep import decode_check

    device = resolve_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    vocab = Vocab.qwen() if args.vocab == "qwen" else Vocab.from_bytes([bytes([b]) for b in range(256)], eos=256)
    paths = args.paths or corpus_paths()
    rows, bad, t_all = [], 0, time.perf_counter()
    for path in paths:
        name = os.path.basename(path)
        try:
            g = read(path)
            opt = optimize(g).grammar
        except GrammarError as e:
            print(f"{name:<60} skipped: {e.message[:60]}")
            continue
        if opt == g:
            print(f"{name:<60} unchanged by the optimizer")
            continue
        stem = os.path.splitext(path)[0]
        texts = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(glob.escape(stem) + ".sample*.txt"))]
        model = TinyCausalLM(len(vocab), seed=0, device=device,
                             token_prior=prior_from_texts(vocab, texts) if texts else None)
        t = time.perf_counter()
        try:
            rep = decode_check(g, opt, vocab, model, steps=args.steps, seeds=args.seeds, batch=args.batch,
                               sampling=Sampling(temperature=1.0, top_k=50), engines=oracle_engines() if args.xgrammar else (),
                               min_tokens=32, measure=args.measure,
                               settings=dict(seeds=args.seeds, steps=args.steps, batch=args.batch,
                                             vocab=vocab.name, device=str(device), model="tiny",
                                             sampling="T=1.0 top-k=50"))
        except RuntimeGrammarError as e:
            print(f"{name:<60} skipped: {str(e).splitlines()[0][:60]}")
            continue
        s = rep.summary()
        s["grammar"] = name
        s["seconds"] = time.perf_counter() - t
        rows.append(s)
        e = s["engines"]
        opt_mm = e["gramopt:optimized"]["mismatches"]
        bad += opt_mm > 0
        xg = {k: v["mismatches"] for k, v in e.items() if k.startswith("xgrammar")}
        line = (f"{name:<60} steps {e['gramopt:optimized']['steps']:>5}  mismatches {opt_mm}  "
                f"mask p50 {e['gramopt:original']['mask_p50_us']:8.1f} → {e['gramopt:optimized']['mask_p50_us']:8.1f} µs"
                f"  p95 {e['gramopt:original']['mask_p95_us']:8.1f} → {e['gramopt:optimized']['mask_p95_us']:8.1f} µs"
                f"  fwd p50 {s['forward_p50_ms']:.2f} ms")
        if xg:
            line += "  xgrammar mismatches " + ", ".join(f"{k.split(':')[1]} {v}" for k, v in xg.items())
        if "serving" in s:
            sv = s["serving"]
            line += (f"  tok/s {sv['original']['tokens_per_s']:.0f} → {sv['optimized']['tokens_per_s']:.0f}"
                     f"  hidden {100 * sv['optimized']['hidden_ab']:.0f}%")
        print(line + f"  ({s['seconds']:.0f} s)", flush=True)
        for m in rep.mismatches:
            print("    " + m.format(vocab).replace("\n", "\n    "))
    print(f"\n{len(rows)} grammars checked, {bad} with a mismatch of the optimized grammar, "
          f"{time.perf_counter() - t_all:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
