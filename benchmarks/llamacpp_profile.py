"""Where llama.cpp's grammar sampler spends a mask, and what a grammar's form can change of it.

    python benchmarks/llamacpp_profile.py [--max-tokens 40] [--only NAME] [--reps 3]

How llama.cpp fills a mask (``llama_grammar_apply_impl`` in ``src/llama-grammar.cpp``,
llama-cpp-python 0.3.36), read from its source:

1. every token of the vocabulary is decoded from UTF-8 into a fresh vector of code points
   (one allocation per token, ~150k per call, whatever the grammar): the **floor**;
2. the parse *stacks* (one per distinct way the grammar may go on; llama.cpp keeps them
   all, it has no lookahead) are tried one after another, each on the candidates the
   stacks before it rejected: a stack whose top character class takes no candidate scans
   them all, so every extra stack at a decision point costs one pass over ~the whole
   vocabulary;
3. a candidate whose first code point matches is followed into the grammar code point by
   code point (the stacks re-expanded at every level), so a token the mask *allows* is
   walked through all its code points: inside a JSON string, where ~150k tokens are
   allowed, this **walk** costs about as much as the floor again. Which tokens are
   allowed is the language's, not the form's.

So a grammar's form reaches only the stack term (2) and the per-level expansion work of
(3). This script measures the three terms and the stacks themselves:

* synthetic grammars (same vocabulary): the floor (``root ::= "a"``), the cost per extra
  stack (k alternatives with distinct first characters, k = 1…32), the walk
  (``[^"]*`` and a JSON ``char*`` string body);
* per corpus grammar (the cases of ``llamacpp_bench.py``) before and after ``optimize
  --target llama.cpp``, along the first sample: per step the mask time (min of
  ``--reps``), llama.cpp's own stack count and total stack depth (read through the C++
  functions libllama exports: ``llama_grammar_init_impl``, ``llama_grammar_get_stacks``,
  ``llama_grammar_accept_impl``; libstdc++'s vector layout), and the allowed tokens.
  Then a least-squares fit T ≈ floor + a·stacks + b·allowed over every step, and the
  bounds it implies: no form beats T / floor (the floor is paid whatever the grammar);
  removing stacks alone gives at most T / (floor + a + b·allowed). The walk's cost also
  depends on the order in which a level's stacks are tried (the first one sees every
  candidate; ``gramopt.targets.llamacpp``), which the fit does not model.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from llamacpp_bench import cases, encoder  # noqa: E402
from llamacpp_stacks import GrammarProbe  # noqa: E402

from gramopt.formats import write  # noqa: E402
from gramopt.passes import optimize  # noqa: E402
from gramopt.runtime.vocab import Vocab  # noqa: E402

FLOOR = 'floor: root ::= "a"'
WALK = 'walk: [^"]* (1 class)'
SYNTHETIC = {
    FLOOR: 'root ::= "a"',
    **{f"{k} stacks: {k} alternatives, distinct first chars": "root ::= " + " | ".join(
        f'"{c}x"' for c in "abcdefghijklmnopqrstuvwxyzABCDEF"[:k]) for k in (2, 8, 32)},
    "1 stack: the same 8 as one class": 'root ::= [a-h] "x"',
    WALK: 'root ::= [^"]* "\\""',
    "walk: JSON char* (2 alternatives)": 'root ::= char* "\\""\nchar ::= [^"\\\\] | "\\\\" ["\\\\/bfnrt]',
}


def synthetic(probe: GrammarProbe, reps: int) -> dict[str, float]:
    out = {}
    print("| synthetic grammar | stacks | allowed | min ms | p50 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, text in SYNTHETIC.items():
        g = probe.compile(text)
        ts = sorted(probe.mask(g)[0] * 1e3 for _ in range(max(reps, 5)))
        allowed = probe.mask(g)[1]
        st = probe.stacks(g)[0]
        probe.free(g)
        out[name] = ts[0]
        print(f"| {name} | {st} | {allowed} | {ts[0]:.1f} | {ts[len(ts) // 2]:.1f} |", flush=True)
    return out


def trajectory(probe: GrammarProbe, text: str, tokens: list[int], reps: int) -> list[tuple]:
    """Per step (min ms, stacks, depth, allowed) along ``tokens`` in the grammar ``text``."""
    g = probe.compile(text)
    rows = []
    try:
        for t in tokens:
            best = math.inf
            for _ in range(reps):
                dt, allowed = probe.mask(g)
                best = min(best, dt)
            st, depth = probe.stacks(g)
            rows.append((best * 1e3, st, depth, allowed))
            if not np.isfinite(probe.logits[t]):
                break  # the grammar refuses the sample here (llama.cpp would abort on it)
            probe.accept(g, t)
    finally:
        probe.free(g)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3, help="masks per step; the minimum is kept")
    ap.add_argument("--only", help="substring of the grammar names to run")
    ap.add_argument("--no-synthetic", action="store_true")
    args = ap.parse_args()
    vocab = Vocab.qwen()
    enc = encoder(vocab)
    probe = GrammarProbe(vocab)
    syn = {} if args.no_synthetic else synthetic(probe, args.reps)
    if syn:
        floor, walk = syn[FLOOR], syn[WALK]
        per_stack = (syn["32 stacks: 32 alternatives, distinct first chars"] - floor) / 31
        print(f"\nfloor {floor:.1f} ms; each further stack ≈ {per_stack:.2f} ms; walking ~150k allowed "
              f"tokens ≈ {walk - floor:.1f} ms over the floor\n")
    steps = []  # (form, ms, stacks, allowed) over every grammar
    print("| grammar | steps | Σ stacks before → after | Σ depth before → after | max stacks before → after | "
          "mean ms before → after | steps with more stacks after |")
    print("|---|---:|---|---|---|---|---:|")
    for name, g, samples in cases(args.only):
        if g is None or not samples:
            continue
        ids = enc.encode(samples[0], allowed_special=set())[:args.max_tokens]
        try:
            before = trajectory(probe, write(g, "gbnf"), ids, args.reps)
        except RuntimeError:
            print(f"| {name} | – | llama.cpp refuses the input | | | | |")
            continue
        opt = optimize(g, target="llama.cpp", verify=False).grammar
        after = trajectory(probe, write(opt, "gbnf"), ids, args.reps)
        k = min(len(before), len(after))
        before, after = before[:k], after[:k]
        worse = sum(b[1] > a[1] for a, b in zip(before, after))
        steps += [("before", *r[:2], r[3]) for r in before] + [("after", *r[:2], r[3]) for r in after]
        s = [sum(r[i] for r in rows) for rows in (before, after) for i in (1, 2)]
        print(f"| {name} | {k} | {s[0]} → {s[2]} | {s[1]} → {s[3]} | {max(r[1] for r in before)} → "
              f"{max(r[1] for r in after)} | {np.mean([r[0] for r in before]):.1f} → "
              f"{np.mean([r[0] for r in after]):.1f} | {worse} |", flush=True)
    if len(steps) >= 3:
        ms = np.array([s[1] for s in steps])
        X = np.array([[1.0, s[2], s[3] / 1000.0] for s in steps])
        (c, a, b), *_ = np.linalg.lstsq(X, ms, rcond=None)
        fitted = X @ np.array([c, a, b])
        r2 = 1 - ((ms - fitted) ** 2).sum() / max(((ms - ms.mean()) ** 2).sum(), 1e-12)
        print(f"\nfit over {len(steps)} steps: T ≈ {c:.1f} ms + {a:.2f} ms × stacks + {b:.3f} ms × (allowed/1000); "
              f"R² {r2:.2f}")
        bound = [s[1] / (c + a + b * s[3] / 1000.0) for s in steps if s[0] == "before"]
        floor_share = [c / s[1] for s in steps if s[0] == "before"]
        ceiling = [s[1] / c for s in steps if s[0] == "before"]
        print(f"the constant term is {100 * np.median(floor_share):.0f}% of the median input mask, so no form can "
              f"do better than geomean {math.exp(np.mean(np.log(ceiling))):.2f}× over the input's steps; removing "
              f"stacks alone (one per step, the walk at the fitted cost of its allowed tokens): "
              f"{math.exp(np.mean(np.log(bound))):.2f}×. The order in which the stacks are tried inside the walk "
              f"is not in this fit (targets/llamacpp.py: class tried first)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
