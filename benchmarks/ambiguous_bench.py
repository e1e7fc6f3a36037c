"""Per-mask time against position on grammars that stay ambiguous (issue 16).

Engines, in one process, on the same token trajectories (Qwen vocabulary, 151,644 tokens):
gramopt's matrix backend on CPU (``Matcher(..., backend="valiant")``), gramopt's Earley
runtime, xgrammar and llguidance. Grammars as written (not optimized): G4 (S → S S | a | b),
E → E+E | E*E | (E) | n, the English PP-attachment CFG (gramopt.bench.ambiguous), NLTK's
commandtalk.cfg over bytes, and the corpus SMILES grammars. Every step times the mask fill
only, then every engine accepts the same token.

An engine stops on a case once its masks have taken ``--budget`` seconds in all (later
positions are then missing for it, and the table says from where); engines take turns
per case so the machine's load hits them alike.

    python benchmarks/ambiguous_bench.py [--tokens 400] [--budget 60] [--out DIR] [--cases G4,english]

Prints, per case, the p50 per-mask time in position windows for every engine and the
ratio of each other engine's p50 to the matrix backend's at positions ≥ 200; writes one
PNG per case (per-mask time against position, log scale) and results.json under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gramopt.bench import ambiguous as amb  # noqa: E402

WINDOWS = ((0, 50), (50, 100), (100, 200), (200, 300), (300, 400), (400, 10 ** 9))
ENGINES = ("gramopt-valiant", "gramopt-earley", "xgrammar", "llguidance")


def cases(n_tokens: int, env, only: set[str] | None):
    """(name, grammar, token ids) per case; a case whose files are missing is skipped."""
    from gramopt.formats import read
    tok = env.tokenizer
    out = []

    def want(name):
        return not only or name in only

    if want("G4"):
        out.append(("G4", amb.parse_text(amb.G4), tok.encode(amb.g4_text(3 * n_tokens))[:n_tokens]))
    if want("expr"):
        out.append(("expr", amb.parse_text(amb.EXPR), tok.encode(amb.expr_text(3 * n_tokens))[:n_tokens]))
    if want("english"):
        out.append(("english", amb.parse_text(amb.ENGLISH),
                    tok.encode(amb.english_text(n_tokens + 20))[:n_tokens]))
    path = amb.corpus_path(amb.COMMANDTALK)
    if want("commandtalk") and path:
        g = _rooted(amb.words_as_bytes(read(path)))
        out.append(("commandtalk", g, _walk_ids(g, env.vocab, n_tokens, seed=1)))
    for rel in amb.SMILES:
        name = os.path.basename(rel).split("__")[-1].rsplit(".", 1)[0]
        path = amb.corpus_path(rel)
        if want(name) and path:
            g = read(path)
            out.append((name, g, _walk_ids(g, env.vocab, n_tokens, seed=2)))
    return out


def _rooted(g):
    """``root ::= START`` added in front (same language): the EBNF writer names the start
    rule ``root`` while gramopt's xgrammar driver asks for ``grammar.start`` (SIGMA here)."""
    import dataclasses
    from gramopt.grammar import Grammar, Ref
    if g.start == "root" or any(r.name == "root" for r in g.rules):
        return g
    return Grammar((dataclasses.replace(g.rules[0], name="root", body=Ref(g.start)), *g.rules), "root",
                   dialect=g.dialect)


def _walk_ids(grammar, vocab, n_tokens: int, seed: int, budget: int = 40) -> list[int]:
    """A seeded random walk over the allowed tokens (stop token excluded). At a dead end
    (only the stop token allowed) before ``n_tokens`` it takes back a random number of
    tokens (up to all of them) and walks on, at most ``budget × n_tokens`` steps in all;
    it returns the longest walk met."""
    import random
    from gramopt.runtime import Matcher
    rng = random.Random(seed)
    m = Matcher(grammar, vocab, backend="valiant")
    eos = set(vocab.eos_ids)
    ids: list[int] = []
    best: list[int] = []
    for _ in range(budget * n_tokens):
        if len(ids) >= n_tokens:
            break
        allowed = [t for t in m.allowed_tokens().tolist() if t not in eos]
        if allowed:
            ids.append(rng.choice(allowed))
            m.accept_token(ids[-1])
            continue
        if len(ids) > len(best):
            best = list(ids)
        if not ids:
            break
        k = rng.randint(1, len(ids))
        m.rollback(k)
        del ids[-k:]
    return ids if len(ids) >= len(best) else best


