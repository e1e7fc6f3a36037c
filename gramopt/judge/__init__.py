"""The judge: whether the optimizer's output may replace its input, decided in the engines.

    verdict = judge(original, candidate, target, optimizer)
    verdict.grammar                 what to write (the candidate, a repair of it, or a fallback)
    verdict.engine_notes            the "engine-check" report's notes (what differed, what was dropped)
    verdict.guard_notes             the "guard" report's notes (the cost decision), None without a guard
    Optimizer(passes, run_pass, without, fallbacks, same_language, steps, models, samples)
                                    what the judge needs of the optimizer, lent by it

Two questions, in this order for each candidate:
  1. cost: ``target.guard.worse(original, candidate, models)`` (``targets/guard.py``), asked
     of neither the input nor the input with only the target's fix-ups (the last resort);
  2. masks: in every engine the target promises (``Target.checked_in``; those installed),
     the candidate's full token masks along deterministic trajectories must equal the
     input's (``masks.EngineCheck``: samples, derived sentences, seeded walks; xgrammar and
     llama.cpp over a part of Qwen's vocabulary, ``vocabulary``, llguidance over Qwen's whole one
     (``masks.QWEN_WHOLE``) and also over a byte vocabulary). A step where they differ is a
     defect whatever the language check says (xgrammar trusts lookahead assertions).

On a mask difference the culprit is found and dropped, cheapest loss first:
  * per pass: the passes are replayed one at a time from the input; the first whose output
    differs from the input *in that engine* is the culprit;
  * per rule: the input's definitions of the rules the culprit changed are restored in the
    candidate, one rule at a time, then all together (references the restored rules need
    come back from the input too); a repair is kept only where the language check, the
    cost decision and every engine's check pass;
  * else the pipeline is rerun without the culprit pass (twice at most);
  * all of the above within ``Optimizer.repair_work`` (``RepairWork``: expanded symbols of
    every grammar replayed, compared or checked); when it is spent the repairs stop and say so;
  * else the optimizer's fallbacks (the passes without the e-graph ones; the input without
    its redundancy, for a target with ``reduce``), and last the input with only the target's
    fix-ups — checked in the engines too: where even those differ, the input itself;
  * a repair with more rules than the input gives way to the first of those fallbacks (but
    the last) that has fewer rules than it and passes (``_smaller_fallback``).
A candidate the cost decision rejects is tried without the passes that chose by another
measure (``Optimizer.cost_blind``: the inliner, by κ), then goes to the fallbacks that leave
the passes out (the input without its redundancy), then to the last resort.
Everything is counted in work units (mask comparisons, replays): the same input gives the
same verdict and bytes on any machine.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from ..grammar import Grammar, GrammarError
from ..grammar.expr import refs
from ..grammar.size import grammar_size
from .masks import ENGINE_NAMES, EngineCheck, MaskDifference, NotChecked, installed, warm

MAX_DROPS = 2       # passes dropped (the pipeline rerun without them) before the fallbacks
MAX_RULE_SETS = 6   # rule sets restored per culprit (the single rules first, then all of them)


@dataclass(frozen=True)
class Optimizer:
    """What the judge needs of the optimizer that made the candidate, and nothing else of
    it: the pass names in order, one pass on a grammar, the pipeline's output on the input
    with some passes left out, the fallbacks (``(label, grammar)``, the last resort last;
    ``safer=False``: the last resort alone), the language check, the cost models the user
    named, the engine check's budget in mask comparisons, samples of the language, and the
    repairs' work limit (``RepairWork``; None: none)."""

    passes: tuple[str, ...]
    run_pass: Callable[[str, Grammar], Grammar]
    without: Callable[[frozenset], Grammar]
    fallbacks: Callable[[bool], list]
    same_language: Callable[[Grammar, Grammar], bool]
    steps: int
    models: dict | None = None
    samples: tuple[bytes, ...] = ()
    repair_work: int | None = None
    cost_blind: tuple[str, ...] = ()
    """The passes that changed the candidate by a measure other than the target's cost
    models (the inliner: κ): a candidate the cost decision rejects is tried without them
    before the fallbacks that leave every pass out."""
    checking: Callable[[Grammar], None] = lambda grammar: None
    """Told of each grammar the cost decision lets through, before its engine check (the
    caller's final language check may start on it meanwhile: ``passes._VerifyAhead``)."""


