"""Oracle invariance on a decoding loop: the optimized grammar's masks, step by step.

    res = lockstep(model, original, optimized, vocab, steps=128, seed=0, batch=2)
    res.ok, res.mismatch (step, row, decoded prefix, differing tokens), res.generation

The original grammar's gramopt matcher drives decoding (its masks are applied to the
logits, the sampled token advances every matcher). At every step, for every running row,
the other engines fill their masks for the same prefix — the optimized grammar in
gramopt's runtime and, when xgrammar is installed, both grammars in xgrammar as an
independent oracle — and each is compared with the driver's mask word for word (bits past
the vocabulary ignored). After each accepted token every engine must have accepted it and
all must agree on termination. The first difference of the optimized grammar in gramopt's
runtime stops the run; xgrammar's differences are recorded (its known bugs — e.g. a wrong
mask for a self-recursive root rule in 0.2.8 — must not hide the optimizer's check).

Why a difference is a real bug: the masks are functions of the decoded prefix alone
(xgrammar's semantics, which gramopt's runtime implements); two grammars with the same
language have the same viable prefixes and the same sentences, so every mask and every
termination agrees on every prefix, whatever is sampled. A planted change that removes
a byte from a class used at the first step is therefore caught at step 0, for any seed.

Equality proves nothing beyond the prefixes visited; the language check
(``check_equivalence``) is the complementary proof. The sampled trajectory depends only on
the driver, so the same seed gives the same text on every run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from .loop import EngineGuide, Generation, GramoptEngine, Sampling, generate

DRIVER = "gramopt:original"
ENGINE_ERROR = "the engine's error: the reference recognizer agrees with gramopt"
ARBITRATED_TOKENS = 64  # differing tokens checked by the reference recognizer, each way


@dataclass(frozen=True)
class Mismatch:
    """The first difference: ``kind`` "mask" (bits differ), "accept" (an engine refused the
    sampled token) or "termination"; ``engine`` is the one that differs from the driver."""

    kind: str
    engine: str
    seed: int
    row: int
    step: int
    prefix: bytes
    only_driver: tuple = ()  # token ids the driver allows and the engine does not
    only_engine: tuple = ()  # ... and the other way round
    detail: str = ""
    verdict: str = ""  # for another engine's mask difference: who the reference recognizer backs
    reference: str = DRIVER  # what the engine was compared with (an own-reference oracle: itself
    #                          on the original grammar)

    @property
    def engine_error(self) -> bool:
        """An independent engine's difference that the reference recognizer shows to be
        that engine's error (it does not fail the check)."""
        return self.verdict == ENGINE_ERROR

    def format(self, vocab, limit: int = 8) -> str:
        from ..verify.result import _bytes_text

        def toks(ids):
            shown = ", ".join(f"{t} {_bytes_text(vocab.token_bytes[t]) if vocab.token_bytes[t] else '<special>'}"
                              for t in ids[:limit])
            more = f", … ({len(ids)} in all)" if len(ids) > limit else ""
            return f"[{shown}{more}]"

        head = (f"{self.kind} mismatch at step {self.step} (seed {self.seed}, row {self.row}) between "
                f"{self.reference} and {self.engine}")
        lines = [head, f"  decoded prefix: {_bytes_text(self.prefix)}"]
        if self.kind == "mask":
            lines.append(f"  allowed only by {self.reference}: {toks(self.only_driver)}")
            lines.append(f"  allowed only by {self.engine}: {toks(self.only_engine)}")
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.verdict:
            lines.append(f"  verdict: {self.verdict}")
        return "\n".join(lines)


