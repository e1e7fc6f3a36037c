"""gramopt's CUDA paths, measured on a GPU: mask application and the matrix recognizer.

    python benchmarks/cuda_paths.py [--out DIR] [--reps 200] [--tokens 200] [--sections apply,matrix]

1. **apply** — ``apply_token_bitmask_inplace`` (gramopt.runtime.kernels) on CUDA logits,
   backends "torch" and "triton", beside xgrammar's own ``apply_token_bitmask_inplace`` (the
   call vLLM and SGLang make), for vocabularies of 151,936 (Qwen's padded logits) and
   128,256 columns, batches 1-256, float32 and bfloat16, every row masked and half the rows
   masked (``indices``). Each arm is first checked bit for bit against the plain definition
   (numpy on CPU: -inf exactly where the bit is 0 or beyond the mask, other values
   untouched); a wrong arm is reported and not timed. Timing: CUDA events around 20 calls,
   arms interleaved round by round in a rotating order, ``--reps`` calls per arm; the
   median per call. "torch (A/A)" is the torch backend timed again as its own arm: the
   noise floor of the ratios.
2. **matrix** — the matrix recognizer (``ValiantMatcher``) on the grammars that stay
   ambiguous (G4: S → S S | a | b, expr, English PP-attachment; Qwen tokens), device "cpu"
   (numba bitsets), "torch" (the dense torch table on CPU) and "cuda" (the same table on the
   GPU), mask cache off so every step computes its column: the masks must agree at every
   step; per-step time (mask + accept) p50 in position windows. A device stops on a case
   once its steps took ``--matrix-budget`` seconds (the dense table is t small kernels a
   column: launch-bound, and seconds a step on CPU).

Prints tables; writes ``cuda_paths.json`` under ``--out``. Needs a CUDA device (exit 2 without).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

VOCABS = (151_936, 128_256)
BATCHES = (1, 8, 64, 256)
DTYPES = ("float32", "bfloat16")
MATRIX_DEVICES = ("cpu", "torch", "cuda")
WINDOWS = ((0, 50), (50, 100), (100, 200), (200, 10 ** 9))


def reference(logits_cpu: np.ndarray, bitmask: np.ndarray, rows) -> np.ndarray:
    """The definition: row r in ``rows`` gets -inf where bit j of word j // 32 is 0 (or lies
    beyond the words); every other value is left as it was."""
    out = logits_cpu.copy()
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little").reshape(bitmask.shape[0], -1)
    v = out.shape[1]
    allowed = np.zeros((bitmask.shape[0], v), bool)
    k = min(v, bits.shape[1])
    allowed[:, :k] = bits[:, :k].astype(bool)
    for r in rows:
        out[r][~allowed[r]] = -np.inf
    return out


def _arms():
    from gramopt.runtime.kernels import apply_token_bitmask_inplace as gram
    arms = {
        "torch": lambda lg, bm, idx: gram(lg, bm, indices=idx, backend="torch"),
        "torch (A/A)": lambda lg, bm, idx: gram(lg, bm, indices=idx, backend="torch"),
        "triton": lambda lg, bm, idx: gram(lg, bm, indices=idx, backend="triton"),
    }
    try:
        import xgrammar as xgr
        arms["xgrammar"] = lambda lg, bm, idx: xgr.apply_token_bitmask_inplace(lg, bm, indices=idx)
    except Exception as e:  # noqa: BLE001 - the peer is optional
        print(f"# xgrammar not measured: {e}", file=sys.stderr)
    return arms


def apply_section(torch, reps: int) -> list[dict]:
    dev = torch.device("cuda")
    rng = np.random.default_rng(0)
    arms = _arms()
    rows_out = []
    for v in VOCABS:
        words = (v + 31) // 32
        for b in BATCHES:
            for dt in DTYPES:
                for half in ((False, True) if b > 1 else (False,)):
                    idx = list(range(0, b, 2)) if half else None
                    rows = idx if idx is not None else list(range(b))
                    bm = rng.integers(-2 ** 31, 2 ** 31, size=(b, words), dtype=np.int64).astype(np.int32)
                    base = torch.randn(b, v, dtype=getattr(torch, dt), device=dev)
                    ref = reference(base.float().cpu().numpy(), bm, rows)
                    bm_dev = torch.from_numpy(bm).to(dev)
                    row = {"vocab": v, "batch": b, "dtype": dt, "rows": len(rows), "us": {}, "wrong": {}}
                    live = {}
                    for name, fn in arms.items():
                        lg = base.clone()
                        try:
                            fn(lg, bm_dev, idx)
                            torch.cuda.synchronize()
                            got = lg.float().cpu().numpy()
                        except Exception as e:  # noqa: BLE001 - an arm that fails is a result
                            row["wrong"][name] = f"raised {type(e).__name__}: {str(e)[:100]}"
                            continue
                        bad = int((~((got == ref) | (np.isneginf(got) & np.isneginf(ref)))).sum())
                        if bad:
                            row["wrong"][name] = f"{bad} values differ from the definition"
                            continue
                        live[name] = lg
                    times = {n: [] for n in live}
                    names = list(live)
                    for rnd in range(max(1, reps // 20)):
                        order = names[rnd % len(names):] + names[:rnd % len(names)] if names else []
                        for n in order:
                            lg = live[n]
                            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            s.record()
                            for _ in range(20):
                                arms[n](lg, bm_dev, idx)
                            e.record()
                            e.synchronize()
                            times[n].append(s.elapsed_time(e) * 1000.0 / 20)
                    row["us"] = {n: float(np.median(t)) for n, t in times.items()}
                    rows_out.append(row)
                    print(_apply_line(row), flush=True)
    return rows_out


def _apply_line(r) -> str:
    us = r["us"]
    t = us.get("torch")
    cells = [f"{n} {us[n]:.1f} us" + (f" ({t / us[n]:.2f}x)" if t and n != "torch" else "") for n in us]
    wrong = "; ".join(f"{n}: {w}" for n, w in r["wrong"].items())
    return (f"V={r['vocab']} B={r['batch']:<3} {r['dtype']:<8} rows={r['rows']:<3} "
            + " | ".join(cells) + (f" | WRONG {wrong}" if wrong else ""))


def apply_table(rows) -> str:
    arms = sorted({n for r in rows for n in r["us"]}, key=lambda n: ("torch", "torch (A/A)", "triton",
                                                                      "xgrammar").index(n))
    head = "| vocab | batch | dtype | rows | " + " | ".join(f"{a} µs" for a in arms) + \
        " | " + " | ".join(f"torch/{a}" for a in arms if a != "torch") + " |"
    out = [head, "|" + "---|" * (4 + 2 * len(arms) - 1)]
    for r in rows:
        us = r["us"]
        t = us.get("torch")
        cells = [f"{us[a]:.1f}" if a in us else ("wrong" if a in r["wrong"] else "–") for a in arms]
        ratios = [f"{t / us[a]:.2f}×" if t and a in us else "–" for a in arms if a != "torch"]
        out.append(f"| {r['vocab']:,} | {r['batch']} | {r['dtype']} | {r['rows']} | " + " | ".join(cells)
                   + " | " + " | ".join(ratios) + " |")
    return "\n".join(out)


def matrix_section(torch, n_tokens: int, budget_s: float) -> list[dict]:
    """Every device steps through the same tokens; a device whose steps have taken
    ``budget_s`` seconds on a case stops there (later windows are missing for it), and the
    masks of the devices still stepping are compared with numba's at every step."""
    from ambiguous_bench import cases
    from gramopt.bench.engines import Env
    from gramopt.runtime import Vocab
    from gramopt.runtime.matrix import ValiantMatcher
    env = Env.create(Vocab.qwen())
    v = env.vocab
    out = []
    for name, g, ids in cases(n_tokens, env, {"G4", "expr", "english"}):
        ms = {d: ValiantMatcher(g, v, device=d, cache=False) for d in MATRIX_DEVICES}
        times = {d: [] for d in ms}
        bufs = {d: np.zeros(v.n_words, np.int32) for d in ms}
        live = list(ms)
        differ_at = None
        for i, tid in enumerate(ids):
            for d in list(live):
                m = ms[d]
                t0 = time.perf_counter()
                m.fill_next_token_bitmask(bufs[d])
                ok = m.accept_token(tid)
                if d == "cuda":
                    torch.cuda.synchronize()
                times[d].append(time.perf_counter() - t0)
                if not ok and differ_at is None:
                    differ_at = (i, f"{d} refused token {tid}")
            if differ_at is None and any(not np.array_equal(bufs["cpu"], bufs[d]) for d in live):
                differ_at = (i, "masks differ: " + ",".join(d for d in live
                                                           if not np.array_equal(bufs["cpu"], bufs[d])))
            live = [d for d in live if d == "cpu" or sum(times[d]) < budget_s]
        row = {"case": name, "tokens": len(ids), "differ_at": differ_at, "p50_ms": {},
               "steps": {d: len(ts) for d, ts in times.items()}}
        for d, ts in times.items():
            row["p50_ms"][d] = {f"{lo}-{hi if hi < 10 ** 9 else 'end'}":
                                float(np.median(ts[lo:hi])) * 1000 for lo, hi in WINDOWS if ts[lo:hi]}
        out.append(row)
        print(f"{name}: {len(ids)} tokens, masks {'agree' if differ_at is None else differ_at}; "
              + "; ".join(f"{d} ({row['steps'][d]} steps) " + " ".join(f"{w}:{x:.2f}ms" for w, x in p.items())
                          for d, p in row["p50_ms"].items()), flush=True)
    return out


