"""What the judge's vocabulary costs against Qwen's whole one: the engine check's own work per engine.

(Every engine is measured on both, llguidance too, which the judge asks over Qwen's whole
vocabulary: ``judge.masks.QWEN_WHOLE``.)

    python benchmarks/judge_vocab.py [--every 16] [--engines xgrammar,llguidance,llama.cpp] [--out FILE.jsonl]
    python benchmarks/judge_vocab.py --schema /path/to/schema.json ...     # one schema (e.g. maxLength 32767)

For every K-th vendored JSONSchemaBench schema (xgrammar's converter, as the default target reads
it), per engine and per vocabulary, in one process, side by side: the input's compile and its
trace (``judge.masks.EngineCheck``: the masks along samples, derived sentences and seeded walks
at the default budget), CPU seconds (``time.process_time``: the engines' own threads included)
and the masks asked. Vocabularies, in this order per schema: ``qwen`` (Qwen's 151,644 tokens, the
judge before ``judge.vocabulary``), ``judge`` (its 50,935), ``qwen-again`` (the A/A control: the
first measured again, so the ratio qwen-again / qwen is the noise floor). Prints per engine the
medians and the geometric mean of the per-schema ratios; ``--out`` keeps one JSON row per
(schema, engine, vocabulary).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "benchmarks" / "data" / "jsonschemabench"


def use(vocab: str) -> None:
    """Point the judge's engines at ``vocab`` (``qwen`` or ``judge``): its env, encoder and caches."""
    from gramopt.engines.base import Env
    from gramopt.judge import masks, vocabulary
    from gramopt.runtime.vocab import Vocab
    if vocab.startswith("qwen"):
        env, enc = Env(Vocab.qwen(), vocabulary.qwen_tokenizer()), vocabulary.qwen_encode
    else:
        env, enc = Env(vocabulary.judge_vocab(), vocabulary.judge_tokenizer()), vocabulary.encode
    masks._env_of = lambda whole: env  # every engine on this vocabulary (masks.QWEN_WHOLE set aside)
    masks.encode = lambda data, engine="": enc(data)
    masks._adapter.cache_clear()
    masks._groups_of.cache_clear()
    from gramopt.judge import trajectories  # each run derives its sentences (the first would pay for all)
    for memo in (*trajectories._SENTENCES.values(), trajectories._BYTE_SENTENCES, trajectories._DERIVABLE):
        memo.clear()


def measure(grammar, engine: str) -> dict:
    """CPU seconds of the input's compile and trace in ``engine``, and the masks asked."""
    from gramopt.egraph import Limits
    from gramopt.judge import masks
    masks.warm([engine])
    t = time.process_time()
    try:
        check = masks.EngineCheck(engine, grammar, Limits().engine_check_steps)
    except masks.NotChecked as e:
        return {"error": str(e)}
    compiled = time.process_time() - t
    check._trace()
    return {"compile_s": round(compiled, 4), "trace_s": round(time.process_time() - t - compiled, 4),
            "masks": check._masks.fills}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=16)
    ap.add_argument("--schema", action="append", help="a schema file (repeatable; replaces the sample)")
    ap.add_argument("--engines", default="xgrammar,llguidance,llama.cpp")
    ap.add_argument("--out")
    args = ap.parse_args()
    from gramopt import read  # a schema through its converter (xgrammar's, as the default target reads it)
    files = [Path(p) for p in args.schema] if args.schema else sorted(DATA.glob("*.json"))[::args.every]
    engines = args.engines.split(",")
    rows = []
    out = open(args.out, "w") if args.out else None
    for i, f in enumerate(files):
        try:
            g = read(str(f))
        except Exception as e:  # noqa: BLE001 - a schema the converter refuses is skipped, named
            print(f"{f.name}: skipped ({str(e).splitlines()[0][:100]})", file=sys.stderr)
            continue
        for engine in engines:
            for vocab in ("qwen", "judge", "qwen-again"):
                use(vocab)
                r = {"schema": f.name, "engine": engine, "vocab": vocab, **measure(g, engine)}
                rows.append(r)
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
            got = {r["vocab"]: r for r in rows[-3:]}
            print(f"[{i + 1}/{len(files)}] {f.name[:40]:40s} {engine:10s} " + "  ".join(
                f"{v} {got[v].get('compile_s', 0) + got[v].get('trace_s', 0):6.2f}s/{got[v].get('masks', '-')}"
                for v in got), file=sys.stderr, flush=True)
    summarize(rows, engines)


def summarize(rows: list[dict], engines: list[str]) -> None:
    """Per engine: median CPU s (compile + trace) per vocabulary; geomean ratios judge/qwen and A/A."""
    print("\n| engine | schemas | qwen s p50 | judge s p50 | judge / qwen geomean | A/A (qwen-again / qwen) geomean |")
    print("|---|---:|---:|---:|---:|---:|")
    for e in engines:
        by = {}
        for r in rows:
            if r["engine"] == e and "error" not in r:
                by.setdefault(r["schema"], {})[r["vocab"]] = r["compile_s"] + r["trace_s"]
        full = [v for v in by.values() if len(v) == 3 and min(v.values()) > 0]
        if not full:
            continue
        med = lambda k: sorted(v[k] for v in full)[len(full) // 2]  # noqa: E731
        gm = lambda a, b: math.exp(sum(math.log(v[a] / v[b]) for v in full) / len(full))  # noqa: E731
        print(f"| {e} | {len(full)} | {med('qwen'):.2f} | {med('judge'):.2f} | {gm('judge', 'qwen'):.2f}× "
              f"| {gm('qwen-again', 'qwen'):.2f}× |")


if __name__ == "__main__":
    main()
