"""Where the engine check's size limit (``egraph.Limits.engine_check_size``) falls, on real
inputs and on xgrammar's compile time.

    python benchmarks/engine_check_size.py [--schemas DIR] [--every 10] [--out PREFIX]

Two tables:

1. ``costmodels.engine_shapes.compile_work`` (rules × positions) of real inputs: every grammar of ``corpus/`` and
   ``benchmarks/data/grammars-heldout*``, the schemas of ``benchmarks/data/jsonschemabench``,
   and with ``--schemas`` a JSONSchemaBench checkout's ``data/`` folder (every schema of
   Github_ultra, every ``--every``-th of the others), each schema converted by xgrammar's and
   by llama.cpp's converter (the two the targets use). Printed: how many inputs, the largest,
   and how many lie over the limit.
2. xgrammar's compile seconds (Qwen's vocabulary, one thread, ``cache_enabled=False``) against
   ``compile_work`` for the many-rules trees of ``benchmarks/many_rules.py`` and the largest
   real inputs of table 1: the figure the limit bounds, and that it predicts the time.

Writes ``PREFIX.json`` (every row) when ``--out`` is given; prints the tables (markdown).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

GRAMMAR_EXTS = ("gbnf", "ebnf", "lark", "goebnf", "cfg")
ITEM_SECONDS = 60  # a conversion past this is counted as failed (the table says how many)


def _inputs(schemas: str | None, every: int) -> list[tuple[str, str | None]]:
    """(path, converter) of every input measured; converter None for a grammar."""
    out: list[tuple[str, str | None]] = []
    for pattern in ("corpus/**/*", "benchmarks/data/grammars-heldout*/**/*"):
        for f in sorted(glob.glob(str(ROOT / pattern), recursive=True)):
            if f.rsplit(".", 1)[-1] in GRAMMAR_EXTS:
                out.append((f, None))
    jsons = sorted(glob.glob(str(ROOT / "corpus/jsonschema/*.json")))
    jsons += sorted(glob.glob(str(ROOT / "benchmarks/data/jsonschemabench/*.json")))
    if schemas:
        for folder in sorted(os.listdir(schemas)):
            files = sorted(glob.glob(os.path.join(schemas, folder, "*.json")))
            jsons += files if folder == "Github_ultra" else files[::every]
    for f in jsons:
        out += [(f, "xgrammar"), (f, "llama.cpp")]
    return out


def _alarm(*_):
    raise TimeoutError


def _measure(item: tuple[str, str | None]) -> dict:
    import gramopt
    from gramopt.costmodels.engine_shapes import compile_work
    path, converter = item
    row = {"input": os.path.relpath(path, ROOT) if path.startswith(str(ROOT)) else path, "converter": converter}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(ITEM_SECONDS)
    try:
        g = gramopt.read(path, converter=converter) if converter else gramopt.read(path)
        row.update(rules=len(g.rules), work=compile_work(g))
    except TimeoutError:
        row["error"] = f"past {ITEM_SECONDS} s"
    except Exception as e:  # noqa: BLE001 - a refused input is a row, not a stop
        row["error"] = str(e).splitlines()[0][:120]
    finally:
        signal.alarm(0)
    return row


def _compile_seconds(path: str | None, text: str | None = None) -> float:
    from gramopt.formats import read, write
    from gramopt.engines.xgrammar import _compile_text
    from gramopt.runtime.vocab import Vocab
    if text is None:
        text = write(read(path), "ebnf")
    vocab = Vocab.qwen()
    _compile_text('root ::= "a"', vocab)  # the tokenizer info, built once
    t = time.perf_counter()
    _compile_text(text, vocab, threads=1)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", help="a JSONSchemaBench checkout's data/ folder")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", help="write PREFIX.json")
    ap.add_argument("--trees", default="1250,2500,5000,7000,10000")
    args = ap.parse_args()
    from gramopt.egraph import Limits
    limit = Limits().engine_check_size

    items = _inputs(args.schemas, args.every)
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for k, row in enumerate(pool.map(_measure, items, chunksize=8), 1):
            rows.append(row)
            if k % 200 == 0 or k == len(items):
                print(f"[{k}/{len(items)}] measured", file=sys.stderr, flush=True)
    ok = [r for r in rows if "work" in r]
    ok.sort(key=lambda r: -r["work"])
    over = [r for r in ok if r["work"] > limit]
    print(f"## 1. compile_work of real inputs (limit {limit:,})\n")
    print(f"{len(rows)} inputs ({sum(1 for r in rows if r['converter'] is None)} grammars, "
          f"{sum(1 for r in rows if r['converter'])} schema conversions); {len(ok)} read, "
          f"{len(rows) - len(ok)} refused or failed; **{len(over)} over the limit**\n")
    print("| input | converter | rules | compile_work | share of the limit |")
    print("|---|---|---:|---:|---:|")
    for r in ok[:12]:
        print(f"| {r['input']} | {r['converter'] or '-'} | {r['rules']:,} | {r['work']:,} | {r['work'] / limit:.2f} |")

    print("\n## 2. xgrammar compile seconds against compile_work (Qwen vocabulary, 1 thread)\n")
    import gramopt
    from many_rules import many_rules
    from gramopt.costmodels.engine_shapes import compile_work
    from gramopt.formats import parse, write
    timed = []
    for n in map(int, args.trees.split(",")):
        text = many_rules(n)
        g = parse(text, "gbnf")
        timed.append({"input": f"many_rules tree, {n:,} rules", "work": compile_work(g),
                      "seconds": _compile_seconds(None, text)})
        print(f"  timed {timed[-1]['input']}", file=sys.stderr, flush=True)
    for r in [r for r in ok if r["converter"] is None or r["converter"] == "xgrammar"][:4]:
        path = str(ROOT / r["input"]) if not os.path.isabs(r["input"]) else r["input"]
        try:
            if r["converter"]:
                s = _compile_seconds(None, write(gramopt.read(path, converter="xgrammar"), "ebnf"))
            else:
                s = _compile_seconds(path)
        except Exception as e:  # noqa: BLE001 - e.g. a Lark grammar xgrammar does not read
            print(f"  {r['input']}: not compiled ({str(e).splitlines()[0][:80]})", file=sys.stderr)
            continue
        timed.append({"input": r["input"], "work": r["work"], "seconds": s})
    print("| input | compile_work | xgrammar compile s | ns per work unit |")
    print("|---|---:|---:|---:|")
    for t in sorted(timed, key=lambda t: t["work"]):
        print(f"| {t['input']} | {t['work']:,} | {t['seconds']:.2f} | {t['seconds'] / t['work'] * 1e9:.1f} |")
    if args.out:
        Path(args.out + ".json").write_text(json.dumps({"limit": limit, "rows": rows, "timed": timed}, indent=1))


if __name__ == "__main__":
    main()
