"""xgrammar's derived lookaheads, kept or merged away: per schema, the default target's and the
xgrammar target's outputs with ``keeps_derived_lookaheads`` (and the default target's
``names_nullable=False``) against the same targets without them, timed per mask in xgrammar
beside the input and an A/A copy.

    python benchmarks/derived_lookaheads.py [--schemas NAME,...] [--out DIR]

Data: JSONSchemaBench schemas (``benchmarks/data/jsonschemabench``), xgrammar's converter; the
default list is the five the default target made slower than 0.9x in xgrammar in session 11
(``results/jsonschemabench-2026-11-27/session11``). Timing as ``cost_pairs.time_forms``: forms
stepped interleaved along the schema's valid instances (Qwen vocabulary), minimum of the
repeats per step, per-mask p95; ratio = input p95 / form p95 (> 1: faster than the input).
Outputs are made with ``verify=False`` and no judge (the forms the judge is shown).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_pairs import time_forms  # noqa: E402
from jsonschemabench_bench import DATA, Loader  # noqa: E402

SCHEMAS = ("Glaiveai2K---find_hotel_c7308d5e", "BFCL_javascript_16", "BFCL_simple_131", "Github_easy---o90404",
           "Github_medium---o12077")


def forms(grammar) -> dict:
    """label -> grammar: each target before its judge, with and without the derived lookaheads."""
    from gramopt import passes, targets
    out = {}
    for name in ("portable", "xgrammar"):
        t = dataclasses.replace(targets.get(name), guard=None, checked_in=())
        off = dataclasses.replace(t, keeps_derived_lookaheads=False, names_nullable=True)
        out[f"{name} merged"] = passes.optimize(grammar, target=off, verify=False).grammar
        out[f"{name} kept"] = passes.optimize(grammar, target=t, verify=False).grammar
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schemas", default=",".join(SCHEMAS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    from gramopt.engines import Env
    from gramopt.engines.jsonschema import convert_text, load_schemas
    from gramopt.formats import parse, write
    from gramopt.runtime import Vocab
    loader = Loader(Env.create(Vocab.qwen()))
    rows = []
    labels = ("portable merged", "portable kept", "xgrammar merged", "xgrammar kept")
    print("| schema | A/A | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for name in a.schemas.split(","):
        sch = load_schemas(os.path.join(DATA, name + ".json"))[0]
        tests = [t for t in sch.tests if t[1]][: a.instances]
        text, dialect = convert_text(sch, "xgrammar")
        g = parse(text, dialect)
        fs = forms(g)
        texts = [(text, dialect)] + [(write(fs[k], "ebnf"), "ebnf") for k in labels]
        r = time_forms(loader, "xgrammar", texts, tests, a.repeats, 200, 1, 40)
        row = {"schema": name, "instances": len(tests), "timing": r,
               "rules": {k: len(fs[k].rules) for k in labels}}
        rows.append(row)
        if "forms" not in r:
            print(f"| {name} | {r.get('error', '?')} |" + " |" * len(labels))
            continue
        base = r["forms"][0]["p95"]
        cells = []
        for i, k in enumerate(labels, start=1):
            f = r["forms"].get(i, {})
            cells.append(f"{base / f['p95']:.2f}" + (" (mask diff)" if "mask_diff_step" in f else "")
                         if "p95" in f else f.get("error", "?")[:30])
        print(f"| {name} | {base / r['aa']['p95']:.2f} | " + " | ".join(cells) + " |", flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "rows.json"), "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