class RepairWork:
    """What the repairs may still spend, in expanded symbols (``grammar.size.grammar_size``,
    which every engine's compile and the language check are at most linear in): each grammar
    a pass is replayed on, each grammar compared in an engine (once per engine), each checked
    against the input's language. Work units: the same input stops at the same place."""

    def __init__(self, limit: int | None):
        self.limit, self.left, self.spent_out = limit, limit, False

    def take(self, g: Grammar, times: int = 1) -> bool:
        """Spend ``times`` × the size of ``g``; False (and nothing spent) when it is not left."""
        if self.left is None:
            return True
        cost = grammar_size(g) * times
        if cost > self.left:
            self.spent_out = True
            return False
        self.left -= cost
        return True

    def note(self) -> str:
        return (f"repairs stopped: their work limit ({self.limit:,} expanded symbols of the grammars replayed, "
                f"compared and checked) was spent; the fallbacks follow (--max-judge-repairs raises it)")


@dataclass
class Verdict:
    grammar: Grammar
    engine_notes: list[str] = field(default_factory=list)
    guard_notes: list[str] | None = None
    dropped: list[str] = field(default_factory=list)  # the passes or rules dropped from what is kept, and why
    comparisons: int = 0  # mask comparisons spent on candidates, all engines


def engines_for(target) -> tuple[tuple[str, ...], list[str]]:
    """(the engines to check in, why others the target promises are not): those of
    ``target.checked_in`` that are installed."""
    names, skipped = [], []
    for e in getattr(target, "checked_in", ()):
        (names if installed(e) else skipped).append(e)
    return tuple(names), [f"{e} not installed" for e in skipped]


def engine_versions(target) -> dict[str, str]:
    """The version of each engine ``target`` promises that is installed: the judge's verdicts
    are theirs, so a cache of outputs keys on them."""
    from importlib.metadata import PackageNotFoundError, version
    packages = {"xgrammar": "xgrammar", "llguidance": "llguidance", "llama.cpp": "llama-cpp-python"}
    out = {}
    for e in engines_for(target)[0]:
        try:
            out[e] = version(packages[e])
        except PackageNotFoundError:
            out[e] = "?"
    return out


class _Engines:
    """Each engine's check of the input, made on first need; an engine that cannot check
    the input is left out and named. The engines' checks of one candidate run at once, one
    thread each (their compiles and masks are native calls that release the GIL: llguidance
    and xgrammar say so, llama.cpp is called through ctypes); the verdict, the notes and the
    counts are those of checking them one after another in ``names`` order up to the first
    that differs (what a later engine spent on that candidate is rewound, ``EngineCheck.mark``)."""

    def __init__(self, original: Grammar, names: tuple[str, ...], steps: int, samples: tuple[bytes, ...]):
        self.original, self.names, self.steps, self.samples = original, names, steps, samples
        self.checks: dict[str, EngineCheck | None] = {}   # the checks the order above has reached
        self.skipped: list[str] = []
        self._made: dict[str, tuple[EngineCheck | None, str | None]] = {}  # (check, why not) by engine

    def _make(self, names) -> None:
        """The input's check in each of ``names`` not made yet, made at once."""
        todo = [n for n in names if n not in self._made]
        if todo:
            warm(todo)
            for n, made in zip(todo, _at_once([lambda n=n: self._new(n) for n in todo])):
                self._made[n] = made

    def _new(self, name: str) -> tuple[EngineCheck | None, str | None]:
        try:
            return EngineCheck(name, self.original, self.steps, samples=self.samples), None
        except NotChecked as e:
            return None, str(e)

    def check(self, name: str) -> EngineCheck | None:
        if name not in self.checks:
            self._make((name,))
            self.checks[name], why = self._made[name]
            if why is not None:
                self.skipped.append(why)
        return self.checks[name]

    def difference(self, cand: Grammar, only: str | None = None, at_once: bool = True) -> MaskDifference | None:
        """The first engine's difference in ``names`` order (``only``: that engine alone);
        ``at_once=False`` checks one engine after another (no work spent on speculation: the
        repairs, whose candidates mostly differ)."""
        if cand == self.original or self.steps <= 0:
            return None
        names = (only,) if only else self.names
        if not at_once:
            for name in names:
                c = self.check(name)
                d = c.difference(cand) if c is not None else None
                if d is not None:
                    return d
            return None
        self._make(names)
        ready = [c for c in (self._made[n][0] for n in names) if c is not None]
        marks = [c.mark() for c in ready]
        found = dict(zip(map(id, ready), _at_once([lambda c=c: c.difference(cand) for c in ready])))
        for name in names:
            c = self.check(name)
            d = found[id(c)] if c is not None else None
            if d is not None:
                for later, mark in list(zip(ready, marks))[ready.index(c) + 1:]:
                    later.rewind(mark)  # not asked when checked one after another
                return d
        return None

    def release(self) -> None:
        """Drop the input's checks (each engine's compiled grammars, trace and masks): the
        judge's closures hold this object in reference cycles, which the paused collector
        (``gramopt.collector``) would free only after the whole optimization."""
        self.checks.clear()
        self._made.clear()

    def status(self) -> str:
        if self.steps <= 0:
            return "engine check off (a budget of 0 mask comparisons)"
        done = [n for n in self.names if self.checks.get(n) is not None]
        spent = sum(c.spent for c in self.checks.values() if c is not None)
        errors = sum(len(c.input_errors) for c in self.checks.values() if c is not None)
        line = f"checked in {', '.join(done) or 'no engine'} ({spent:,} mask comparisons)"
        if self.skipped:
            line += "; not checked: " + "; ".join(self.skipped)
        if errors:
            line += (f"; {errors} step(s) where the input's own mask is the engine's error and the "
                     f"candidate's is the language's")
        return line


