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

Lark grammars are compared over one shared atom table (terminals are atoms; a rewrite
must not change what an atom means), so both grammars must also agree on the
definitions of the named terminals they both use and on their ``%ignore`` directives;
a disagreement there is reported as a difference without a counterexample string.
"""

from __future__ import annotations

import time

from ..collector import paused
from ..grammar import Grammar
from .coverage import coverage_check
from .derivations import derivation_check
from .enumeration import enumerate_check
from .reference import Recognizer
from .regular import exact_check
from .result import Bounds, Counterexample, VerifyResult, WorkBudget, WorkBudgetSpent
from .symbols import grammar_atoms, is_lark

METHODS = {
    "enumeration": enumerate_check,
    "coverage": coverage_check,
    "derivations": derivation_check,
    "exact": exact_check,
}


def recognizers(original: Grammar, candidate: Grammar,
                budget: WorkBudget | None = None) -> tuple[Recognizer, Recognizer]:
    """Reference recognizers of both grammars over one alphabet (bytes, or shared atoms),
    drawing on one work budget."""
    if is_lark(original) != is_lark(candidate):
        raise ValueError("cannot compare a Lark grammar (terminal atoms) with a byte grammar")
    budget = budget or WorkBudget(None)
    if not is_lark(original):
        return Recognizer(original, budget=budget), Recognizer(candidate, budget=budget)
    atoms = tuple(dict.fromkeys((*grammar_atoms(original), *grammar_atoms(candidate))))
    return Recognizer(original, atoms, budget=budget), Recognizer(candidate, atoms, budget=budget)


def check_equivalence(original: Grammar, candidate: Grammar, bounds: Bounds = Bounds(),
                      methods=tuple(METHODS)) -> VerifyResult:
    with paused():  # (gramopt.collector: millions of live sets and items, nothing to collect)
        return _check(original, candidate, bounds, methods)


def _check(original: Grammar, candidate: Grammar, bounds: Bounds, methods) -> VerifyResult:
    t0 = time.perf_counter()
    stats: dict = {}
    if is_lark(original):
        problem = lark_mismatch(original, candidate)
        if problem:
            stats["lexer"] = problem
            return VerifyResult(False, None, stats)
    budget = WorkBudget(bounds.max_work)
    a, b = recognizers(original, candidate, budget)
    try:
        for name in methods:
            try:
                cex, stats[name] = METHODS[name](a, b, bounds)
            except WorkBudgetSpent:  # deterministic: the same grammars stop at the same step
                stats[name] = {"work_spent": True, "exact": False, "bound_met": False}
                stats["work_spent"] = name
                break
            if stats[name].get("safety_limit"):
                stats["safety_limit"] = name  # the verdict is not to be trusted: the caller refuses
            if cex is not None:
                stats["seconds"] = round(time.perf_counter() - t0, 4)
                return VerifyResult(False, confirm(a, b, cex), stats)
    finally:
        a.release()
        b.release()
    stats["work"] = budget.spent
    stats["seconds"] = round(time.perf_counter() - t0, 4)
    return VerifyResult(True, None, stats)


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