def reference_arbiter(grammar, vocab):
    """``driver_right(prefix, only_driver, only_engine) -> bool``: the reference recognizer
    (``gramopt.verify.Recognizer``, the arbiter of the runtime issue) says the driver's bit is
    right on every differing token — a token is allowed iff prefix + its bytes is a viable
    prefix of the language (an end-of-sequence token: iff the prefix is a sentence). Up to
    ``ARBITRATED_TOKENS`` tokens each way are checked."""
    rec = None
    eos = set(vocab.eos_ids)

    def driver_right(prefix: bytes, only_driver, only_engine) -> bool:
        nonlocal rec
        if rec is None:
            from ..verify.reference import Recognizer
            rec = Recognizer(grammar)

        def allowed(t: int) -> bool:
            return rec.accepts(prefix) if t in eos else rec.is_viable_prefix(prefix + vocab.token_bytes[t])
        return (all(allowed(t) for t in only_driver[:ARBITRATED_TOKENS])
                and not any(allowed(t) for t in only_engine[:ARBITRATED_TOKENS]))
    return driver_right


def mask_difference(a: np.ndarray, b: np.ndarray, n_tokens: int) -> tuple[tuple, tuple] | None:
    """(ids set in a only, ids set in b only) over the first ``n_tokens`` bits, or None when
    the packed masks agree on them."""
    if np.array_equal(a, b):
        return None
    bits_a = np.unpackbits(a.view(np.uint8), bitorder="little")[:n_tokens]
    bits_b = np.unpackbits(b.view(np.uint8), bitorder="little")[:n_tokens]
    if np.array_equal(bits_a, bits_b):
        return None
    only_a = tuple(int(i) for i in np.nonzero(bits_a & ~bits_b)[0])
    only_b = tuple(int(i) for i in np.nonzero(bits_b & ~bits_a)[0])
    return only_a, only_b


class LockstepGuide(EngineGuide):
    """The driver's engines decode; ``others[name][row]`` are compared at every step.

    A difference of an engine in ``stopping`` (gramopt's runtime on the optimized grammar:
    the optimizer's invariance) stops the run; one of another engine (xgrammar, the
    independent oracle, which has bugs of its own) is recorded and that engine is left
    out for the rest of the run, so the check of the optimization goes on.

    ``references`` maps an engine to the one it is compared with instead of the driver: an
    engine whose masks are its own rather than the language's (llama.cpp) is compared with
    itself on the original grammar (``"llama.cpp:optimized" -> "llama.cpp:original"``); the
    reference is then only filled and advanced. Where both refuse a token the driver took
    (the engine's own reading of the vocabulary), both are left out, with a note."""

    def __init__(self, driver_engines, others: dict, vocab, seed: int = 0,
                 stopping=("gramopt:optimized",), arbiter=None, references: dict | None = None):
        super().__init__(driver_engines)
        self.references = dict(references or {})
        self.reference_only = set(self.references.values())
        self.notes: list[str] = []
        self.arbiter = arbiter  # reference_arbiter(original grammar, vocab), for the other engines
        self.others = others
        self.vocab = vocab
        self.seed = seed
        self.stopping = set(stopping)
        self.mismatches: list[Mismatch] = []
        self.disabled: set[str] = set()
        self.prefix = [bytearray() for _ in driver_engines]
        self._scratch = {name: np.zeros((len(driver_engines), vocab.n_words), np.int32) for name in others}
        self.compared = {name: 0 for name in others}  # masks compared per engine

    @property
    def mismatch(self) -> Mismatch | None:
        """The first difference that stopped the run."""
        return next((m for m in self.mismatches if m.engine in self.stopping), None)

    def _record(self, m: Mismatch) -> None:
        if m.engine in self.disabled:
            return
        if (m.kind == "mask" and m.engine not in self.stopping and self.arbiter is not None
                and m.reference == DRIVER):
            right = self.arbiter(m.prefix, m.only_driver, m.only_engine)
            m = replace(m, verdict=ENGINE_ERROR if right else "gramopt's error: the reference recognizer "
                                                               f"agrees with {m.engine}")
        self.mismatches.append(m)
        self.disabled.add(m.engine)
        if m.engine in self.stopping and self.stop_reason is None:
            self.stop_reason = f"{m.kind} mismatch at step {m.step}"

    def fill(self, buf: np.ndarray, rows, step: int) -> None:
        """Every engine fills its masks, in an order rotated each step (the first to run after
        the forward pass finds the caches cold: a fixed order would favour later engines in
        the timings), then each is compared with the driver's."""
        names = [DRIVER] + [n for n in self.others if n not in self.disabled]
        k = step % len(names)
        for name in names[k:] + names[:k]:
            if name == DRIVER:
                super().fill(buf, rows, step)
            else:
                scratch = self._scratch[name]
                for r in rows:
                    self.others[name][r].fill(scratch[r])
        n = len(self.vocab)
        for name in names[1:]:
            if name in self.reference_only:
                continue
            ref = self.references.get(name, DRIVER)
            if ref in self.disabled:
                continue
            for r in rows:
                self.compared[name] += 1
                want = buf[r] if ref == DRIVER else self._scratch[ref][r]
                diff = mask_difference(want, self._scratch[name][r], n)
                if diff is not None:
                    self._record(Mismatch("mask", name, self.seed, r, step, bytes(self.prefix[r]), *diff,
                                          reference=ref))
                    break

    def advance(self, row: int, token: int, step: int) -> bool:
        ok = super().advance(row, token, step)
        if not ok:
            return False
        accepted = {name: engines[row].accept(token) for name, engines in self.others.items()
                    if name not in self.disabled}
        for name, engines in self.others.items():
            if name not in accepted or name in self.reference_only:
                continue
            ref = self.references.get(name, DRIVER)
            if ref != DRIVER and ref not in accepted:
                continue
            ref_ok = True if ref == DRIVER else accepted[ref]
            term = (self.engines[row] if ref == DRIVER else self.others[ref][row]).is_terminated()
            prefix = bytes(self.prefix[row])
            if not accepted[name] and not ref_ok:  # the engine's own reading of the token, on both grammars
                self.notes.append(f"{name} and {ref} both refuse token {token} after {prefix[-40:]!r}, "
                                  f"which {DRIVER} accepted: left out from step {step} on")
                self.disabled.update((name, ref))
            elif accepted[name] != ref_ok:
                who, other = (name, ref) if not accepted[name] else (ref, name)
                self._record(Mismatch("accept", name, self.seed, row, step, prefix, reference=ref,
                                      detail=f"{who} refused token {token} that {other} accepted"))
            elif engines[row].is_terminated() != term:
                self._record(Mismatch("termination", name, self.seed, row, step, prefix, reference=ref,
                                      detail=f"after token {token}: {ref} terminated={term}, "
                                             f"{name} terminated={not term}"))
        return True

    def note_prefix(self, row: int, token: int) -> None:
        self.prefix[row] += self.vocab.token_bytes[token]


