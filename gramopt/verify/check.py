"""``check_equivalence``: every method, one verdict.

    check_equivalence(original, candidate, bounds=Bounds(), methods=METHODS) -> VerifyResult

Runs bounded enumeration (shortest differences first), production coverage (a sentence
through every production, both ways), random derivations both ways, and the exact
automaton comparison where both grammars are regular; stops at the first difference. Each method's coverage is in ``stats[method]``.

Soundness. Every counterexample a method reports is re-judged by the two reference
recognizers before it is returned (a method that disagreed with them would be a bug in
``verify``, and raises). So ``ok=False`` always means a real difference; ``ok=True`` means
none was found within the reported bounds, and is a proof only where a method reports
``exact: True``.

Large repetitions that both grammars hold are first checked as letters (``letters``:
Bekić's lemma), so ``x{4,32767}`` costs one symbol, not 32,767 copies and as many helper
rules; a difference found there is re-judged on the grammars themselves, and when it is
not one of theirs the grammars are checked as they are (``stats["letters"]`` says which).

Lark grammars are compared over one shared atom table (terminals are atoms; a rewrite
must not change what an atom means), so both grammars must also agree on the
definitions of the named terminals they both use and on their ``%ignore`` directives;
a disagreement there is reported as a difference without a counterexample string.
"""

from __future__ import annotations

import time

from ..collector import paused
from ..grammar import Grammar
from ..grammar.size import check_size
from .coverage import coverage_check
from .derivations import derivation_check
from .enumeration import enumerate_check
from .letters import Abstraction, abstract, concrete_text
from .reference import Recognizer
from .regular import exact_check
from .result import Bounds, Counterexample, VerifyResult, WorkBudget, WorkBudgetSpent
from .symbols import grammar_atoms, is_lark
from .unchanged import abstract_unchanged

METHODS = {
    "enumeration": enumerate_check,
    "coverage": coverage_check,
    "derivations": derivation_check,
    "exact": exact_check,
}


PROOF = "exact"
"""The method asked first: where it proves the two languages equal (``exact: True``, two
strongly regular grammars: a finite automaton each, every reachable pair of their states
compared) no other method can find a difference, so none runs (the bounded enumeration and
the derivations cost tenths of a second of pure Python on a median JSON schema, the proof
milliseconds). Where it does not prove, the methods run in their order, the proof's result
kept for its turn: the verdict and the difference reported are those of that order. It draws
nothing from the work budget (its bound is ``Bounds.max_dfa_states``)."""


def _proof(a: Recognizer, b: Recognizer, bounds: Bounds, methods):
    """``PROOF``'s (counterexample, stats), or None where it is not among ``methods``."""
    return METHODS[PROOF](a, b, bounds) if PROOF in methods else None


def recognizers(original: Grammar, candidate: Grammar, budget: WorkBudget | None = None,
                letters: tuple = ()) -> tuple[Recognizer, Recognizer]:
    """Reference recognizers of both grammars over one alphabet (bytes and ``letters``, or
    shared atoms), drawing on one work budget."""
    if is_lark(original) != is_lark(candidate):
        raise ValueError("cannot compare a Lark grammar (terminal atoms) with a byte grammar")
    budget = budget or WorkBudget(None)
    if not is_lark(original):
        return (Recognizer(original, budget=budget, letters=letters),
                Recognizer(candidate, budget=budget, letters=letters))
    atoms = tuple(dict.fromkeys((*grammar_atoms(original), *grammar_atoms(candidate))))
    return Recognizer(original, atoms, budget=budget), Recognizer(candidate, atoms, budget=budget)


def check_equivalence(original: Grammar, candidate: Grammar, bounds: Bounds = Bounds(),
                      methods=tuple(METHODS), incremental: bool = False) -> VerifyResult:
    """The verdict of every method in ``methods`` (module docstring). ``incremental``: first
    check only the rules that changed, the unchanged ones as letters (``unchanged``); its
    "same" stands (``stats["unchanged"]``), anything else — a difference, a spent budget —
    is decided by the full check, so a difference is always the full check's. Off by
    default here; the pipeline asks for it (``passes``): the abstraction spends less of the
    work budget than the full check, so a check that would stop at its budget may finish,
    and the pipeline then keeps the optimized output where it kept the input."""
    with paused():  # (gramopt.collector: millions of live sets and items, nothing to collect)
        if incremental:
            res = _unchanged_first(original, candidate, bounds, methods)
            if res is not None:
                return res
        return _check(original, candidate, bounds, methods)


def _unchanged_first(original: Grammar, candidate: Grammar, bounds: Bounds, methods) -> VerifyResult | None:
    """The verdict "same language" of the changed rules alone (``unchanged``), or None when
    that check does not say "same" within its bounds and budget (or does not apply: Lark,
    nothing unchanged, large repetitions among the changed rules, which the full check
    reads as letters)."""
    t0 = time.perf_counter()
    check_size(original)
    check_size(candidate)
    un = abstract_unchanged(original, candidate)
    if un is None:
        return None
    note = {"rules": un.rules, "letters": len(un.letters)}
    budget = WorkBudget(bounds.max_work)
    if un.identical:
        note.update(identical=True, exact=True)  # the start rule's whole sub-grammar is the same
        return _done(VerifyResult(True, None, {"unchanged": note}), None, budget, t0)
    if abstract(un.original, un.candidate) is not None:
        return None
    res = _methods(un.original, un.candidate, bounds, methods, budget, un.letters)
    if not res.ok or res.stats.get("work_spent") or res.stats.get("safety_limit"):
        return None
    res.stats["unchanged"] = note
    return _done(res, None, budget, t0)


