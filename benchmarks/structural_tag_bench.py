"""Structural tags (tool calling): per-mask time of gramopt's runtime vs xgrammar on one
trajectory, Qwen vocabulary.

    python benchmarks/structural_tag_bench.py [--reps 3]

The format is tests/test_structural_tag.py's two-tool call format (JSON-schema arguments).
The trajectory: a paragraph of free text, a get_weather call, more text, an add call, more
text (Qwen BPE tokens). Engines, each filling a mask before every token then accepting it:

    gramopt            Matcher(parse_structural_tag(format))   (TagDispatch lowered to rules)
    xgrammar           compile_structural_tag(format)          (its native TagDispatch)
    xgrammar-lowered   gramopt's lowered grammar written as xgrammar EBNF and compiled by
                       xgrammar (what `gramopt optimize` hands xgrammar today: plain rules)

Printed: compile ms (the first pass; gramopt's after a one-rule grammar has loaded numba's
kernels), p50 / p95 / max μs per mask over the measured repetitions (one warm-up).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

TEXT = ("Sure, let me look that up for you. The weather service needs a city name, so I will "
        "ask it about Paris in celsius. ")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    import xgrammar as xgr
    from test_structural_tag import CALLS, TOOL_CALL
    from gramopt.bench.engines import Env
    from gramopt.formats import write
    from gramopt.formats.structural_tag import parse_structural_tag
    from gramopt.runtime import Matcher, Vocab
    vocab = Vocab.qwen()
    env = Env.create(vocab)
    toks = env.tokenizer.encode(TEXT + CALLS[0] + " Now the sum. " + CALLS[1] + " " + TEXT)
    info = xgr.TokenizerInfo(vocab.token_bytes, xgr.VocabType.RAW, vocab_size=len(vocab),
                             stop_token_ids=list(vocab.eos_ids), add_prefix_space=False)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    grammar = parse_structural_tag(TOOL_CALL)
    from gramopt.grammar import Grammar, Literal, Rule  # numba JIT / cache load, not counted
    Matcher(Grammar((Rule("root", Literal("a")),), "root"), vocab).allowed_tokens()

    def run_gramopt():
        t = time.perf_counter()
        m = Matcher(grammar, vocab)
        return m, time.perf_counter() - t

    def run_xgr(lowered):
        t = time.perf_counter()
        cg = (compiler.compile_grammar(write(grammar, "ebnf")) if lowered
              else compiler.compile_structural_tag(TOOL_CALL))
        return xgr.GrammarMatcher(cg), time.perf_counter() - t

    engines = {"gramopt": run_gramopt, "xgrammar": lambda: run_xgr(False),
               "xgrammar-lowered": lambda: run_xgr(True)}
    res = {}
    for name, make in engines.items():
        times, comp = [], None
        for rep in range(args.reps + 1):
            m, c = make()
            comp = c if comp is None else comp
            if name == "gramopt":
                buf = np.zeros(vocab.n_words, np.int32)
                fill = lambda: m.fill_next_token_bitmask(buf)  # noqa: E731
            else:
                bm = xgr.allocate_token_bitmask(1, len(vocab))
                fill = lambda: m.fill_next_token_bitmask(bm)  # noqa: E731
            for t in toks:
                s = time.perf_counter()
                fill()
                if rep:
                    times.append(time.perf_counter() - s)
                assert m.accept_token(t), (name, t)
        res[name] = (comp, np.array(times) * 1e6)
    print(f"{len(toks)} tokens per pass, {args.reps} measured passes, load average {os.getloadavg()[0]:.2f}")
    print(f"{'engine':18} {'compile ms':>11} {'p50 us':>9} {'p95 us':>9} {'max us':>9}")
    for name, (comp, t) in res.items():
        print(f"{name:18} {comp * 1e3:11.1f} {np.percentile(t, 50):9.1f} {np.percentile(t, 95):9.1f} {t.max():9.1f}")


if __name__ == "__main__":
    main()