class Stepper:
    """One engine on one grammar: ``mask()`` (timed by the caller), ``accept(tid)``."""

    def __init__(self, engine: str, grammar, env):
        from gramopt.bench.engines import DRIVERS
        v = env.vocab
        self.engine = engine
        self.note = ""
        if engine == "gramopt-valiant":
            from gramopt.runtime import Matcher
            self.m = Matcher(grammar, v, backend="valiant")
            buf = np.zeros(v.n_words, np.int32)
            self.mask = lambda: self.m.fill_next_token_bitmask(buf)
            self.accept = self.m.accept_token
        elif engine == "gramopt-earley":
            from gramopt.runtime import Matcher
            self.m = Matcher(grammar, v, precompute=True)
            buf = np.zeros(v.n_words, np.int32)
            self.mask = lambda: self.m.fill_next_token_bitmask(buf)
            self.accept = self.m.accept_token
        elif engine == "xgrammar":
            import xgrammar as xgr
            cg = DRIVERS["xgrammar"](env).compile(grammar)
            self.m = xgr.GrammarMatcher(cg)
            bm = xgr.allocate_token_bitmask(1, len(v))
            self.mask = lambda: self.m.fill_next_token_bitmask(bm)
            self.accept = self.m.accept_token
        elif engine == "llguidance":
            import llguidance as llg
            import llguidance.numpy as llnp
            drv = DRIVERS["llguidance"](env)
            drv.prepare()
            try:
                self.m = drv.compile(grammar)
            except Exception as e:  # noqa: BLE001 - retried once with llguidance's limits raised
                if "lexer" not in str(e):
                    raise
                lim = llg.LLParserLimits(initial_lexer_fuel=10 ** 9, precompute_large_lexemes=False)
                self.m = llg.LLMatcher(drv._tok(), llg.grammar_from("gbnf", drv.printed(grammar, "gbnf")),
                                       log_level=0, limits=lim)
                if self.m.is_error():
                    raise RuntimeError(f"llguidance: {self.m.get_error().strip().splitlines()[0][:120]}") \
                        from None
                self.note = "lexer limits raised (initial_lexer_fuel=1e9, precompute_large_lexemes=False)"
            self.m.reset()
            bm = llnp.allocate_token_bitmask(1, len(v))
            self.mask = lambda: llnp.fill_next_token_bitmask(self.m, bm, 0)
            self.accept = self.m.consume_token
        else:
            raise ValueError(engine)


def measure(name, grammar, ids, env, budget: float) -> dict:
    steppers, notes = {}, {}
    for eng in ENGINES:
        try:
            steppers[eng] = Stepper(eng, grammar, env)
            if steppers[eng].note:
                notes[eng] = steppers[eng].note
        except Exception as e:  # noqa: BLE001 - an engine refusing a grammar is a result
            notes[eng] = f"refused: {str(e).strip().splitlines()[0][:120]}"
    times = {eng: [] for eng in steppers}
    spent = {eng: 0.0 for eng in steppers}
    live = list(steppers)
    for i, tid in enumerate(ids):
        for eng in list(live):
            st = steppers[eng]
            s = time.perf_counter()
            st.mask()
            dt = time.perf_counter() - s
            times[eng].append(dt)
            spent[eng] += dt
            if not st.accept(tid):
                notes[eng] = "; ".join(filter(None, (notes.get(eng), f"rejected token {tid} at position {i}")))
                live.remove(eng)
            elif spent[eng] > budget and i + 1 < len(ids):
                notes[eng] = "; ".join(filter(None, (notes.get(eng), f"stopped after position {i} "
                                                                       f"(budget {budget:.0f} s)")))
                live.remove(eng)
    return {"case": name, "tokens": len(ids), "bytes": sum(len(env.vocab.token_bytes[t]) for t in ids),
            "times_us": {e: [round(x * 1e6, 2) for x in ts] for e, ts in times.items()}, "notes": notes}


def window_p50(ts: list[float], lo: int, hi: int) -> float | None:
    part = ts[lo:hi]
    return float(np.median(part)) if part else None


def table(results: list[dict]) -> str:
    head = "| case | engine | " + " | ".join(f"{lo}–{hi - 1 if hi < 10 ** 8 else ''}" for lo, hi in WINDOWS) + \
        " | p50 ≥200 | ×valiant ≥200 | note |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        ref = window_p50(r["times_us"].get("gramopt-valiant", []), 200, 10 ** 9)
        for eng in ENGINES:
            ts = r["times_us"].get(eng)
            if ts is None:
                lines.append(f"| {r['case']} | {eng} | " + " | ".join("" for _ in WINDOWS) +
                             f" | | | {r['notes'].get(eng, '')} |")
                continue
            cells = [window_p50(ts, lo, hi) for lo, hi in WINDOWS]
            late = window_p50(ts, 200, 10 ** 9)
            ratio = f"{late / ref:.1f}×" if late and ref and eng != "gramopt-valiant" else ""
            lines.append(f"| {r['case']} | {eng} | " + " | ".join(_us(c) for c in cells) +
                         f" | {_us(late)} | {ratio} | {r['notes'].get(eng, '')} |")
    return "\n".join(lines)


def _us(x) -> str:
    if x is None:
        return ""
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"


def plot(r: dict, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for eng, ts in r["times_us"].items():
        if ts:
            ax.plot(range(len(ts)), ts, label=eng, lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("position (tokens accepted)")
    ax.set_ylabel("time per mask (µs)")
    ax.set_title(f"{r['case']}: {r['tokens']} Qwen tokens, {r['bytes']} bytes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of masks per engine and case")
    ap.add_argument("--out", default="benchmarks/results/ambiguous")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    a = ap.parse_args(argv)
    from gramopt.bench.engines import Env
    from gramopt.runtime import Vocab
    env = Env.create(Vocab.qwen())
    os.makedirs(a.out, exist_ok=True)
    results = []
    for name, g, ids in cases(a.tokens, env, set(filter(None, a.cases.split(","))) or None):
        print(f"# {name}: {len(ids)} tokens", file=sys.stderr, flush=True)
        r = measure(name, g, ids, env, a.budget)
        results.append(r)
        png = os.path.join(a.out, f"{name}.png")
        if plot(r, png):
            r["plot"] = png
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f)
    print(table(results))
    for r in results:
        if r.get("plot"):
            print(f"plot: {r['plot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
