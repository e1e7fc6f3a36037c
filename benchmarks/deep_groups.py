"""A string's maxLength in llama.cpp's form under ``--target xgrammar``: per-mask time in
xgrammar before and after, and what writing ``char`` flat costs xgrammar's compile.

    python benchmarks/deep_groups.py [--schemas NAME,...] [--out FILE.json]

Part 1, per JSONSchemaBench schema (default: the two session 18 left slow): the schema
through llama.cpp's converter, ``optimize(target="xgrammar")`` (the judge included), then
xgrammar's Qwen masks along the schema's first valid test instance for the input, an A/A copy
of it and the output, interleaved, 5 passes, the minimum per step; p50 / p95 / max in ms.
Part 2: xgrammar's compile of a ``maxLength`` chain of N characters as llama.cpp writes it,
and after the xgrammar fix-up (``char`` written flat, deep groups lifted), one compile each
(``transforms.reshape.flat_stars.MAX_FLAT_REFERENCES`` bounds N where the fix-up flattens).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "jsonschemabench")
SCHEMAS = ("Github_trivial---o13272", "Github_easy---o39494")
CHAINS = (64, 128, 256)


def _quantiles(per: list[float]) -> dict:
    s = sorted(per)
    return {"p50_ms": statistics.median(per) * 1e3, "p95_ms": s[int(0.95 * (len(s) - 1))] * 1e3, "max_ms": s[-1] * 1e3}


def schema_row(name: str, eng, env) -> dict:
    from gramopt.engines.jsonschema import convert_text, load_schemas
    from gramopt.formats import parse
    from gramopt.passes import optimize
    path = os.path.join(DATA, name + ".json")
    text, dialect = convert_text(load_schemas(path)[0], "llama.cpp")
    g = parse(text, dialect)
    out = optimize(g, target="xgrammar").grammar
    tests = json.load(open(path, encoding="utf-8"))["tests"]
    instance = next(json.dumps(t["data"]) for t in tests if t.get("valid"))
    tokens = env.tokenizer.encode(instance)
    forms = {"input": eng.compile(g), "A/A copy": eng.compile(g), "output": eng.compile(out)}
    runs = {k: [] for k in forms}
    for _ in range(5):
        for k, h in forms.items():
            runs[k].append(eng.run(h, tokens))
    row = {"schema": name, "tokens": len(tokens), "output_rules": len(out.rules)}
    for k, rs in runs.items():
        row[k] = _quantiles([min(r[i] for r in rs) for i in range(len(tokens))])
    return row


def chain_row(n: int, eng) -> dict:
    from gramopt.formats import parse
    from gramopt.targets.xgrammar import fixup
    g = parse('root ::= "{" s "}"\ns ::= "\\"" ' + "(c " * n + ")?" * n + ' "\\""\n'
              'c ::= [^"\\\\] | "\\\\" (["nt] | "u" [0-9a-f]{4})\n', "gbnf")
    row = {"characters": n}
    for k, x in (("as written", g), ("xgrammar fix-up", fixup(g))):
        t = time.perf_counter()
        eng.compile(x)
        row[k + " compile_s"] = time.perf_counter() - t
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemas", default=",".join(SCHEMAS))
    ap.add_argument("--chains", default=",".join(map(str, CHAINS)))
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    from gramopt.engines import ENGINES, Env
    from gramopt.runtime.vocab import Vocab
    env = Env.create(Vocab.qwen())
    eng = ENGINES["xgrammar"](env)
    eng.prepare()
    rows = [schema_row(s, eng, env) for s in args.schemas.split(",") if s]
    print("| schema | tokens | input p50 / p95 / max ms | A/A copy p95 | output p50 / p95 / max ms | p95 ratio |")
    print("|---|---:|---|---:|---|---:|")
    for r in rows:
        i, a, o = r["input"], r["A/A copy"], r["output"]
        print(f"| {r['schema']} | {r['tokens']} | {i['p50_ms']:.2f} / {i['p95_ms']:.2f} / {i['max_ms']:.2f} | "
              f"{a['p95_ms']:.2f} | {o['p50_ms']:.2f} / {o['p95_ms']:.2f} / {o['max_ms']:.2f} | "
              f"{i['p95_ms'] / o['p95_ms']:.0f}x |", flush=True)
    chains = [chain_row(int(n), eng) for n in args.chains.split(",") if n]
    print("\n| maxLength chain | compile as written s | compile after the xgrammar fix-up s |\n|---:|---:|---:|")
    for c in chains:
        print(f"| {c['characters']} | {c['as written compile_s']:.2f} | {c['xgrammar fix-up compile_s']:.2f} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"schemas": rows, "chains": chains}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