def _at_once(calls: list) -> list:
    """The results of ``calls`` (functions of no argument), in order, each run in its own
    thread when there are several; the first exception raised is raised."""
    if len(calls) <= 1:
        return [c() for c in calls]
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="engine-check") as pool:
        futures = [pool.submit(c) for c in calls]
        return [f.result() for f in futures]


def judge(original: Grammar, candidate: Grammar, target, optimizer: Optimizer) -> Verdict:
    """The grammar to write in place of ``candidate`` (module docstring), with the notes of
    the "engine-check" and "guard" reports. The engines' compiled grammars and masks are
    released when it returns (``_Engines.release``), not kept through the final check."""
    names, not_installed = engines_for(target)
    engines = _Engines(original, names, optimizer.steps, optimizer.samples)
    engines.skipped += not_installed
    try:
        return _judge(original, candidate, target, optimizer, engines)
    finally:
        engines.release()


def _judge(original: Grammar, candidate: Grammar, target, optimizer: Optimizer, engines: "_Engines") -> Verdict:
    guard = target.guard
    last_label, last = optimizer.fallbacks(False)[-1]  # the last resort (cheap: the fix-ups alone)
    verdict = Verdict(candidate, guard_notes=[] if guard is not None else None)

    def cost_why(c: Grammar) -> str | None:
        if guard is None or c == original or c == last:
            return None
        why = guard.worse(original, c, optimizer.models)
        return None if why is None else f"{guard.name}: {why}"

    def acceptable(c: Grammar, at_once: bool = True) -> bool:
        if cost_why(c) is not None:
            return False
        optimizer.checking(c)
        return engines.difference(c, at_once=at_once) is None

    def done(grammar: Grammar, notes: list[str], note: str | None) -> Verdict:
        verdict.grammar = grammar
        verdict.engine_notes.insert(0, engines.status())
        if note:
            notes.append(note)
        verdict.comparisons = sum(c.spent for c in engines.checks.values() if c is not None)
        return verdict

    why = cost_why(candidate)
    if guard is not None:
        verdict.guard_notes.append(why or f"{guard.name}: {guard.accepted(original)}")
    if why is None:
        optimizer.checking(candidate)
        diff = engines.difference(candidate)
        if diff is None:
            return done(candidate, verdict.engine_notes, None)
        verdict.engine_notes.append(diff.describe())
        found = _repaired(original, candidate, diff, optimizer, engines, acceptable, verdict,
                          RepairWork(optimizer.repair_work))
        if found is not None:
            smaller = _smaller_fallback(original, found[1], optimizer, last, acceptable)
            if smaller is not None:
                verdict.engine_notes.append(f"{found[0]} has {len(found[1].rules)} rules, more than the "
                                            f"input's {len(original.rules)}: a smaller fallback passes")
                found = smaller
            return done(found[1], verdict.engine_notes, f"kept {found[0]}")
    if why is not None and optimizer.cost_blind:
        c = optimizer.without(frozenset(optimizer.cost_blind))
        if c not in (original, last, candidate) and acceptable(c):
            return done(c, verdict.guard_notes,
                        f"kept the passes' output without {', '.join(optimizer.cost_blind)}")
    # the fallbacks before the last resort: after an engine's difference all of them, after the
    # cost decision's rejection those that keep the passes out (the input without its redundancy)
    notes = verdict.guard_notes if why is not None else verdict.engine_notes
    fallback = _first_fallback(optimizer, why is None, original, last, acceptable)
    if fallback is not None:
        return done(fallback[1], notes, f"kept {fallback[0]}")
    optimizer.checking(last)
    diff = engines.difference(last)
    if diff is not None:  # even the target's fix-ups differ in an engine: the input itself
        verdict.engine_notes.append(f"{last_label}: {diff.describe()}")
        return done(original, verdict.engine_notes, "kept the input")
    return done(last, notes, f"kept {last_label}")


