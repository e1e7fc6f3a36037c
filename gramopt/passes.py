"""The pass API: named passes, a pass manager, ``optimize`` (its reports: ``gramopt.report``).

    from gramopt.passes import optimize
    result = optimize(grammar, target="generic", passes=None, limits=None, verify=True)
    # target: a name in gramopt.targets.TARGETS, or a Target record
    result.grammar, result.report.format(), result.report.to_json()

The default pipeline (``DEFAULT_PASSES``) reads top to bottom::

    cleanup     the IR clean-ups of gramopt/transforms/cleanup (rounds to their fixpoint)
    saturate    lower into the e-graph, saturate every rewrite family, extract for the target
    inline      inline non-start rules as the target's inlining policy says
                — the three above repeated as one fixpoint (``run_to_fixpoint``) —
    target      the target's fix-ups, once, last (gramopt.targets; xgrammar: star rules,
                FOLLOW lookaheads, a root that rules reference delegates): no later
                saturation undoes them
    guard, engine-check   the judge (gramopt.judge): the cost decision, and the output's token
                masks against the input's in every engine the target promises
    verify      the output against the input

Every pass is an entry of the one registry, ``gramopt.transforms.registry.PASSES`` (clean-ups,
saturation and its families, inlining, the target's fix-ups, every reshaping); any runs alone:
``passes=["delegation", "inline"]``. The e-graph passes
"delegation", "recursion", "alternation", "repetition", "sequence" saturate with one family
only; "saturate" with all. An e-graph pass whose output has a larger κ than its input is
reverted when its objective (``objective``: κ + SAC-proxy, plus a cost per recursive
reference for engine targets, ``costmodels.objective``) grew, except for a target without
left recursion (llama.cpp), where removing it may cost states: κ can grow only where an
ambiguity or (for an engine) a recursion goes away.

Every difference between targets is a field of its ``Target`` record (``gramopt.targets``);
nothing here compares target names. A target that promises engines (``checked_in``) or has a
``guard`` has the result judged (``gramopt.judge``): its masks in each engine installed must
equal the input's along deterministic trajectories (xgrammar trusts lookahead assertions,
llguidance's greedy lexer accepts less than the language: a same-language output can still
differ there); on a difference the pass and then the rules that caused it are found and
dropped, and the report says which.

``fast=True`` is the per-request mode (a serving stack optimizing the grammar of each
request's JSON schema, where the optimizer must cost less than the engine's compile):
``REQUEST_PASSES`` (clean-ups, inlining, the target's fix-ups; no e-graph saturation) run
once, without the second round that confirms the fixpoint, and verification is
proportional to what changed (``request_bounds``): random derivations of both grammars
checked in the other, ``DERIVATIONS_PER_CHANGED_RULE`` per rule that is not in both grammars
alike (a work-unit budget: the same input gives the same verdict and bytes), instead of the
full check (bounded enumeration, production coverage, exact automata). Every pass is
language-preserving by construction either way; the fast check is weaker evidence than the
full one and the report says which ran (``verify_stats``).

With ``verify=True`` the output is checked against the input with
``gramopt.verify.check_equivalence``; on a difference the passes are replayed one at a time
to find the first that changed the language, and ``OptimizationError`` carries the
counterexample and that pass's name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from . import targets
from .collector import paused, release_memory, release_now
from .cores import spare
from .costmodels import sac_proxy
from .costmodels.kappa import kappa
from .costmodels.objective import objective as _objective
from .egraph import Limits
from .grammar import MAX_EXPANDED, MAX_PASS_DEPTH, Directive, Grammar, GrammarError, check_size, depth
from .grammar.analysis import productive_rules
from .grammar.size import grammar_size
from .report import PassReport, Report
from .stage import stage
from .verify import Bounds
from .transforms.fixpoint import fixpoint
from .transforms.registry import (DEFAULT_PASSES, EGRAPH_PASSES, PASSES, REQUEST_PASSES, PassContext,
                                  cost_model_used)
from .targets import Target

DERIVATIONS_PER_CHANGED_RULE = 1
MAX_REQUEST_DERIVATIONS = 64
REQUEST_DERIVATION_DEPTH = 8  # past this depth a derivation takes shortest completions


class OptimizationError(Exception):
    """The optimizer produced a grammar with a different language (it refuses to emit it).
    ``counterexample`` is a string in exactly one of the two languages; ``pass_name`` the
    first pass whose output differs from the input."""

    def __init__(self, message: str, counterexample=None, pass_name: str | None = None, result=None):
        super().__init__(message)
        self.counterexample = counterexample
        self.pass_name = pass_name
        self.result = result

    def user_message(self, path: str) -> str:
        """What a user sees: the counterexample and the pass that introduced it (a bug in
        gramopt — please report it with the input)."""
        lines = [f"{path}: error: the optimized grammar's language differs from the input's; nothing written"]
        if self.counterexample is not None:
            lines.append(f"  counterexample: {self.counterexample}")
        if self.pass_name:
            lines.append(f"  first changed by pass: {self.pass_name}")
        return "\n".join(lines)


@dataclass
class Result:
    grammar: Grammar
    report: Report


class PassManager:
    """Runs named passes in order, one ``PassReport`` each; ``callback(name, grammar)``
    is called after every pass (to dump the IR)."""

    def __init__(self, passes=None, target: "str | Target" = targets.DEFAULT, limits: Limits | None = None,
                 callback: Callable[[str, Grammar], None] | None = None, cost_model: str | None = None,
                 keep: tuple[str, ...] = ()):
        names = list(DEFAULT_PASSES if passes is None else passes)
        unknown = [n for n in names if n not in PASSES]
        if unknown:
            raise ValueError(f"unknown pass(es) {', '.join(unknown)} (known: {', '.join(PASSES)})")
        self.names = names
        self.ctx = PassContext(targets.get(target), limits or Limits(), cost_model, tuple(keep))
        self.callback = callback

    def run_pass(self, name: str, g: Grammar) -> tuple[Grammar, PassReport]:
        t = time.perf_counter()
        k0 = kappa(g)
        rep = PassReport(name, k0, k0, len(g.rules), len(g.rules), 0.0)
        with stage(f"pass {name}"):
            out = _unpinned(PASSES[name](_pinned(g, self.ctx.keep), self.ctx, rep))
        if out is not g and _too_big(out) and not _too_big(g):
            rep.notes.append(f"reverted (output nested deeper than {MAX_PASS_DEPTH} or larger than "
                             f"{MAX_EXPANDED:,} expanded symbols)")
            out = g
        k1 = kappa(out)
        if name in EGRAPH_PASSES and self.ctx.target.reverts_costlier_passes and out is not g:
            before, after = objective(g, self.ctx.target, k0), objective(out, self.ctx.target, k1)
            if after > before:
                rep.notes.append(f"reverted (objective {before:g}→{after:g})")
                out, k1 = g, k0
        rep.kappa_after, rep.rules_after = k1, len(out.rules)
        kept = set(out.names)
        rep.removed = [n for n in g.names if n not in kept]
        rep.seconds = time.perf_counter() - t
        if self.callback:
            self.callback(name, out)
        return out, rep

    def run(self, g: Grammar, names=None) -> tuple[Grammar, list[PassReport]]:
        reports = []
        for name in self.names if names is None else names:
            g, rep = self.run_pass(name, g)
            reports.append(rep)
        return g, reports

    def run_to_fixpoint(self, g: Grammar) -> tuple[Grammar, list[PassReport]]:
        """The pipeline as it reads: every pass but the target's, repeated until a round
        changes nothing (at most 10 rounds), then the target's fix-ups once, last, so that no
        saturation undoes them (they are idempotent and end in their own fixpoint)."""
        core = [n for n in self.names if n != "target"]
        out, reports = self.run(g, core)
        last: list = []  # the reports of the round just run (kept when it changed the grammar)

        def again(g: Grammar) -> Grammar:
            g, last[:] = self.run(g, core)
            return g

        def kept(k: int, _: Grammar) -> None:
            for p in last:
                p.name = f"{p.name}#{k + 2}"  # round 1 ran above
            reports.extend(last)
        out = fixpoint(again, out, 9, kept)
        if "target" in self.names:
            out, rep = self.run_pass("target", out)
            reports.append(rep)
        return out, reports


KEEP = "keep"  # the directive that pins ``optimize(keep=...)``'s rules while a pass runs


def _pinned(g: Grammar, keep: tuple[str, ...]) -> Grammar:
    """``g`` with its kept rules named by a ``KEEP`` directive. Every pass takes a rule that a
    directive names as a root (reachability, inlining, merging, the extractor's roots), so a
    kept rule is never removed, inlined away or merged into another name. No language
    changes: the start rule is the start rule."""
    return replace(g, directives=g.directives + (Directive(KEEP, keep),)) if keep else g


def _unpinned(g: Grammar) -> Grammar:
    """``g`` without the ``KEEP`` directive (never written, never compared)."""
    if not any(d.name == KEEP for d in g.directives):
        return g
    return replace(g, directives=tuple(d for d in g.directives if d.name != KEEP))


def _too_big(g: Grammar) -> bool:
    """Whether ``g`` breaks the bounds every pass keeps (so that whatever gramopt writes,
    it reads back and can verify): a rule nested deeper than ``MAX_PASS_DEPTH``, or an
    expanded size over ``MAX_EXPANDED``."""
    return (any(depth(r.body) > MAX_PASS_DEPTH for r in g.rules)
            or grammar_size(g) > MAX_EXPANDED)


def objective(g: Grammar, target: "str | Target", k: int | None = None) -> float:
    """What an e-graph pass must not make worse (``costmodels.objective``), with the
    target's recursion penalty (the extractor's own)."""
    return _objective(g, targets.get(target).recursion_penalty, kappa(g) if k is None else k)


def changed_rules(a: Grammar, b: Grammar) -> int:
    """How many rules are not in both grammars alike (same name, same body)."""
    ra, rb = {(r.name, r.body) for r in a.rules}, {(r.name, r.body) for r in b.rules}
    return len(ra ^ rb)


def request_bounds(a: Grammar, b: Grammar):
    """(bounds, methods) of the per-request check (``fast=True``): random derivations both
    ways, ``DERIVATIONS_PER_CHANGED_RULE`` per changed rule (at least one rule's worth, at
    most ``MAX_REQUEST_DERIVATIONS``), each taking shortest completions past depth
    ``REQUEST_DERIVATION_DEPTH`` (short sentences: the reference recognizer is the cost)."""
    from .verify.result import Bounds
    n = DERIVATIONS_PER_CHANGED_RULE * max(1, changed_rules(a, b))
    return Bounds(derivations=min(MAX_REQUEST_DERIVATIONS, n), max_depth=REQUEST_DERIVATION_DEPTH), ("derivations",)


def optimize(grammar: Grammar, target: "str | Target" = targets.DEFAULT, passes=None, limits: Limits | None = None,
             verify: bool = True, callback=None, cost_model: str | None = None, fast: bool = False,
             bounds: "Bounds | None" = None, keep=(), samples: tuple[bytes, ...] = ()) -> Result:
    """Optimize ``grammar`` for ``target`` (see the module docstring). ``cost_model`` names a
    calibrated model (a file, or a folder of ``ENGINE.json`` as ``gramopt calibrate``
    writes) for a target that uses one; by default the one shipped in the package.
    ``fast``: the per-request mode (``REQUEST_PASSES`` once, a check proportional to what
    changed). ``bounds`` are the language check's (``gramopt.verify.Bounds``); when its work
    budget (``max_work``) is spent before a verdict, the input is returned unchanged and
    ``report.stops`` says so — the same on every machine. ``keep`` names rules kept as entry
    points besides the start (never removed, inlined away or renamed: ``_pinned``). ``samples``:
    sentences of the language (bytes, e.g. a schema's valid instances) the judge follows first
    when it compares the output's masks with the input's in the target's engines
    (``gramopt.judge``). Runs with the cyclic garbage collector paused (``gramopt.collector``)."""
    missing = [k for k in keep if k not in grammar]
    if missing:
        raise GrammarError(f"keep: no rule named '{missing[0]}'")
    with paused():
        return _optimize(grammar, target, passes, limits, verify, callback, cost_model, fast, bounds,
                         tuple(dict.fromkeys(keep)), tuple(samples))


def _optimize(grammar: Grammar, target: "str | Target", passes, limits: Limits | None, verify: bool, callback,
              cost_model: str | None, fast: bool, bounds: "Bounds | None", keep: tuple[str, ...] = (),
              samples: tuple = ()) -> Result:
    t0 = time.perf_counter()
    check_size(grammar)
    pm = PassManager(REQUEST_PASSES if fast and passes is None else passes, target, limits, callback, cost_model,
                     keep)
    too_large = _too_large_to_check(grammar, pm)
    if too_large is not None:  # no engine can vouch for an output: the input, before any work
        k, sac, n = kappa(grammar), sac_proxy(grammar), len(grammar.rules)
        report = Report(pm.ctx.target.name, [], k, k, sac, sac, n, n)
        report.stops.append(too_large)
        report.verified = "ok"
        report.cost_model = cost_model_used(pm.ctx.target, cost_model)[1]
        report.seconds = time.perf_counter() - t0
        return Result(grammar, report)
    if fast:
        out, reports = pm.run(grammar)
    else:
        out, reports = pm.run_to_fixpoint(grammar)
    out = _derived_lookaheads_kept(grammar, out, pm.ctx.target, reports)
    if grammar_size(grammar) > AHEAD_MAX_SIZE:
        # the saturation's garbage and free pages, before the engines and the check stack their
        # memory on them (WashingtonPost wp_26, 17,178 symbols: 1,023 -> 555 MB here, in 0.08 s;
        # its peak 1,279 -> 967 MB). Small grammars free little and would pay the collection.
        release_now()
    ahead = _VerifyAhead(grammar, bounds, side_by_side=verify and not fast and spare())
    if out != grammar and (pm.ctx.target.checked_in or pm.ctx.target.guard is not None):
        with stage("engine check"):
            out = _judged(grammar, out, pm, reports, ahead, fast, bounds, samples)
    if out == grammar:
        out = grammar  # keep comments and positions when nothing changed
    report = Report(pm.ctx.target.name, reports, kappa(grammar), kappa(out), sac_proxy(grammar), sac_proxy(out),
                    len(grammar.rules), len(out.rules))
    seen_stops = set()
    for p in reports:  # one line per distinct stop (a fixpoint round repeats its pass's)
        for why in p.stops:
            line = f"pass {p.name.split('#')[0]}: {why}"
            if line not in seen_stops:
                seen_stops.add(line)
                report.stops.append(line)
    for p in reports:  # a judge that kept a fallback says so in the summary too, with its reason
        if p.name in ("guard", "engine-check") and len(p.notes) > 1:
            report.notes.append(f"{p.notes[-1]} ({p.notes[-2]})")
    if grammar.start not in productive_rules(grammar):
        report.warnings.append(f"the language is empty: rule '{grammar.start}' derives no finite string")
    report.cost_model = cost_model_used(pm.ctx.target, cost_model)[1]
    if verify:
        from .verify import check_equivalence as check
        if out == grammar:
            report.verified = "ok"
        else:
            release_memory(len(grammar.rules) + len(out.rules))
            try:
                with stage("verification"):
                    if fast:
                        fast_bounds, methods = request_bounds(grammar, out)
                        fast_bounds = replace(fast_bounds, max_work=(bounds or Bounds()).max_work)
                        res = check(grammar, out, fast_bounds, methods)
                        res.stats["mode"] = f"per-request: {fast_bounds.derivations} derivations each way"
                    else:  # the changed rules first, the unchanged ones as letters (verify.unchanged)
                        res = ahead.result(out)  # made during the judge
                        if res is None:
                            res = ahead.checked(out)
                    for k in keep if res.ok and not res.stats.get("work_spent") else ():
                        # a kept entry point's own language: the engine may start there too
                        res = check(replace(grammar, start=k), replace(out, start=k), bounds or Bounds(),
                                    incremental=not fast)
                        if not res.ok or res.stats.get("work_spent"):
                            break
            except RecursionError as e:  # the checker's limits, not a verdict
                report.verified = f"error: {e!r}"
                report.seconds = time.perf_counter() - t0
                return Result(out, report)
            report.verify_stats = dict(getattr(res, "stats", {}) or {})
            if res.ok and res.stats.get("work_spent"):  # deterministic fallback: the input, unchanged
                report.stops.append(
                    f"verification stopped: its work budget ({(bounds or Bounds()).max_work:,} Earley steps) "
                    f"was spent in {res.stats['work_spent']} before its bounds were met; the input is "
                    f"written unchanged (raise --max-verify-work to optimize it)")
                out = grammar
                report.kappa_after, report.sac_after, report.rules_after = \
                    report.kappa_before, report.sac_before, report.rules_before
                report.verified = "ok"
                report.seconds = time.perf_counter() - t0
                return Result(out, report)
            if res.stats.get("safety_limit"):  # a verdict cut short by time: refuse, deterministically
                raise GrammarError(f"verification ({res.stats['safety_limit']}) stopped at its safety time "
                                   f"limit: nothing written (its budgets are work units; this machine is too "
                                   f"slow or too loaded for this grammar)")
            if res.ok:
                report.verified = "ok"
            else:
                report.verified = "failed"
                culprit = _bisect(grammar, pm, check)
                report.seconds = time.perf_counter() - t0
                raise OptimizationError(
                    f"optimized grammar differs from the input (counterexample {res.counterexample!r}, "
                    f"first changed by pass '{culprit}')", res.counterexample, culprit, Result(out, report))
    report.seconds = time.perf_counter() - t0
    return Result(out, report)


def _too_large_to_check(grammar: Grammar, pm: PassManager) -> str | None:
    """Why ``grammar`` is written unchanged without any work, or None: the target promises
    engines whose check would compile an input above ``Limits.engine_check_size`` (in
    ``costmodels.engine_shapes.compile_work``). Their masks could not be compared within the budget, and an
    output they have not compared is not written (the language check alone does not see an
    engine's form-dependent errors); the input is what keeps their masks, trivially."""
    from .costmodels.engine_shapes import compile_work
    from .judge import engines_for
    limits, engines = pm.ctx.limits, engines_for(pm.ctx.target)[0]
    if limits.engine_check_steps <= 0 or not engines:
        return None
    work = compile_work(grammar)
    if work <= limits.engine_check_size:
        return None
    return (f"engine check: compiling the input in {', '.join(engines)} is {work:,} work "
            f"units (rules × positions), over the check's limit ({limits.engine_check_size:,}): the input is "
            f"written unchanged (raise --max-engine-check-size to optimize it checked in the engines, or "
            f"pass --max-engine-check-steps 0 to optimize it with the language check alone)")


def _derived_lookaheads_kept(original: Grammar, out: Grammar, t: Target, reports: list | None = None) -> Grammar:
    """``out`` with the lookaheads xgrammar derives for ``original``'s rules kept, for a target
    that claims xgrammar's speed (``Target.keeps_derived_lookaheads``; the argument is
    ``transforms.reshape.derived_lookaheads``'); what was done is noted in the last pass report."""
    if not t.keeps_derived_lookaheads or out == original:
        return out
    from .formats import dialect_record
    from .transforms.reshape.derived_lookaheads import keep_derived_lookaheads
    kept, copied = keep_derived_lookaheads(original, out, dialect_record(out.dialect).name_separator)
    if copied and reports:
        reports[-1].notes.append(f"{t.name}: xgrammar's derived lookaheads kept ({len(copied)}: "
                                 f"{', '.join(copied[:4])}{', …' if len(copied) > 4 else ''})")
        reports[-1].rules_after = len(kept.rules)
    return kept


def _fallbacks(grammar: Grammar, pm: PassManager, safer: bool = True):
    """What a target keeps when the passes' output is rejected, in order: ``(label,
    grammar)`` for the passes without the e-graph ones (no rule turns from recursive to
    regular; only when ``safer``), then the input with only the target's fix-ups (the last
    resort, taken as it is: the fix-ups are what the target cannot do without)."""
    t = pm.ctx.target
    if safer:
        pm_safer = PassManager([n for n in pm.names if n not in EGRAPH_PASSES], pm.ctx.target, pm.ctx.limits,
                               keep=pm.ctx.keep)
        yield ("the passes' output without the e-graph passes",
               _derived_lookaheads_kept(grammar, pm_safer.run(grammar)[0], t))
    keep = pm.ctx.keep  # the kept entry points are roots here too (``_pinned``)
    if t.reduce is not None:  # the default target: redundancy removed is never slower (targets.guard)
        yield "the input without its redundancy", _derived_lookaheads_kept(
            grammar, _unpinned(t.apply_fixups(t.reduce(_pinned(grammar, keep)))), t)
    if t.fixups and "target" in pm.names:
        yield "the input with only the fix-ups", _unpinned(t.apply_fixups(_pinned(grammar, keep)))
    else:
        yield "the input", grammar


AHEAD_MAX_SIZE = 2_000
"""The largest grammar (expanded symbols, ``grammar.size``) checked ahead: the check holds its
memory while the engines hold theirs, and on a large grammar that overlap raised the peak
(WashingtonPost wp_26, 1,268 rules: 1.29 → 1.50 GB); the median JSONSchemaBench grammar has
~250, where both are small. Larger ones are checked after the engines are released, as before."""


class _VerifyAhead:
    """The final language check (``check_equivalence(input, output, incremental=True)``) of
    the first grammar the judge sends to the engines, started in a thread of its own while
    the engines check it: that grammar is the one kept most often (the candidate, or the
    passes' output without the inliner: 200 of 222 JSONSchemaBench schemas), and the check
    is pure Python where the engines' masks are native calls that release the interpreter,
    so the two share the cores. The check is a function of the two grammars and the bounds:
    its verdict is the one the final check would reach after the judge. A grammar the judge
    does not keep costs that one check, not used (``result`` is None; the final check runs).
    The judge's own language checks of its repairs are the same call, so they are kept too
    (``checked``): a repair kept is not checked a second time."""

    def __init__(self, grammar: Grammar, bounds: "Bounds | None", side_by_side: bool = True):
        self.grammar, self.bounds, self.side_by_side = grammar, bounds or Bounds(), side_by_side
        self.of: Grammar | None = None
        self.thread = None
        self.outcome: list = []  # [("ok", result)] or [("raised", exception)] once done
        self.made: list = []  # (grammar, result) of the judge's own checks (``checked``)

    def _check(self, candidate: Grammar):
        """The final check: ``check_equivalence(input, candidate, bounds, incremental=True)``."""
        from .verify import check_equivalence
        return check_equivalence(self.grammar, candidate, self.bounds, incremental=True)

    def checked(self, candidate: Grammar):
        """``_check(candidate)``, kept for ``result``."""
        res = self._check(candidate)
        self.made.append((candidate, res))
        return res

    def start(self, candidate: Grammar) -> None:
        """Check ``candidate`` in a thread, if it is the first one and a core is spare for it
        (``side_by_side``, ``cores.spare``: in a batch that fills every core it is not)."""
        if not self.side_by_side or self.thread is not None or candidate == self.grammar \
                or grammar_size(candidate) > AHEAD_MAX_SIZE:
            return
        import threading
        self.of = candidate

        def run():
            try:
                self.outcome.append(("ok", self._check(candidate)))
            except BaseException as e:  # noqa: BLE001 - raised where the final check would raise it
                self.outcome.append(("raised", e))
        # a daemon: a check whose grammar is not kept never holds the process's exit
        self.thread = threading.Thread(target=run, name="verify-ahead", daemon=True)
        self.thread.start()

    def result(self, out: Grammar):
        """The check's result when ``out`` is the grammar it checks (its exception raised, as
        the final check's would be); None otherwise."""
        for g, res in self.made:
            if out is g or out == g:
                return res
        if self.thread is None or not (out is self.of or out == self.of):
            return None
        self.thread.join()
        how, value = self.outcome[0]
        if how == "raised":
            raise value
        return value


def _judged(grammar: Grammar, out: Grammar, pm: PassManager, reports: list, ahead: _VerifyAhead,
            fast: bool = False, bounds: "Bounds | None" = None, samples: tuple = ()) -> Grammar:
    """The passes' output as the judge (``gramopt.judge``) decides: the target's ``guard``
    (no engine's cost may grow) and its masks in every engine of ``checked_in``; a rejected
    output gives way to a repair (the culprit pass's rules restored, or the pipeline without
    that pass), then to ``_fallbacks``. Each judge's notes are its pass report's ("guard",
    "engine-check"); the judge is lent what it needs of the pass manager, nothing else.
    ``ahead``: the final language check (its checks of the input are the judge's too)."""
    from .judge import Optimizer, judge
    from .verify import check_equivalence
    t = pm.ctx.target
    # a model the user named prices the target's engine in the guard as in the extractor
    models = {t.calibrated_engine: pm.ctx.cost_model} if t.calibrated_engine and pm.ctx.cost_model else None
    replay = PassManager(pm.names, t, pm.ctx.limits, None, pm.ctx.cost_model, pm.ctx.keep)

    def without(dropped: frozenset) -> Grammar:
        rest = PassManager([n for n in pm.names if n not in dropped], t, pm.ctx.limits, None, pm.ctx.cost_model,
                           pm.ctx.keep)
        return _derived_lookaheads_kept(grammar, (rest.run(grammar) if fast else rest.run_to_fixpoint(grammar))[0], t)

    def same_language(a: Grammar, b: Grammar) -> bool:
        res = ahead.checked(b) if a is grammar else check_equivalence(a, b, bounds or Bounds(), incremental=True)
        return res.ok and not res.stats.get("work_spent") and not res.stats.get("safety_limit")

    # the inliner decides by κ, not by the target's cost models: where it inlined, a rejected
    # output is tried without it first
    inlined = ("inline",) if any(r.fired.get("inline") for r in reports) else ()
    optimizer = Optimizer(tuple(pm.names), lambda name, g: replay.run_pass(name, g)[0], without,
                          lambda safer: list(_fallbacks(grammar, pm, safer)), same_language,
                          pm.ctx.limits.engine_check_steps, models, samples, pm.ctx.limits.judge_repair_work,
                          inlined, ahead.start)
    tick = time.perf_counter()
    verdict = judge(grammar, out, t, optimizer)
    seconds = time.perf_counter() - tick
    kept = verdict.grammar
    for name, notes in (("guard", verdict.guard_notes), ("engine-check", verdict.engine_notes if t.checked_in else None)):
        if notes is not None:
            rep = PassReport(name, kappa(out), kappa(kept), len(out.rules), len(kept.rules),
                             seconds if name == "engine-check" else 0.0)
            rep.notes = list(notes)
            reports.append(rep)
    return kept


def _bisect(grammar: Grammar, pm: PassManager, check) -> str | None:
    """Replay the passes one at a time; the first whose output differs from the input."""
    g = grammar
    for name in pm.names:
        g, _ = pm.run_pass(name, g)
        res = check(grammar, g)
        if not res.ok:
            return name
    return None


__all__ = ["DEFAULT_PASSES", "EGRAPH_PASSES", "PASSES", "PassContext", "REQUEST_PASSES", "cost_model_used", "OptimizationError", "PassManager",
           "PassReport", "Report", "Result", "changed_rules", "optimize", "request_bounds", "Limits"]