@dataclass
class LockstepResult:
    seed: int
    generation: Generation
    mismatches: list  # at most one per engine: its first difference
    engines: dict  # name -> list of per-row engines (their fill_s / accept_s)
    compared: dict  # name -> masks compared
    notes: list = field(default_factory=list)

    @property
    def mismatch(self) -> Mismatch | None:
        """The difference of the optimized grammar in gramopt's runtime, if any."""
        return next((m for m in self.mismatches if m.engine == "gramopt:optimized"), None)

    @property
    def ok(self) -> bool:
        """No engine differed from the driver, except where the reference recognizer shows
        the difference to be an independent engine's own error."""
        return all(m.engine_error for m in self.mismatches)

    def fill_times(self, name: str) -> list[float]:
        return [t for e in self.engines[name] for t in e.fill_s]

    def accept_times(self, name: str) -> list[float]:
        return [t for e in self.engines[name] for t in e.accept_s]


class Oracles:
    """The compiled forms of both grammars, made once and shared by every seed: gramopt's
    token tables (through the matcher cache) and each independent engine's compiled
    grammars. ``engines`` are the independent oracles (``gramopt.engines.oracle_engines``:
    each has ``name``, ``compile(grammar, vocab)`` raising RuntimeError when it refuses, and
    ``matcher(compiled)``); ``notes`` says why one is absent for a grammar."""

    def __init__(self, original, optimized, vocab, engines=(), precompute: bool = True):
        from ..runtime import token_table
        self.original, self.optimized, self.vocab = original, optimized, vocab
        self.notes: list[str] = []
        t = time.perf_counter()
        for g in (original, optimized):
            table = token_table(g, vocab)
            if precompute:  # every root state's token classes now, not on first use inside a timed step
                table.precompute()
        self.compile_s = {"gramopt": time.perf_counter() - t}
        self.compiled: dict = {}  # (engine, which) -> compiled grammar
        self.oracles = {e.name: e for e in engines}
        for eng in engines:
            t = time.perf_counter()
            for which, g in (("original", original), ("optimized", optimized)):
                try:
                    self.compiled[eng.name, which] = eng.compile(g, vocab)
                except RuntimeError as e:
                    self.notes.append(f"{eng.name} skipped for the {which} grammar: {e}")
            self.compile_s[eng.name] = time.perf_counter() - t

    def references(self) -> dict:
        """``{"X:optimized": "X:original"}`` for each own-reference oracle X compiled on both."""
        return {f"{n}:optimized": f"{n}:original" for n, e in self.oracles.items()
                if getattr(e, "own_reference", False) and (n, "original") in self.compiled
                and (n, "optimized") in self.compiled}

    def engines(self, batch: int) -> tuple[list, dict]:
        """Fresh driver engines and the compared ones, one per row."""
        from ..runtime import Matcher
        driver = [GramoptEngine(Matcher(self.original, self.vocab)) for _ in range(batch)]
        others = {"gramopt:optimized": [GramoptEngine(Matcher(self.optimized, self.vocab))
                                        for _ in range(batch)]}
        for (name, which), cg in self.compiled.items():
            others[f"{name}:{which}"] = [self.oracles[name].matcher(cg) for _ in range(batch)]
        return driver, others