def _check(original: Grammar, candidate: Grammar, bounds: Bounds, methods) -> VerifyResult:
    t0 = time.perf_counter()
    if is_lark(original):
        problem = lark_mismatch(original, candidate)
        if problem:
            return VerifyResult(False, None, {"lexer": problem})
    check_size(original)  # one size policy for every command, letters or not (grammar.size)
    check_size(candidate)
    budget = WorkBudget(bounds.max_work)
    ab = abstract(original, candidate)
    note = None
    if ab is not None:
        res = _methods(ab.original, ab.candidate, bounds, methods, budget, ab.letters)
        note = {"repetitions": len(ab.repeats), "items": len(ab.tagged)}
        if res.ok:
            return _done(res, note, budget, t0)
        found = _spelled_back(original, candidate, ab, res.counterexample, budget)
        if found is not None:
            return _done(VerifyResult(False, found, res.stats), note, budget, t0)
        note["inconclusive"] = f"{res.counterexample} (over the letters); checked as written"
    res = _methods(original, candidate, bounds, methods, budget)
    return _done(res, note, budget, t0)


def _done(res: VerifyResult, note: dict | None, budget: WorkBudget, t0: float) -> VerifyResult:
    if note is not None:
        res.stats["letters"] = note
    if res.ok:
        res.stats["work"] = budget.spent
    res.stats["seconds"] = round(time.perf_counter() - t0, 4)
    return res


def _methods(original: Grammar, candidate: Grammar, bounds: Bounds, methods, budget: WorkBudget,
             letters: tuple = ()) -> VerifyResult:
    """Each method in turn on one pair of grammars, until a difference or the budget's end."""
    stats: dict = {}
    try:
        a, b = recognizers(original, candidate, budget, letters)
    except WorkBudgetSpent:  # spent closing the start sets, before any method: the same stop, deterministically
        first = next(iter(methods), "recognizers")
        return VerifyResult(True, None, {first: {"work_spent": True, "exact": False, "bound_met": False},
                                         "work_spent": first})
    try:
        proof = _proof(a, b, bounds, methods)
        if proof is not None and proof[1].get("exact") and proof[0] is None:
            return VerifyResult(True, None, {PROOF: proof[1]})
        for name in methods:
            try:
                cex, stats[name] = proof if name == PROOF and proof is not None else METHODS[name](a, b, bounds)
            except WorkBudgetSpent:  # deterministic: the same grammars stop at the same step
                stats[name] = {"work_spent": True, "exact": False, "bound_met": False}
                stats["work_spent"] = name
                break
            if stats[name].get("safety_limit"):
                stats["safety_limit"] = name  # the verdict is not to be trusted: the caller refuses
            if cex is not None:
                try:
                    return VerifyResult(False, confirm(a, b, cex), stats)
                except WorkBudgetSpent:  # the difference not yet confirmed: a spent budget, not a verdict
                    stats["work_spent"] = name
                    break
    finally:
        a.release()
        b.release()
    return VerifyResult(True, None, stats)


def _spelled_back(original: Grammar, candidate: Grammar, ab: Abstraction, cex: Counterexample,
                  budget: WorkBudget) -> Counterexample | None:
    """``cex`` (over the abstraction's letters) spelled in bytes, when the grammars
    themselves disagree on it; else None (``letters``: not every difference of the
    abstractions is one of the grammars)."""
    data = concrete_text(ab, cex.data)
    if data is None:
        return None
    try:
        a, b = recognizers(original, candidate, budget)
    except WorkBudgetSpent:  # undecided here: the full check meets the spent budget and says so
        return None
    try:
        judge = (lambda r: r.accepts(data)) if cex.kind == "string" else (lambda r: r.is_viable_prefix(data))
        verdict = (judge(a), judge(b))
    except WorkBudgetSpent:
        return None
    finally:
        a.release()
        b.release()
    if verdict[0] == verdict[1]:
        return None
    return Counterexample(data, cex.kind, verdict[0], verdict[1], cex.method)


def confirm(a: Recognizer, b: Recognizer, cex: Counterexample) -> Counterexample:
    """``cex`` after re-judging it with the reference recognizers (raises if it is wrong)."""
    judge = (lambda r: r.accepts(cex.data)) if cex.kind == "string" else \
        (lambda r: r.is_viable_prefix(cex.data))
    verdict = (judge(a), judge(b))
    if verdict != (cex.in_original, cex.in_candidate) or verdict[0] == verdict[1]:
        raise AssertionError(f"verify: {cex.method} reported {cex!r} but the recognizers say {verdict}")
    return cex


def lark_mismatch(original: Grammar, candidate: Grammar) -> str | None:
    """Why the two Lark grammars' atoms could mean different things, or None."""
    ignores = [sorted(a for d in g.directives if d.name == "ignore" for a in d.args)
               for g in (original, candidate)]
    if ignores[0] != ignores[1]:
        return f"%ignore differs: {ignores[0]} vs {ignores[1]}"
    defs = [{t.name: (t.body, t.flags, t.priority) for t in g.terminals} for g in (original, candidate)]
    for name in sorted(defs[0].keys() & defs[1].keys()):
        if defs[0][name] != defs[1][name]:
            return f"terminal {name} is defined differently"
    return None
