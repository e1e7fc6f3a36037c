"""Running the benchmark: optimize each case per target, measure original and optimized
interleaved per engine, cache by content hash, fan out over worker processes.

    opts = Options(engines=("gramopt", "xgrammar"), max_tokens=150)
    results = run_cases(cases, opts, out_dir, jobs=1)        # list of JSON-ready dicts

Per case and engine (one result dict, ``measure_case``):

* the grammar is optimized for the engine's target (``engines.TARGET_OF``), verified;
* both forms are compiled (timed) and then run over the same trajectories, *interleaved*
  (original pass, optimized pass, original pass, …) so drift on a shared machine hits
  both alike. The first pass of each is a warm-up unless it took longer than
  ``budget_s`` (a pathological form: then it is the measurement); further passes stop
  once a pass took ``budget_s``;
* figures: compile seconds, per-mask p50/p95/max (μs, over all steps of all measured
  passes), the per-step median (for plots), and speedups original ÷ optimized (> 1:
  the optimized grammar is faster).

Per grammar form (original and each optimized text): κ, the SAC proxy, static features,
exact SAC per token (``costmodels.sac_trace``, its symbols mapped to the token in which
they complete) and gramopt's runtime counters per step on the same trajectory — the
inputs of calibration (``costmodels.calibration``).

Cache: ``OUT/.bench-cache/<sha256>.json`` keyed by the grammar text, samples, options,
vocabulary and gramopt version; a rerun on unchanged input reads it back and measures
nothing (``result["cached"]`` is then True).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass

import numpy as np

from .engines import DRIVERS, ENGINES, TARGET_OF, EngineError, Env, TokenizeError, percentiles
from .suites import Case

SCHEMA = 2
CACHE_DIR = ".bench-cache"


@dataclass(frozen=True)
class Options:
    engines: tuple[str, ...] = ENGINES
    vocab: str = "qwen"
    max_tokens: int = 150
    reps: int = 5
    budget_s: float = 2.0
    verify: bool = True
    sac: bool = True


# ---------------------------------------------------------------- vocabularies


def load_vocab(spec: str):
    """``qwen`` (the default), ``bytes`` (256 single-byte tokens + EOS: for tests), or a
    tiktoken / tokenizer.json file."""
    from ..runtime import Vocab
    if spec == "qwen":
        return Vocab.qwen()
    if spec == "bytes":
        return Vocab.from_bytes([bytes([i]) for i in range(256)], eos=256)
    return Vocab.from_file(spec)


_ENV: dict = {}


def env_for(spec: str) -> Env:
    """One ``Env`` per vocabulary per process (loading Qwen's takes a second)."""
    if spec not in _ENV:
        _ENV[spec] = Env.create(load_vocab(spec))
    return _ENV[spec]


# ---------------------------------------------------------------- figures per form


def token_symbols(vocab, tokens: list[int]) -> list[int]:
    """How many code points complete within each token (stop tokens: 0), so that per-symbol
    figures can be summed per token."""
    data, out, done = b"", [], 0
    for t in tokens:
        data += vocab.token_bytes[t]
        n = len(data.decode("utf-8", errors="ignore"))
        out.append(n - done)
        done = n
    return out


def form_figures(grammar, text: str, per_token: list[int], sac: bool) -> dict:
    """κ, SAC proxy, static features and exact SAC per token of one grammar form."""
    from ..costmodels import kappa, sac_proxy, sac_trace
    from ..costmodels.calibration import static_features
    out = {"kappa": kappa(grammar), "sac_proxy": sac_proxy(grammar), "rules": len(grammar.rules),
           "static": static_features(grammar)}
    if sac:
        n = sum(per_token)
        trace = sac_trace(grammar, text[:n]) if n else []
        per, i = [], 0
        for k in per_token:
            per.append(int(sum(trace[i:i + k])))
            i += k
        out["sac_per_token"] = per
        out["sac_total"] = int(sum(trace))
    return out


# ---------------------------------------------------------------- one case


def _optimize(grammar, target: str, verify: bool) -> dict:
    from ..formats import write
    from ..grammar import GrammarError
    from ..passes import OptimizationError, optimize
    t = time.perf_counter()
    try:
        r = optimize(grammar, target=target, verify=verify)
    except OptimizationError as e:
        return {"error": f"optimizer: {str(e).splitlines()[0][:200]}", "seconds": time.perf_counter() - t}
    except Exception as e:  # noqa: BLE001 - an optimizer bug is reported, the case goes on
        return {"error": f"optimizer: {type(e).__name__}: {str(e)[:200]}", "seconds": time.perf_counter() - t}
    from ..targets import get
    rep = r.report
    # what `gramopt optimize` writes: the target's dialect (xgrammar: xgrammar EBNF, which
    # carries its lookahead assertions)
    dialect, out, _ = get(target).output_form(r.grammar)
    try:
        text = write(out, dialect)
    except GrammarError:  # a construct the dialect cannot spell: EBNF is the superset
        dialect = "ebnf"
        text = write(r.grammar, dialect)
    return {"text": text, "dialect": dialect, "kappa_before": rep.kappa_before,
            "kappa_after": rep.kappa_after, "sac_proxy_before": rep.sac_before,
            "sac_proxy_after": rep.sac_after, "verified": rep.verified, "seconds": rep.seconds,
            "changed": r.grammar != grammar}


def _interleaved(driver, handles: dict, trajectories, opts: Options) -> dict:
    """Per form: list of passes, each a list of per-step seconds over all trajectories.
    The forms take turns going first (measured: on a 17-step trajectory in llguidance the
    form measured second was 5-15% slower, the same grammar against itself)."""
    passes: dict[str, list[list[float]]] = {k: [] for k in handles}
    warm = {k: True for k in handles}
    for rep in range(opts.reps + 1):
        slow = False
        order = list(handles.items())
        if rep % 2:
            order.reverse()
        for form, h in order:
            t0 = time.perf_counter()
            times = []
            for toks in trajectories:
                times += driver.run(h, toks)
            took = time.perf_counter() - t0
            if warm[form]:
                warm[form] = False
                if took <= opts.budget_s:
                    continue  # a warm-up pass
            passes[form].append(times)
            slow |= took > opts.budget_s
        if slow and all(passes.values()):
            break
        if all(len(p) >= opts.reps for p in passes.values()):
            break
    return passes


def _summary(passes: list[list[float]], compile_s: float) -> dict:
    flat = [x for p in passes for x in p]
    per_step = np.median(np.array(passes), axis=0) * 1e6 if passes else np.array([])
    return {"compile_s": compile_s, **percentiles(flat), "passes": len(passes),
            "per_step_us": [round(float(x), 3) for x in per_step]}


def measure_case(case: Case, opts: Options, env: Env | None = None) -> dict:
    """Everything the report needs about one case (module docstring)."""
    from ..formats import parse
    from ..grammar import GrammarError
    env = env or env_for(opts.vocab)
    t_case = time.perf_counter()
    res = {"name": case.name, "suite": case.suite, "source": case.source, "note": case.note,
           "dialect": case.dialect, "engines": {}, "targets": {}, "forms": {}, "notes": []}
    original = case.grammar()
    trajectories, texts, complete = [], [], []
    for s in case.samples:
        try:
            toks, full = env.tokenizer.trajectory(s, opts.max_tokens)
        except (EngineError, TokenizeError) as e:
            res["notes"].append(f"sample not tokenized: {e}")
            continue
        trajectories.append(toks)
        texts.append(s)
        complete.append(full)
    res["trajectory"] = {"tokens": sum(map(len, trajectories)), "complete": complete}
    if not trajectories:
        res["notes"].append("no trajectory: nothing measured")
        return res

    forms = {"original": original}
    for eng in opts.engines:
        target = TARGET_OF.get(eng, "generic")
        if target not in res["targets"]:
            res["targets"][target] = _optimize(original, target, opts.verify)
            tr = res["targets"][target]
            if "text" in tr:
                forms[f"opt:{target}"] = parse(tr["text"], tr["dialect"])

    # per form: static figures, exact SAC and gramopt's counters on the first trajectory
    first, first_text = trajectories[0], texts[0]
    per_token = token_symbols(env.vocab, first)
    counter_driver = DRIVERS["gramopt"](env)
    for key, g in forms.items():
        fig = form_figures(g, first_text, per_token, opts.sac)
        try:
            counters: list = []
            counter_driver.run(counter_driver.compile(g), first, counters)
            fig["counters"] = {k: [c.as_dict()[k] for c in counters] for k in counters[0].as_dict()} \
                if counters else {}
        except EngineError as e:
            fig["counters_error"] = str(e)
        res["forms"][key] = fig

    for eng in opts.engines:
        target = TARGET_OF.get(eng, "generic")
        entry = {"target": target}
        res["engines"][eng] = entry
        cls = DRIVERS.get(eng)
        if cls is None:
            entry.update(status="skipped", note=f"unknown engine '{eng}' (known: {', '.join(DRIVERS)})")
            continue
        drv = cls(env)
        if drv.missing:
            entry.update(status="skipped", note=drv.missing)
            continue
        opt_key = f"opt:{target}"
        handles, compile_s = {}, {}
        try:
            for key in ("original", opt_key):
                if key in forms:
                    handles[key], compile_s[key] = drv.timed_compile(forms[key])
            passes = _interleaved(drv, handles, trajectories, opts)
        except (EngineError, GrammarError) as e:
            msg = e.format().splitlines()[0] if isinstance(e, GrammarError) else str(e)
            entry.update(status="error", note=msg)
            continue
        entry["status"] = "ok"
        entry["original"] = _summary(passes["original"], compile_s["original"])
        if opt_key in handles:
            o, p = entry["original"], _summary(passes[opt_key], compile_s[opt_key])
            entry["optimized"] = p
            entry["speedup_p50"] = o["p50"] / p["p50"] if p["p50"] else None
            entry["speedup_p95"] = o["p95"] / p["p95"] if p["p95"] else None
            entry["speedup_compile"] = o["compile_s"] / p["compile_s"] if p["compile_s"] else None
        else:
            entry["note"] = res["targets"][target].get("error", "no optimized form")
    res["seconds"] = time.perf_counter() - t_case
    return res


# ---------------------------------------------------------------- cache and fan-out


def cache_key(case: Case, opts: Options, vocab_id: str) -> str:
    from .._version import __version__
    h = hashlib.sha256()
    h.update(json.dumps({"schema": SCHEMA, "version": __version__, "text": case.text, "dialect": case.dialect,
                         "samples": case.samples, "opts": asdict(opts), "vocab": vocab_id,
                         "name": case.name, "suite": case.suite}, sort_keys=True).encode())
    return h.hexdigest()


def _vocab_id(spec: str) -> str:
    if spec in ("qwen", "bytes"):
        return spec
    st = os.stat(spec)
    return f"{os.path.abspath(spec)}:{st.st_size}:{int(st.st_mtime)}"


def _job(case: Case, opts: Options) -> dict:
    try:
        return measure_case(case, opts)
    except Exception as e:  # noqa: BLE001 - one broken case must not sink the run
        return {"name": case.name, "suite": case.suite, "source": case.source, "engines": {}, "targets": {},
                "forms": {}, "notes": [f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"]}


class Progress:
    """A one-line progress bar on stderr (a plain line per case when not a terminal)."""

    def __init__(self, total: int, stream=None, enabled: bool = True):
        self.total, self.done, self.t0 = total, 0, time.perf_counter()
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 24
        fill = int(width * self.done / max(1, self.total))
        line = (f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.t0:6.1f}s  {label}")
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def run_cases(cases: list[Case], opts: Options, out_dir: str, jobs: int = 1,
              progress: bool = True) -> list[dict]:
    """Measure every case (cached results read back), in ``jobs`` spawned worker processes
    when more than one; results in the order of ``cases``."""
    cache_dir = os.path.join(out_dir, CACHE_DIR)
    os.makedirs(cache_dir, exist_ok=True)
    vid = _vocab_id(opts.vocab)
    results: list[dict | None] = [None] * len(cases)
    keys = [cache_key(c, opts, vid) for c in cases]
    todo = []
    for i, k in enumerate(keys):
        path = os.path.join(cache_dir, k + ".json")
        try:
            with open(path, encoding="utf-8") as f:
                results[i] = {**json.load(f), "cached": True}
        except (OSError, ValueError):
            todo.append(i)
    bar = Progress(len(todo), enabled=progress)

    def store(i: int, r: dict) -> None:
        r["cached"] = False
        results[i] = r
        if not any(n.startswith("failed:") for n in r.get("notes", [])):
            from ..formats import write_file
            write_file(os.path.join(cache_dir, keys[i] + ".json"), json.dumps(r, sort_keys=True))
        bar.step(f"{cases[i].name} ({r.get('seconds', 0):.1f} s)")

    if jobs <= 1 or len(todo) <= 1:
        for i in todo:
            store(i, _job(cases[i], opts))
    else:
        # spawn, not fork: numba and egglog start threads (see gramopt.cli.optimize)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as pool:
            futs = {pool.submit(_job, cases[i], opts): i for i in todo}
            for fut in as_completed(futs):
                store(futs[fut], fut.result())
    return [r for r in results if r is not None]