def lockstep(model, original, optimized, vocab, *, steps: int = 128, seed: int = 0, batch: int = 1,
             sampling: Sampling = Sampling(), overlap: bool = True, engines=(),
             oracles: Oracles | None = None, min_tokens: int = 0, on_step=None) -> LockstepResult:
    """Decode ``steps`` tokens per row under ``original`` and compare every engine's masks and
    terminations with the driver's at every step (module docstring)."""
    oracles = oracles or Oracles(original, optimized, vocab, engines)
    driver, others = oracles.engines(batch)
    refs = oracles.references()
    others = {n: e for n, e in others.items()  # an own-reference oracle runs as a pair or not at all
              if not any(n.startswith(o + ":") for o, x in oracles.oracles.items()
                         if getattr(x, "own_reference", False)) or n in refs or n in refs.values()}
    guide = LockstepGuide(driver, others, vocab, seed, arbiter=reference_arbiter(original, vocab),
                          references=refs)
    bos = vocab.eos_ids[0] if vocab.eos_ids else 0
    gen = generate(model, guide, steps=steps, n_words=vocab.n_words, sampling=sampling, seed=seed,
                   bos=bos, overlap=overlap, eos_ids=vocab.eos_ids, min_tokens=min_tokens, on_step=on_step)
    engines = {"gramopt:original": driver, **others}
    return LockstepResult(seed, gen, list(guide.mismatches), engines, dict(guide.compared),
                          list(oracles.notes) + guide.notes)


# ---------------------------------------------------------------- the whole check


def percentiles_us(times_s) -> tuple[float, float]:
    """(p50, p95) in microseconds (zeros when empty)."""
    a = np.asarray(list(times_s), float) * 1e6
    if a.size == 0:
        return 0.0, 0.0
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


