"""Counted repetitions vs unrolled ones: compile time and per-mask time of x{m,n} for
growing n, both forms in one process (Qwen vocabulary).

    python benchmarks/counted_repetition_bench.py [--ns 10,1000,100000] [--steps 200] [--reps 3]

"unrolled" is the runtime with COUNT_FROM raised past n (x copied n times into the rule's
automaton, the form before counting); "counted" is the default (past COUNT_FROM copies the
repetition is a rule whose Earley items hold the count). For each grammar and n: compile =
``Matcher()`` plus the first mask (what a server waits for), states = real automaton states,
then the masks of a trajectory of ``--steps`` tokens (the first pass warms the lazily built
token classes and is reported as "cold p95"; p50/p95 are over the ``--reps`` passes after,
each with a fresh matcher on the same table). Rows of the two forms alternate, so a load
spike on the shared machine falls on both.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

GRAMMARS = {
    # name: (EBNF with {N} for the bound, text whose prefix is decoded)
    'digits [0-9]{1,N} "."': ('root ::= [0-9]{1,N} "."', "1234567890" * 1000),
    'bytes "a"{0,N}': ('root ::= "a"{0,N}', "a" * 10000),
    'words ("w" [a-z]* " "){0,N}': ('root ::= ("w" [a-z]* " "){0,N}', "wax " * 3000),
}


def run(text_grammar: str, text: str, n: int, counted: bool, vocab, tokenizer, steps: int, reps: int):
    from gramopt.formats import parse
    from gramopt.runtime import Matcher
    from gramopt.runtime import compile as compile_mod
    from gramopt.runtime.compile import compile_grammar
    from gramopt.runtime.tokens import TokenTable
    saved = compile_mod.COUNT_FROM
    compile_mod.COUNT_FROM = saved if counted else n + 1
    compile_mod._BODY_CACHE.clear()
    try:
        g = parse(text_grammar.replace("N", str(n)), "ebnf")
        t = time.perf_counter()
        cg = compile_grammar(g)
        table = TokenTable(cg, vocab)
        Matcher(table).compute_mask()
        comp = time.perf_counter() - t
    finally:
        compile_mod.COUNT_FROM = saved
    toks, _ = tokenizer.trajectory(text, steps)
    out = np.zeros(vocab.n_words, np.int32)
    cold, warm = [], []
    for p in range(reps + 1):
        m = Matcher(table)
        for tok in toks:
            s = time.perf_counter()
            m.fill_next_token_bitmask(out)
            (warm if p else cold).append(time.perf_counter() - s)
            if not m.accept_token(tok):
                break  # past the bound: the rest of the text is not in the language
    w = np.asarray(warm) * 1e6
    return dict(compile=comp * 1e3, states=cg.n_states, reps=cg.n_reps, steps=len(cold),
                p50=float(np.percentile(w, 50)), p95=float(np.percentile(w, 95)),
                cold=float(np.percentile(np.asarray(cold) * 1e6, 95)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="10,1000,100000")
    ap.add_argument("--steps", type=int, default=200, help="tokens per trajectory (at most)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from gramopt.bench.engines import Env
    from gramopt.runtime import Vocab
    vocab = Vocab.qwen()
    _ = vocab.trie
    env = Env.create(vocab)
    run('root ::= "a"{0,N}', "aa", 100, True, vocab, env.tokenizer, 2, 1)  # numba JIT/cache load, untimed
    ns = [int(x) for x in args.ns.split(",")]
    print(f"{'grammar':30} {'n':>7} {'form':9} {'compile ms':>10} {'states':>7} {'counted':>7} {'steps':>5} "
          f"{'p50 µs':>8} {'p95 µs':>8} {'cold p95':>9}")
    for name, (gtext, text) in GRAMMARS.items():
        for n in ns:
            for counted in (False, True):
                r = run(gtext, text, n, counted, vocab, env.tokenizer, args.steps, args.reps)
                print(f"{name:30} {n:7} {'counted' if counted else 'unrolled':9} {r['compile']:10.1f} "
                      f"{r['states']:7} {r['reps']:7} {r['steps']:5} {r['p50']:8.1f} {r['p95']:8.1f} "
                      f"{r['cold']:9.0f}", flush=True)


if __name__ == "__main__":
    main()