def _first_fallback(optimizer: Optimizer, safer: bool, original: Grammar, last: Grammar,
                    acceptable: Callable[..., bool],
                    fits: Callable[[Grammar], bool] = lambda c: True) -> tuple[str, Grammar] | None:
    """(label, grammar): the first of ``optimizer.fallbacks(safer)`` before the last resort
    that is neither the input nor the last resort, ``fits`` and passes every check; None
    when none does."""
    for label, c in optimizer.fallbacks(safer)[:-1]:
        if c != original and c != last and fits(c) and acceptable(c):
            return label, c
    return None


def _smaller_fallback(original: Grammar, repair: Grammar, optimizer: Optimizer, last: Grammar,
                      acceptable: Callable[..., bool]) -> tuple[str, Grammar] | None:
    """A repair restores the input's definitions of the rules it drops, and with them what the
    input repeated; one larger than the input it came from has kept less than it restored
    (an obfuscated XML grammar: 257 rules in, a 278-rule repair). Then the first fallback
    before the last resort (the passes without the e-graph ones, the input without its
    redundancy) with fewer rules than the repair that passes every check wins; None when the
    repair is no larger than the input or no such fallback passes. Rule counts, not time:
    the same input takes the same branch on any machine."""
    if len(repair.rules) <= len(original.rules):
        return None
    return _first_fallback(optimizer, True, original, last, acceptable,
                           fits=lambda c: len(c.rules) < len(repair.rules))


def _repaired(original: Grammar, out: Grammar, diff: MaskDifference, optimizer: Optimizer, engines: _Engines,
              acceptable: Callable[..., bool], verdict: Verdict,
              work: RepairWork) -> tuple[str, Grammar] | None:
    """(label, grammar): the candidate with the culprit's rules restored, or the pipeline
    without the culprit pass, whichever passes every check first (module docstring); None
    when neither does within ``MAX_DROPS`` culprits, or within ``work`` (then said in a note)."""
    found = _repairs(original, out, diff, optimizer, engines, acceptable, verdict, work)
    if found is None and work.spent_out:
        verdict.engine_notes.append(work.note())
    return found