@dataclass
class Serving:
    """One grammar served alone through gramopt's matcher on the lockstep's seeds: the
    overlapped runs (tokens/s) and serial runs of the same seeds (the overlap's A/B)."""

    name: str
    overlapped: list = field(default_factory=list)  # Generation per seed
    serial: list = field(default_factory=list)

    def fill_times(self) -> list[float]:
        return [t for g in self.serial for t in g.mask_s]

    def grammar_times(self) -> list[float]:
        """Per step of the serial runs: mask fill + accepting the sampled tokens (all the
        grammar's work for one token)."""
        return [m + a for g in self.serial for m, a in zip(g.mask_s, g.accept_s)]

    @property
    def tokens_per_s(self) -> float:
        n = sum(g.n_tokens for g in self.overlapped)
        w = sum(g.wall_s for g in self.overlapped)
        return n / w if w > 0 else 0.0

    @property
    def hidden_estimate(self) -> float:
        """1 − Σ exposed / Σ mask over the overlapped runs' steps (Generation docstring)."""
        total = sum(sum(g.mask_s) for g in self.overlapped)
        exposed = sum(g.exposed_mask_s for g in self.overlapped)
        return 0.0 if total <= 0 else max(0.0, min(1.0, 1 - exposed / total))

    @property
    def hidden_ab(self) -> float:
        """(serial wall − overlapped wall) / serial mask time, clipped to [0, 1]."""
        mask = sum(sum(g.mask_s) for g in self.serial)
        saved = sum(g.wall_s for g in self.serial) - sum(g.wall_s for g in self.overlapped)
        return 0.0 if mask <= 0 else max(0.0, min(1.0, saved / mask))


