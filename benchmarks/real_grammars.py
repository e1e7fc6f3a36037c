"""Value by default on hand-written grammars nobody here wrote: each target, in each engine.

    python benchmarks/real_grammars.py                        # the held-out sample, portable and xgrammar
    python benchmarks/real_grammars.py --targets portable,xgrammar,generic --engines xgrammar,llguidance,llama.cpp
    python benchmarks/real_grammars.py --data corpus --only json,c   # another folder of the same layout
    python benchmarks/real_grammars.py --summary DIR/rows.jsonl      # the tables again, from the rows

Data: ``benchmarks/data/grammars-heldout/`` (``SOURCES.md`` there): GBNF, EBNF and Lark grammars
from repositories the optimizer was not tuned on, in ``gbnf/``, ``ebnf/``, ``lark/``, each with the
texts it accepts beside it (``NAME.sampleN.txt``, checked in their own engine).

Per target: ``gramopt optimize FOLDER -o OUT --target T -j 1`` (a build step's command: one batch,
defaults, full verification and the judge), then per grammar the exit code, rules before and after,
whether the output is the input's own text, and the batch's line for it. Then, with the Qwen
vocabulary, in every engine that loads the input (as its user hands it over: GBNF to llama.cpp and
llguidance, EBNF to xgrammar, Lark to llguidance; otherwise gramopt's text in the engine's
dialect), the input, an A/A copy and the output are stepped interleaved along each sample (cut at
``--max-tokens``; a grammar without samples gets seeded derived sentences), masks compared at every
step, exactly as ``jsonschemabench_bench.py`` steps a schema's instances (its ``measure_engines``
and its table). Ratio = input / output per-mask time (> 1: the output is faster).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from jsonschemabench_bench import Loader, instances, optimize_batch, step_rows, summarize, write_table  # noqa: E402

DATA = os.path.join(HERE, "data", "grammars-heldout")
DIALECTS = ("gbnf", "ebnf", "lark")


def grammar_files(data: str, only: list[str]) -> list[str]:
    """The grammars under ``data`` (``gbnf/``, ``ebnf/``, ``lark/``), sorted; ``only``: those
    whose file name contains one of these substrings."""
    out = []
    for d in DIALECTS:
        out += sorted(glob.glob(os.path.join(data, d, f"*.{d}")))
    return [p for p in out if not only or any(o in os.path.basename(p) for o in only)]


def samples(path: str) -> list[tuple[str, str]]:
    """(text, "valid") of each ``NAME.sampleN.txt`` beside grammar ``path``, in N order."""
    stem = path.rsplit(".", 1)[0]
    found = glob.glob(f"{stem}.sample*.txt")
    found.sort(key=lambda s: int(s.rsplit(".sample", 1)[1][:-4] or 0))
    return [(open(s, encoding="utf-8").read(), "valid") for s in found]


def optimize_rows(paths: list[str], targets: list[str], work: str, timeout: int) -> list[dict]:
    """One row per grammar and target: the batch's outcome, rules before and after, identical."""
    from gramopt.formats import read
    rows = []
    for t in targets:
        print(f"optimize: batch --target {t}, {len(paths)} grammars", file=sys.stderr, flush=True)
        done = optimize_batch(paths, t, work, t, timeout)
        for p in paths:
            name, ext = os.path.basename(p).rsplit(".", 1)
            row = {"schema": name, "run": f"{t}@{ext}", "target": t, "src": p, "path": p,
                   **{k: v for k, v in done[p].items()}}
            if row.get("out"):
                try:
                    g_in, g_out = read(p), read(row["out"])
                    row["rules_in"], row["rules_out"] = len(g_in.rules), len(g_out.rules)
                    row["same_grammar"] = g_in == g_out  # the same rules, however the text is spelled
                except Exception as e:  # noqa: BLE001 - a re-read failure is a finding, not a crash
                    row["why"] = f"re-read: {str(e).splitlines()[0][:160]}"
                row["identical"] = open(p, encoding="utf-8").read() == open(row["out"], encoding="utf-8").read()
            rows.append(row)
    return rows


