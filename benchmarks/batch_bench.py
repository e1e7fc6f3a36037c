"""Batch mask filling: BatchMatcher's thread pool vs. filling the rows one after another.

    python benchmarks/batch_bench.py [--rows 16] [--threads 2] [--steps 12] [--grammars c,json,...]

Per grammar (corpus grammar + its first sample, Qwen vocabulary, 151,644 tokens): ``rows``
matchers start at offsets spread over the sample's token trajectory (≤150 tokens) and advance
one token per step in lockstep, as a decoding batch does. At every step the same row states are
filled twice into two bitmasks — sequentially on the calling thread, and by
``BatchMatcher(threads)`` (two sets of matchers in the same states, each with its own chart, so
neither fill is the other's mask-cache hit) — in alternating order (odd steps batch first), the
two bitmasks are compared bit for bit, and the wall times are summed. Printed: per-step median
and total times and the speedup sequential / batch, and the mean counters per row fill (trie
nodes walked: the work the threads share). The BatchMatcher runs with its default
``min_parallel_work``, so a step whose rows did little work last time (cache hits, short walks)
is filled on the calling thread; the "parallel steps" column counts the others. Before timing,
a third set of rows runs every step untimed, so the token classes of every state the rows meet
are built (the JIT) and no timed fill pays for one; the first step is not timed either. The
machine's core count and load average are printed, and per mode the cores the process actually
got (CPU time / wall time): on a shared box (Linux autogroup scheduling gives each busy session
an equal share, whatever its thread count) the speedup is bounded by what the scheduler grants,
so read the ratio beside "cores used".

Heavy rows (``--heavy-reps``, default 5; ``min_parallel_work=0``: always threads): the masks
that decide a batch's latency are the expensive ones (free-text positions: thousands of trie
nodes), while most masks are cache hits of a few microseconds. So, per grammar, the 16
positions of the trajectory with the most trie nodes per fill are found, and each repetition
builds two fresh sets of 16 matchers there (fresh charts: no mask-cache hit) and fills one set
sequentially and one with the BatchMatcher, alternating which goes first; same comparison and
columns.

Then the bitmask application kernels (kernels/): ``apply_token_bitmask_inplace`` on (rows, V)
float32 logits with the last step's masks, backend "cpu" (fused numba loop) vs "torch" (unpack
+ masked_fill), median of 20 runs each, interleaved.
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import numpy as np

from gramopt.bench.suites import corpus_dir  # noqa: E402
from gramopt.runtime.batch import MIN_PARALLEL_WORK  # noqa: E402
CORPUS = corpus_dir() or "corpus"
CASES = {
    "c": "gbnf/llamacpp__c.gbnf",
    "json": "gbnf/llamacpp__json.gbnf",
    "arithmetic": "gbnf/llamacpp__arithmetic.gbnf",
    "xgr-json": "ebnf/xgrammar__builtin_json.ebnf",
    "sparql": "gbnf/bh-sparql__sparql1.1.gbnf",
}


def load(name):
    from gramopt.formats import parse
    path = f"{CORPUS}/{CASES[name]}"
    dialect = "gbnf" if path.endswith(".gbnf") else "ebnf"
    g = parse(open(path, encoding="utf-8").read(), dialect)
    samples = sorted(glob.glob(path[: -len(dialect) - 1] + ".sample*.txt"))
    return g, "".join(open(s, encoding="utf-8").read() for s in samples[:1])


def bench_grammar(name, vocab, tokenizer, n_rows, threads, steps):
    from gramopt.runtime import BatchMatcher, Matcher
    g, sample = load(name)
    toks, _ = tokenizer.trajectory(sample, 150)
    toks = [t for t in toks if t not in vocab.eos_ids]
    steps = min(steps, max(1, len(toks) - 1))
    span = max(0, len(toks) - steps - 1)
    offs = [(r * span) // max(1, n_rows - 1) for r in range(n_rows)]

    def start_rows():
        rows = [Matcher(g, vocab) for _ in range(n_rows)]
        for m, off in zip(rows, offs):
            for t in toks[:off]:
                assert m.accept_token(t)
        return rows

    warm = start_rows()  # meets every state first: no timed fill pays a token-class build (JIT)
    scratch = np.zeros(vocab.n_words, np.int32)
    for step in range(steps + 1):
        for m, off in zip(warm, offs):
            m.fill_next_token_bitmask(scratch)
            assert m.accept_token(toks[off + step])
    seq_rows, bat_rows = start_rows(), start_rows()  # same states, own charts (own mask caches)
    seq_mask = np.zeros((n_rows, vocab.n_words), np.int32)
    bat_mask = np.zeros_like(seq_mask)
    seq_t, bat_t, nodes, seq_cpu, bat_cpu, par = [], [], [], [], [], 0
    with BatchMatcher(threads) as bm:
        for step in range(steps + 1):
            def run_seq():
                t, c = time.perf_counter(), time.process_time()
                cs = [m.fill_next_token_bitmask(seq_mask, r) for r, m in enumerate(seq_rows)]
                return time.perf_counter() - t, time.process_time() - c, cs

            def run_bat():
                t, c = time.perf_counter(), time.process_time()
                bm.batch_fill_next_token_bitmask(bat_rows, bat_mask)
                return time.perf_counter() - t, time.process_time() - c

            if step % 2:
                tb, cb = run_bat()
                ts, cpu_s, cs = run_seq()
            else:
                ts, cpu_s, cs = run_seq()
                tb, cb = run_bat()
            if not np.array_equal(seq_mask, bat_mask):
                raise SystemExit(f"{name}: batch and sequential masks differ at step {step}")
            if step:  # step 0 is the warm-up
                par += bm.last_parallel
                seq_t.append(ts)
                bat_t.append(tb)
                seq_cpu.append(cpu_s)
                bat_cpu.append(cb)
                nodes.append(np.mean([c.trie_nodes for c in cs]))
            for rows in (seq_rows, bat_rows):
                for m, off in zip(rows, offs):
                    assert m.accept_token(toks[off + step])
    return dict(seq=np.array(seq_t), bat=np.array(bat_t), nodes=float(np.mean(nodes)), mask=seq_mask,
                seq_cores=sum(seq_cpu) / sum(seq_t), bat_cores=sum(bat_cpu) / sum(bat_t), par=par)


def bench_heavy(name, vocab, tokenizer, n_rows, threads, reps):
    from gramopt.runtime import BatchMatcher, Matcher
    g, sample = load(name)
    toks, _ = tokenizer.trajectory(sample, 150)
    toks = [t for t in toks if t not in vocab.eos_ids]
    probe = Matcher(g, vocab)
    row = np.zeros(vocab.n_words, np.int32)
    cost = []
    for i, t in enumerate(toks):
        cost.append((probe.fill_next_token_bitmask(row).trie_nodes, i))
        probe.accept_token(t)
    spots = sorted(i for _, i in sorted(cost, reverse=True)[:n_rows])
    spots = (spots * n_rows)[:n_rows]

    def fresh():
        ms = []
        for off in spots:
            m = Matcher(g, vocab)
            for t in toks[:off]:
                m.accept_token(t)
            ms.append(m)
        return ms

    seq_mask = np.zeros((n_rows, vocab.n_words), np.int32)
    bat_mask = np.zeros_like(seq_mask)
    seq_t, bat_t, seq_cpu, bat_cpu, nodes, work = [], [], [], [], [], []
    with BatchMatcher(threads, min_parallel_work=0) as bm:
        for rep in range(reps + 1):
            a, b = fresh(), fresh()

            def run_seq():
                t, c = time.perf_counter(), time.process_time()
                cs = [m.fill_next_token_bitmask(seq_mask, r) for r, m in enumerate(a)]
                return time.perf_counter() - t, time.process_time() - c, cs

            def run_bat():
                t, c = time.perf_counter(), time.process_time()
                bm.batch_fill_next_token_bitmask(b, bat_mask)
                return time.perf_counter() - t, time.process_time() - c

            if rep % 2:
                tb, cb = run_bat()
                ts, cs_, cs = run_seq()
            else:
                ts, cs_, cs = run_seq()
                tb, cb = run_bat()
            if not np.array_equal(seq_mask, bat_mask):
                raise SystemExit(f"{name}: batch and sequential masks differ (heavy rows)")
            if rep:
                seq_t.append(ts)
                bat_t.append(tb)
                seq_cpu.append(cs_)
                bat_cpu.append(cb)
                nodes.append(np.mean([c.trie_nodes for c in cs]))
                work.append(sum(c.trie_nodes + c.items for c in cs))
    return dict(seq=np.array(seq_t), bat=np.array(bat_t), nodes=float(np.mean(nodes)),
                seq_cores=sum(seq_cpu) / sum(seq_t), bat_cores=sum(bat_cpu) / sum(bat_t),
                work=float(np.mean(work)))


def bench_apply(mask, vocab_size, reps=20):
    import torch
    from gramopt.runtime import apply_token_bitmask_inplace
    base = torch.randn(mask.shape[0], vocab_size)
    words = torch.from_numpy(mask)
    times = {"cpu": [], "torch": []}
    for i in range(reps):
        for backend in (("cpu", "torch") if i % 2 else ("torch", "cpu")):
            x = base.clone()
            t = time.perf_counter()
            apply_token_bitmask_inplace(x, words, backend=backend)
            times[backend].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--grammars", default="c,json,arithmetic,xgr-json")
    ap.add_argument("--heavy-reps", type=int, default=5)
    args = ap.parse_args()
    from gramopt.bench.engines import Env
    from gramopt.runtime import Vocab
    vocab = Vocab.qwen()
    env = Env.create(vocab)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cores} cores, load average {os.getloadavg()[0]:.2f} at start; {args.rows} rows, "
          f"BatchMatcher({args.threads}), {args.steps} steps per grammar (Qwen vocabulary)")
    print()
    print(f"{'grammar':12} {'seq ms/step':>12} {'batch ms/step':>14} {'seq total ms':>13} "
          f"{'batch total ms':>15} {'speedup':>8} {'trie nodes/row':>15} {'cores used seq/batch':>21} "
          f"{'parallel steps':>15}")
    last = None
    for name in args.grammars.split(","):
        r = bench_grammar(name, vocab, env.tokenizer, args.rows, args.threads, args.steps)
        last = r["mask"]
        s, b = r["seq"], r["bat"]
        print(f"{name:12} {np.median(s) * 1e3:12.2f} {np.median(b) * 1e3:14.2f} {s.sum() * 1e3:13.1f} "
              f"{b.sum() * 1e3:15.1f} {s.sum() / b.sum():7.2f}x {r['nodes']:15.0f} "
              f"{r['seq_cores']:10.2f}/{r['bat_cores']:.2f} {r['par']:10d}/{len(s)}")
    print(f"\n(load average {os.getloadavg()[0]:.2f}; masks identical at every step)")
    if args.heavy_reps > 0:
        print(f"\nheavy rows: the {args.rows} most expensive positions per grammar, fresh matchers, threads always, "
              f"{args.heavy_reps} repetitions")
        print(f"{'grammar':12} {'seq ms/batch':>12} {'batch ms/batch':>14} {'seq total ms':>13} "
              f"{'batch total ms':>15} {'speedup':>8} {'trie nodes/row':>15} {'cores used seq/batch':>21} "
              f"{'work/batch':>11}")
        for name in args.grammars.split(","):
            r = bench_heavy(name, vocab, env.tokenizer, args.rows, args.threads, args.heavy_reps)
            s, b = r["seq"], r["bat"]
            print(f"{name:12} {np.median(s) * 1e3:12.2f} {np.median(b) * 1e3:14.2f} {s.sum() * 1e3:13.1f} "
                  f"{b.sum() * 1e3:15.1f} {s.sum() / b.sum():7.2f}x {r['nodes']:15.0f} "
                  f"{r['seq_cores']:10.2f}/{r['bat_cores']:.2f} {r['work']:11.0f}"
                  f"{'' if r['work'] >= MIN_PARALLEL_WORK else ' (default: sequential)'}")
        print(f"(load average {os.getloadavg()[0]:.2f}; masks identical; work = trie nodes + Earley "
              f"items; the default BatchMatcher uses threads from {MIN_PARALLEL_WORK})")
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    t = bench_apply(last, len(vocab))
    print(f"\napply_token_bitmask_inplace on ({args.rows}, {len(vocab)}) float32 logits, median of 20:")
    print(f"  backend cpu (fused numba) {t['cpu'] * 1e3:.3f} ms   backend torch {t['torch'] * 1e3:.3f} ms   "
          f"torch/cpu {t['torch'] / t['cpu']:.1f}x")


if __name__ == "__main__":
    main()