@dataclass
class DecodeReport:
    results: list  # LockstepResult per seed
    serving: dict  # "original" / "optimized" -> Serving (empty when not measured)
    settings: dict
    notes: list = field(default_factory=list)
    compile_s: dict = field(default_factory=dict)
    productions: tuple = (0, 0, 0)  # coverage.productions_exercised of the original by the trajectories

    @property
    def mismatches(self) -> list:
        return [m for r in self.results for m in r.mismatches]

    @property
    def ok(self) -> bool:
        return all(m.engine_error for m in self.mismatches)

    def engine_names(self) -> list[str]:
        return list(self.results[0].engines) if self.results else []

    def steps_checked(self, name: str) -> int:
        if name == DRIVER or not any(r.compared.get(name, 0) for r in self.results):
            return sum(len(r.fill_times(name)) for r in self.results)  # the driver, a reference
        return sum(r.compared.get(name, 0) for r in self.results)

    def summary(self) -> dict:
        """Machine-readable figures (what the table shows)."""
        eng = {}
        for name in self.engine_names():
            fill = [t for r in self.results for t in r.fill_times(name)]
            acc = [t for r in self.results for t in r.accept_times(name)]
            eng[name] = {"steps": self.steps_checked(name),
                         "mismatches": sum(1 for m in self.mismatches if m.engine == name),
                         "mask_p50_us": percentiles_us(fill)[0], "mask_p95_us": percentiles_us(fill)[1],
                         "accept_p50_us": percentiles_us(acc)[0]}
        fwd = [t for r in self.results for t in r.generation.forward_s]
        out = {"engines": eng, "compile_s": dict(self.compile_s), "forward_p50_ms": percentiles_us(fwd)[0] / 1e3,
               "forward_p95_ms": percentiles_us(fwd)[1] / 1e3,
               "tokens": sum(r.generation.n_tokens for r in self.results),
               "productions_exercised": self.productions[0], "productions_with_terminals": self.productions[1],
               "productions": self.productions[2],
               "settings": self.settings, "ok": self.ok}
        if self.serving:
            sv = {}
            for name, s in self.serving.items():
                p50, p95 = percentiles_us(s.fill_times())
                sv[name] = {"tokens_per_s": s.tokens_per_s, "mask_p50_us": p50, "mask_p95_us": p95,
                            "grammar_p50_us": percentiles_us(s.grammar_times())[0],
                            "mask_total_s": sum(s.fill_times()), "hidden_estimate": s.hidden_estimate,
                            "hidden_ab": s.hidden_ab}
            out["serving"] = sv
            o, p = sv.get("original"), sv.get("optimized")
            if o and p and p["mask_total_s"] > 0 and p["mask_p50_us"] > 0 and o["tokens_per_s"] > 0:
                out["mask_speedup_p50"] = o["mask_p50_us"] / p["mask_p50_us"]
                out["grammar_speedup_p50"] = o["grammar_p50_us"] / p["grammar_p50_us"]
                out["mask_speedup"] = o["mask_total_s"] / p["mask_total_s"]
                out["end_to_end_speedup"] = p["tokens_per_s"] / o["tokens_per_s"]
        return out

    def format(self, vocab=None) -> str:
        s = self.summary()
        st = self.settings
        lines = [f"decoding check: {st.get('seeds')} seed(s) × {st.get('steps')} steps × batch {st.get('batch')}, "
                 f"vocab {st.get('vocab')}, device {st.get('device')}, model {st.get('model')}, "
                 f"sampling {st.get('sampling')}", ""]
        head = f"{'engine':<20} {'steps':>7} {'mismatches':>10} {'mask p50 µs':>12} {'mask p95 µs':>12} {'accept p50 µs':>14}"
        lines += [head, "-" * len(head)]
        for name, e in s["engines"].items():
            mm = "—" if name == DRIVER else str(e["mismatches"])
            lines.append(f"{name:<20} {e['steps']:>7} {mm:>10} {e['mask_p50_us']:>12.1f} {e['mask_p95_us']:>12.1f} "
                         f"{e['accept_p50_us']:>14.1f}")
        lines.append(f"forward pass: p50 {s['forward_p50_ms']:.2f} ms, p95 {s['forward_p95_ms']:.2f} ms; "
                     f"{s['tokens']} tokens decoded")
        n_sent = st.get("sentences", 0)
        lines.append(f"trajectories: {st.get('seeds')} sampled seed(s) × batch {st.get('batch')}"
                     f"{f' + {n_sent} spelled sentence(s)' if n_sent else ''}; they went through "
                     f"{s['productions_exercised']} of the original grammar's {s['productions_with_terminals']} "
                     f"productions with terminals ({s['productions']} productions in its BNF)")
        if self.compile_s:
            lines.append("compile (both grammars, before the first step): "
                         + ", ".join(f"{k} {v:.2f} s" for k, v in self.compile_s.items()))
        if "serving" in s:
            lines.append("")
            lines.append("served alone (gramopt matcher, mask overlapped with the forward pass):")
            for name, v in s["serving"].items():
                lines.append(f"  {name:<10} {v['tokens_per_s']:8.1f} tokens/s   mask p50 {v['mask_p50_us']:.1f} µs "
                             f"p95 {v['mask_p95_us']:.1f} µs   mask+accept p50 {v['grammar_p50_us']:.1f} µs   "
                             f"hidden {100 * v['hidden_estimate']:.0f}% "
                             f"(per-step estimate), {100 * v['hidden_ab']:.0f}% (vs serial run)")
            if "mask_speedup" in s:
                lines.append(f"  speedup of the optimized grammar: mask p50 {s['mask_speedup_p50']:.2f}×, "
                             f"mask+accept p50 {s['grammar_speedup_p50']:.2f}×, "
                             f"mask total {s['mask_speedup']:.2f}×, end to end {s['end_to_end_speedup']:.2f}×")
        for n in self.notes:
            lines.append(f"note: {n}")
        if self.mismatches:
            lines.append("")
            for m in self.mismatches:
                lines.append(m.format(vocab) if vocab is not None else repr(m))
        lines.append("")
        n_opt = sum(1 for m in self.mismatches if m.engine == "gramopt:optimized")
        n_engine = sum(1 for m in self.mismatches if m.engine_error)
        if not self.mismatches:
            result = "0 mismatches"
        elif self.ok:
            others = sorted({m.engine.split(":")[0] for m in self.mismatches if m.engine_error})
            result = (f"0 mismatches of gramopt's; {n_engine} difference(s) of {', '.join(others)}, each its "
                      "own error by the reference recognizer")
        else:
            where = sorted({m.engine for m in self.mismatches if not m.engine_error})
            result = (f"{len(self.mismatches)} mismatch(es)"
                      + (f", {n_opt} of the optimized grammar in gramopt's runtime" if n_opt else
                         f", in {', '.join(where)}, not explained as the engine's error"))
        lines.append("result: " + result)
        return "\n".join(lines)


