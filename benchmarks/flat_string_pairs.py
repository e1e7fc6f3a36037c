"""The default target's string forms against the input, per mask at p95, in xgrammar and llguidance.

    python benchmarks/flat_string_pairs.py BEFORE_DIR AFTER_DIR --only NAME,NAME,… > pairs.jsonl
    python benchmarks/flat_string_pairs.py --summary pairs.jsonl

BEFORE_DIR and AFTER_DIR are ``jsonschemabench_bench.py --runs portable@json`` output folders (their
``work/`` holds the converter's text ``NAME.xgrammar.ebnf`` and the outputs ``NAME.json.portable.gbnf``).
Per schema three forms are stepped interleaved along its valid instances (``cost_pairs.time_forms``:
minimum of 3 repeats, p95 per mask in µs, masks compared with the input's): the input (xgrammar's
EBNF, with its lookahead), R = AFTER's output, F = BEFORE's output with its repetitions written flat
(``transforms.reshape.flat_stars``: the form the fix-up gives BEFORE's star of a reference).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_pairs import time_forms  # noqa: E402
from jsonschemabench_bench import DATA, Loader  # noqa: E402


def measure(before: str, after: str, names: list[str]) -> None:
    from gramopt.engines import Env
    from gramopt.engines.jsonschema import load_schemas
    from gramopt.formats import read, write
    from gramopt.runtime import Vocab
    from gramopt.transforms.reshape import flatten_repetition_bodies
    loader = Loader(Env.create(Vocab.qwen()))
    for n in names:
        tests = [t for t in load_schemas(os.path.join(DATA, f"{n}.json"))[0].tests if t[1]][:2]
        if not tests:
            continue
        inp = open(os.path.join(after, "work", f"{n}.xgrammar.ebnf"), encoding="utf-8").read()
        r = open(os.path.join(after, "work", f"{n}.json.portable.gbnf"), encoding="utf-8").read()
        f = write(flatten_repetition_bodies(read(os.path.join(before, "work", f"{n}.json.portable.gbnf")))[0], "gbnf")
        row = {"schema": n}
        for e in ("xgrammar", "llguidance"):
            res = time_forms(loader, e, [(inp, "ebnf"), (r, "gbnf"), (f, "gbnf")], tests, 3, 150, 1, 40)
            row[e] = {k: v.get("p95") for k, v in res.get("forms", {}).items()} | {"aa": res.get("aa", {}).get("p95")}
            row[e + "_diff"] = {k: v["mask_diff_step"] for k, v in res.get("forms", {}).items() if v.get("mask_diff_step")}
        print(json.dumps(row), flush=True)


def summary(path: str) -> str:
    rows = [json.loads(x) for x in open(path, encoding="utf-8")]
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    out = ["| engine | schemas | input p95 µs (median) | R p95 µs | F p95 µs | R / input | F / input | F / R | "
           "A/A / input | F's mask differences |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for e in ("xgrammar", "llguidance"):
        rs = [r for r in rows if all(r[e].get(k) for k in ("0", "1", "2"))]
        med = lambda k: sorted(r[e][k] for r in rs)[len(rs) // 2]  # noqa: E731
        aa = [r[e]["aa"] / r[e]["0"] for r in rs]
        diffs = [r["schema"] for r in rows if r.get(e + "_diff", {}).get("2")]
        out.append(f"| {e} | {len(rs)} | {med('0'):.0f} | {med('1'):.0f} | {med('2'):.0f} | "
                   f"{gm([r[e]['1'] / r[e]['0'] for r in rs]):.2f}× | {gm([r[e]['2'] / r[e]['0'] for r in rs]):.2f}× | "
                   f"{gm([r[e]['2'] / r[e]['1'] for r in rs]):.2f}× | {min(aa):.2f}–{max(aa):.2f} | "
                   f"{', '.join(diffs) or 0} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--only", default="")
    ap.add_argument("--summary", default="")
    a = ap.parse_args(argv)
    if a.summary:
        print(summary(a.summary))
        return 0
    measure(a.dirs[0], a.dirs[1], [n for n in a.only.split(",") if n])
    return 0


if __name__ == "__main__":
    sys.exit(main())