def matrix_table(rows) -> str:
    wins = [f"{lo}-{hi if hi < 10 ** 9 else 'end'}" for lo, hi in WINDOWS]
    out = ["| case | tokens | masks | device | steps | " + " | ".join(f"p50 ms @{w}" for w in wins) + " |",
           "|" + "---|" * (5 + len(wins))]
    for r in rows:
        for d, p in r["p50_ms"].items():
            agree = "agree" if r["differ_at"] is None else f"differ at {r['differ_at'][0]}"
            out.append(f"| {r['case']} | {r['tokens']} | {agree} | {d} | {r['steps'][d]} | "
                       + " | ".join(f"{p[w]:.2f}" if w in p else "–" for w in wins) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/cuda-paths")
    ap.add_argument("--reps", type=int, default=200, help="timed calls per arm and shape")
    ap.add_argument("--tokens", type=int, default=200, help="tokens per matrix case")
    ap.add_argument("--matrix-budget", type=float, default=20.0,
                    help="seconds of steps per device and matrix case (numba's 'cpu' always runs on)")
    ap.add_argument("--sections", default="apply,matrix")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("cuda_paths: no CUDA device", file=sys.stderr)
        return 2
    sections = set(a.sections.split(","))
    os.makedirs(a.out, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "python": platform.python_version()}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        from importlib.metadata import version
        meta["xgrammar"] = version("xgrammar")
    except Exception:  # noqa: BLE001 - the peer is optional
        pass
    print("# " + ", ".join(f"{k} {v}" for k, v in meta.items()), flush=True)
    res = {"meta": meta}
    path = os.path.join(a.out, "cuda_paths.json")
    if "apply" in sections:
        res["apply"] = apply_section(torch, a.reps)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    if "matrix" in sections:
        res["matrix"] = matrix_section(torch, a.tokens, a.matrix_budget)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    if res.get("apply"):
        print("\n" + apply_table(res["apply"]))
    if res.get("matrix"):
        print("\n" + matrix_table(res["matrix"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
