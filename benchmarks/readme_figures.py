"""The figures the README quotes, made from the results files the benchmarks wrote.

    python benchmarks/readme_figures.py                       # check README.md against the files
    python benchmarks/readme_figures.py --run serving=NEW.json --run llamacpp=NEW.json

Each ``Figure`` names a benchmark's results file (the expected results, committed under
benchmarks/results/) and turns it into the exact phrase the README prints: the README's
numbers are the file's, never typed by hand (tests/test_benchmark_results.py checks every
phrase is in README.md). As llguidance checks a MaskBench run against its expected file,
``--run NAME=FILE`` checks a new run of that benchmark against the expected one: it prints
both phrases and fails (exit 1) when a count that does not depend on the machine differs
(steps, masks that differ, grammars measured, verdicts); timings are shown side by side,
as the machine makes them.

Without ``--run``: exit 1 when a phrase is missing from README.md (the README was edited
without the results file, or a results file without the README), naming it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


@dataclass(frozen=True)
class Figure:
    """``phrase(results)`` is the README's text for a results file; ``counts(results)`` the
    machine-independent figures a new run must reproduce."""

    name: str
    benchmark: str
    expected: str  # the results file, relative to the repository
    phrase: Callable[[object], str]
    counts: Callable[[object], dict]

    def load(self, path: Path | None = None):
        return json.loads(((ROOT / self.expected) if path is None else path).read_text(encoding="utf-8"))


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ---------------------------------------------------------------- serving (serving_bench.py)


def serving_phrase(r: dict) -> str:
    h, s = r["headline"], r["stream"]
    t = s["ttfm_ms"]
    ttfm = statistics.median(t["drop-in"]) / statistics.median(t["plain"])
    aa = statistics.median(t["plain-AA"]) / statistics.median(t["plain"])
    gbnf, schema = s["mask_ms"]["grammar"], s["mask_ms"]["schema"]
    equal = "with masks equal at all" if h["mask_diffs"] == 0 else f"with masks differing at {h['mask_diffs']} of"
    verdicts = ("no verdict differs" if s["verdicts"]["disagree"] == 0
                else f"{s['verdicts']['disagree']} verdicts differ")
    return (f"p50 per mask {h['plain_p50_ms']:.0f} ms → {h['drop_p50_ms']:.2f} ms {equal} {h['steps']:,} steps, "
            f"its second compile {h['second_compile_ms']:.2f} ms; time to first mask p50 {ttfm:.2f}× plain "
            f"xgrammar's (A/A {aa:.2f}×); mean mask time on the llama.cpp-form grammars "
            f"{gbnf['plain']['mean']:.0f} ms → {gbnf['drop-in@steady']['mean']:.2f} ms once their optimizations "
            f"finished, on the schemas unchanged ({schema['drop-in@steady']['mean']:.2f} vs "
            f"{schema['plain']['mean']:.2f} ms); {verdicts} on the schemas' {s['verdicts']['instances']} test "
            f"instances.")


def serving_counts(r: dict) -> dict:
    s = r["stream"]
    return {"headline steps": r["headline"]["steps"], "headline masks differing": r["headline"]["mask_diffs"],
            "stream steps": s["steps"], "stream masks differing (drop-in)": s["mask_diffs"]["drop-in"],
            "test instances": s["verdicts"]["instances"], "verdicts differing": s["verdicts"]["disagree"]}


# ---------------------------------------------------------------- llama.cpp (llamacpp_bench.py)


def _measured(rows: list) -> list:
    return [r for r in rows if "steps" in r]  # as llamacpp_bench.py's summary


def llamacpp_phrase(rows: list) -> str:
    m = _measured(rows)
    g50 = geomean(r["p50_before"] / r["p50_after"] for r in m)
    g95 = geomean(r["p95_before"] / r["p95_after"] for r in m)
    return f"per-mask geomean {g50:.2f}× at p50 and {g95:.2f}× at p95"


def llamacpp_counts(rows: list) -> dict:
    m = _measured(rows)
    return {"grammars measured": len(m), "masks equal": sum(bool(r["equal"]) for r in m),
            "grammars with more parse stacks": sum(r["stacks_after"] > r["stacks_before"] for r in m)}


FIGURES = [
    Figure("serving", "benchmarks/serving_bench.py", "benchmarks/results/serving-2026-11-27.json",
           serving_phrase, serving_counts),
    Figure("llamacpp", "benchmarks/llamacpp_bench.py", "benchmarks/results/reach-2026-11-25/llamacpp-final.json",
           llamacpp_phrase, llamacpp_counts),
]


def missing_from_readme(text: str) -> list[tuple[str, str]]:
    """(figure name, phrase) for each expected phrase README ``text`` does not contain
    (line breaks in the README count as spaces)."""
    flat = " ".join(text.split())
    return [(f.name, p) for f in FIGURES if (p := f.phrase(f.load())) not in flat]


def compare(figure: Figure, new: Path) -> bool:
    """Print the expected and the new run's phrase and counts; True when the counts agree."""
    want, got = figure.load(), figure.load(new)
    print(f"{figure.name} ({figure.benchmark}):\n  expected ({figure.expected}): {figure.phrase(want)}\n"
          f"  this run ({new}): {figure.phrase(got)}")
    ok = True
    for key, value in figure.counts(want).items():
        mine = figure.counts(got).get(key)
        mark = "ok" if mine == value else "DIFFERS"
        ok &= mine == value
        print(f"  {key}: expected {value}, this run {mine}  {mark}")
    return ok


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", default=[], metavar="NAME=FILE",
                    help=f"a new results file to check against the expected one ({', '.join(f.name for f in FIGURES)})")
    args = ap.parse_args(argv)
    if args.run:
        by_name = {f.name: f for f in FIGURES}
        ok = True
        for item in args.run:
            name, _, path = item.partition("=")
            if name not in by_name or not path:
                ap.error(f"--run {item}: NAME=FILE with NAME one of {', '.join(by_name)}")
            ok &= compare(by_name[name], Path(path))
        return 0 if ok else 1
    missing = missing_from_readme(README.read_text(encoding="utf-8"))
    for name, phrase in missing:
        print(f"README.md does not say what {name}'s results file does: {phrase}")
    if not missing:
        print(f"README.md quotes {len(FIGURES)} results files exactly: " + ", ".join(f.expected for f in FIGURES))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