def serve(model, grammar, vocab, *, steps: int, seed: int, batch: int, sampling: Sampling,
          overlap: bool, min_tokens: int = 0) -> Generation:
    """Decode with ``grammar`` alone through gramopt's matcher (a serving loop)."""
    from ..runtime import Matcher
    guide = EngineGuide([GramoptEngine(Matcher(grammar, vocab)) for _ in range(batch)])
    bos = vocab.eos_ids[0] if vocab.eos_ids else 0
    return generate(model, guide, steps=steps, n_words=vocab.n_words, sampling=sampling, seed=seed,
                    bos=bos, overlap=overlap, eos_ids=vocab.eos_ids, min_tokens=min_tokens)


SENTENCE_ROWS = 8  # sentence trajectories decoded together


def decode_check(original, optimized, vocab, model, *, steps: int = 128, seeds: int = 3, batch: int = 1,
                 sampling: Sampling = Sampling(), engines=(), min_tokens: int = 0,
                 measure: bool = True, precompute: bool = True, progress=None,
                 settings: dict | None = None, sentences=()) -> DecodeReport:
    """Lockstep over seeds 0..seeds-1; then over the trajectories of ``sentences`` (texts,
    e.g. the corpus samples and sentences derived from the original grammar), each spelled
    token by token (``decoding.model.ForcedLM``, greedy, at most 4 × ``steps`` tokens), as
    seeds -1, -2, … of ``SENTENCE_ROWS`` rows; then, when every run agreed and ``measure``,
    each grammar served alone on the seeds (overlapped and serial) for tokens/s, speedup and
    the hidden fraction. The report counts the productions of the original grammar the
    trajectories went through (``coverage.productions_exercised``). ``progress(seed, step)``
    is called as decoding goes."""
    oracles = Oracles(original, optimized, vocab, engines, precompute)
    results = []
    for seed in range(seeds):
        cb = (lambda step, gen, s=seed: progress(s, step)) if progress else None
        results.append(lockstep(model, original, optimized, vocab, steps=steps, seed=seed, batch=batch,
                                sampling=sampling, oracles=oracles, min_tokens=min_tokens, on_step=cb))
        if results[-1].mismatch is not None:
            break
    spelled = _spelled(sentences, vocab, 4 * steps)
    if all(r.mismatch is None for r in results):
        from .model import ForcedLM
        stop = vocab.eos_ids[0] if vocab.eos_ids else 0
        for k in range(0, len(spelled), SENTENCE_ROWS):
            rows = spelled[k:k + SENTENCE_ROWS]
            forced = ForcedLM(rows, len(vocab), stop, getattr(model, "device", "cpu"))
            results.append(lockstep(forced, original, optimized, vocab, steps=max(map(len, rows)) + 1,
                                    seed=-1 - k // SENTENCE_ROWS, batch=len(rows), sampling=Sampling(greedy=True),
                                    oracles=oracles))
            if results[-1].mismatch is not None:
                break
    serving = {}
    if measure and all(r.mismatch is None for r in results):
        for name, g in (("original", original), ("optimized", optimized)):
            sv = Serving(name)
            for seed in range(seeds):
                for overlap in (False, True):
                    gen = serve(model, g, vocab, steps=steps, seed=seed, batch=batch, sampling=sampling,
                                overlap=overlap, min_tokens=min_tokens)
                    (sv.overlapped if overlap else sv.serial).append(gen)
            serving[name] = sv
    from ..verify.coverage import productions_exercised
    texts = [b"".join(vocab.token_bytes[t] for t in row if t not in vocab.eos_ids)
             for r in results for row in r.generation.tokens]
    report = DecodeReport(results, serving, dict(settings or {}), list(oracles.notes), dict(oracles.compile_s))
    report.settings["sentences"] = len(spelled)
    report.productions = productions_exercised(original, texts)
    return report


def _spelled(sentences, vocab, limit: int) -> list[list[int]]:
    """The token ids of each sentence the vocabulary can spell (at most ``limit`` tokens
    each; empty and unspellable ones dropped)."""
    from ..runtime.tokenize import TokenizeError, Tokenizer
    tok = Tokenizer.for_vocab(vocab)
    out = []
    for text in sentences:
        try:
            ids = tok.encode(text)[:limit]
        except TokenizeError:
            continue
        if ids:
            out.append(ids)
    return out