def _repairs(original: Grammar, out: Grammar, diff: MaskDifference, optimizer: Optimizer, engines: _Engines,
             acceptable: Callable[..., bool], verdict: Verdict, work: RepairWork) -> tuple[str, Grammar] | None:
    """``_repaired`` without its note; every check is paid from ``work`` before it is made."""
    every = len(engines.names)
    dropped: frozenset = frozenset()
    why: dict[str, str] = {}
    current = out
    for _ in range(MAX_DROPS):
        engine = diff.engine
        found = _culprit(original, optimizer, dropped, engines, engine, work)
        if found is None:
            if work.spent_out:
                return None
            verdict.engine_notes.append(f"no single pass replayed from the input differs in {engine}")
            return None
        culprit, before, after = found
        changed = changed_rules(before, after)
        for rules in rule_sets(changed):
            fixed = restore(current, original, rules)
            if fixed is None or fixed == current:
                continue
            if not work.take(fixed, 1 + every):
                return None
            # the engine that told the candidate apart first (its verdict on a source is kept, so
            # ``acceptable`` below asks it nothing twice): a restore it still tells apart is
            # refused without the language check, pure Python and most of a repair's seconds;
            # ``acceptable`` implies this, so the repair chosen is the one chosen without it
            if engines.difference(fixed, only=engine) is not None:
                continue
            if not optimizer.same_language(original, fixed):
                continue
            if acceptable(fixed, at_once=False):
                what = f"pass {culprit}'s rewrite of {', '.join(rules)} (the input's definition restored)"
                verdict.dropped.append(what)
                return f"the passes' output without {what}", fixed
        dropped = dropped | {culprit}
        why[culprit] = f"pass {culprit} ({diff.engine} masks differ)"
        if not work.take(original, len(optimizer.passes)):
            return None
        current = optimizer.without(dropped)
        if current == original:
            return None
        if not work.take(current, every):
            return None
        nxt = engines.difference(current, at_once=False)
        if nxt is None:
            if not acceptable(current, at_once=False):
                return None
            verdict.dropped += [why[p] for p in sorted(dropped)]
            return f"the passes' output without pass {', '.join(sorted(dropped))}", current
        verdict.engine_notes.append(f"without pass {', '.join(sorted(dropped))}: {nxt.describe()}")
        diff = nxt
    return None


def _culprit(original: Grammar, optimizer: Optimizer, dropped: frozenset, engines: _Engines,
             engine: str, work: RepairWork) -> tuple[str, Grammar, Grammar] | None:
    """(pass, its input, its output): the first pass, replayed one at a time from the input
    (``dropped`` left out), whose output differs from the input in ``engine``; None when none
    does, or when ``work`` is spent first."""
    g = original
    for name in optimizer.passes:
        if name in dropped:
            continue
        if not work.take(g):
            return None
        nxt = optimizer.run_pass(name, g)
        if nxt != g and not work.take(nxt):
            return None
        if nxt != g and engines.difference(nxt, only=engine) is not None:
            return name, g, nxt
        g = nxt
    return None


def changed_rules(before: Grammar, after: Grammar) -> list[str]:
    """Names of the rules defined differently (or only) in one of the two grammars, in
    ``after``'s order, then ``before``'s."""
    a, b = {r.name: r for r in before.rules}, {r.name: r for r in after.rules}
    names = [*b, *(n for n in a if n not in b)]
    return [n for n in names if a.get(n) != b.get(n)]


def rule_sets(changed: list[str]) -> list[tuple[str, ...]]:
    """The sets of rules to restore, smallest first: each rule alone, then all of them
    (``MAX_RULE_SETS`` in all)."""
    sets = [(n,) for n in changed][:MAX_RULE_SETS - 1]
    if len(changed) > 1:
        sets.append(tuple(changed))
    return sets


def restore(grammar: Grammar, original: Grammar, names) -> Grammar | None:
    """``grammar`` with the input's definitions of ``names`` (those the input has), plus the
    input's rules they reference that ``grammar`` lacks, transitively; None when nothing is
    restored or the result does not hold together."""
    theirs = {r.name: r for r in original.rules}
    rules = {r.name: r for r in grammar.rules}
    todo = [n for n in names if n in theirs]
    if not todo:
        return None
    for n in todo:
        rules[n] = theirs[n]
    pending = list(todo)
    while pending:
        r = rules[pending.pop()]
        for ref in refs(r.body) + (refs(r.lookahead) if r.lookahead is not None else []):
            if ref not in rules:
                if ref not in theirs:
                    return None
                rules[ref] = theirs[ref]
                pending.append(ref)
    order = [*(r.name for r in grammar.rules), *(n for n in rules if n not in grammar)]
    try:
        return grammar.replace_rules(rules[n] for n in order).check()
    except GrammarError:
        return None


__all__ = ["ENGINE_NAMES", "MAX_DROPS", "MAX_RULE_SETS", "MaskDifference", "Optimizer", "RepairWork", "Verdict",
           "changed_rules",
           "engine_versions", "engines_for", "judge", "restore", "rule_sets"]