def per_grammar(rows: list[dict]) -> str:
    """One line per grammar: rules in and, per target, rules out (``=``: the input's own rules,
    ``==``: its own text; the exit code when nothing was written), then per target the count of
    grammars given back unchanged."""
    targets = list(dict.fromkeys(r["target"] for r in rows))
    names = list(dict.fromkeys((r["schema"], r["src"]) for r in rows))
    lines = ["| grammar | rules in | " + " | ".join(f"{t}: rules out" for t in targets) + " |",
             "|---|---:|" + "---:|" * len(targets)]
    for name, src in names:
        cells, rin = [], ""
        for t in targets:
            r = next(x for x in rows if x["schema"] == name and x["src"] == src and x["target"] == t)
            rin = r.get("rules_in", rin)
            cells.append("==" if r.get("identical") else "=" if r.get("same_grammar") else
                         str(r["rules_out"]) if r.get("rules_out") else f"exit {r.get('rc')}")
        lines.append(f"| {os.path.basename(src)} | {rin} | " + " | ".join(cells) + " |")
    lines.append("")
    for t in targets:
        rs = [r for r in rows if r["target"] == t]
        same = sum(1 for r in rs if r.get("same_grammar") or r.get("identical"))
        fewer = sum(1 for r in rs if r.get("rules_out") and r.get("rules_in") and r["rules_out"] < r["rules_in"])
        lines.append(f"- `--target {t}`: {same} of {len(rs)} given back with the input's own rules; "
                     f"{fewer} with fewer rules; "
                     f"{sum(1 for r in rs if r.get('rc') != 0)} not written")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--targets", default="portable,xgrammar")
    ap.add_argument("--engines", default="xgrammar,llguidance,llama.cpp")
    ap.add_argument("--only", default="", help="comma-separated substrings of grammar file names")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=150)
    ap.add_argument("--max-instances", type=int, default=3, help="samples per grammar")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per grammar in the batch")
    ap.add_argument("--slow-engine-instances", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--summary", default="", help="print the tables of an existing rows.jsonl")
    a = ap.parse_args(argv)
    engines = [e for e in a.engines.split(",") if e]
    if a.summary:
        rows = [json.loads(x) for x in open(a.summary, encoding="utf-8")]
        print(per_grammar(rows) + "\n\n" + summarize(rows, engines))
        return 0
    paths = grammar_files(a.data, [o for o in a.only.split(",") if o])
    if not paths:
        print(f"{__file__}: error: no grammar under {a.data}/{{{','.join(DIALECTS)}}}", file=sys.stderr)
        return 2
    out = a.out or os.path.join(HERE, "results", f"real-grammars-{datetime.date.today().isoformat()}")
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    rows = optimize_rows(paths, [t for t in a.targets.split(",") if t], work, a.timeout)
    from gramopt.engines import Env
    from gramopt.runtime import Vocab
    loader = Loader(Env.create(Vocab.qwen()))
    step_rows(loader, rows, lambda row: samples(row["src"])[: a.max_instances] or instances(row, [], a.max_instances),
              engines, a, os.path.join(out, "rows.jsonl"))
    return write_table(out, f"# Hand-written grammars from other repositories: value by default, in the engines\n\n"
                            f"`python benchmarks/real_grammars.py {' '.join(argv if argv is not None else sys.argv[1:])}` "
                            f"on {datetime.date.today().isoformat()}: {len(paths)} grammars from {a.data}, targets "
                            f"{a.targets}, {a.repeats} timed repeats, ≤ {a.max_tokens} tokens and ≤ {a.max_instances} "
                            f"samples per grammar", per_grammar(rows) + "\n\n" + summarize(rows, engines))


if __name__ == "__main__":
    sys.exit(main())
