"""The cost decisions of the targets: keep a candidate only where no engine the target claims
gets slower.

    GUARD            the default target's: ``PredictedGuard`` over every engine, against the
                     input without its redundancy
    PredictedGuard(engines, baseline=None).worse(original, candidate, models=None) -> str | None
    NoSlowerGuard(engines, strict=False, baseline=None, clear=False).worse(...)    static shape counts
    llamacpp_guard   llama.cpp alone, strict, against the input with the fix-ups (llama.cpp target)

Engines prefer different forms of one language (xgrammar decides a right-recursive "text
until" rule with a lookahead in its mask cache, llguidance runs the same part as a star in its
lexer; a whitespace class pulled out into one shared nullable rule made xgrammar 1.4–3.4× slower
at p95 on JSONSchemaBench schemas, no other engine), so no single rewrite is faster everywhere.

The default target's decision (``PredictedGuard``) is a measured prediction: per engine, a
model fitted on (form, form) pairs of JSONSchemaBench schemas timed in that engine
(``costmodels.predict``; ``benchmarks/cost_pairs.py`` measures, ``benchmarks/fit_cost_model.py``
fits on one hash half and reports accuracy on the other) predicts the p95 mask-time ratio of
the candidate to the reference. The candidate is kept when no engine is predicted slower than
its noise (``SLOWER``×, or the engine's A/A noise where larger) and at least one is predicted
faster; else the pass manager tries its fallbacks
(``passes._fallbacks``), each judged the same way, down to the reference itself. The static
shape-count guard it replaces picked the faster form on 7 of 33 measured eval pairs in
xgrammar, the model 33 of 33 (``benchmarks/results/cost-model-2026-11-27``).

The reference is the input *without its redundancy* (``without_redundancy``: pass-through and
duplicated rules merged, split literals fused, unreachable rules dropped, then the fix-ups) —
also what the target keeps when the candidate is rejected (``Target.reduce``). Removing
redundancy is never judged: it adds no state, no step and no shape an engine pays for; judging
it against the raw input rejected it for "shape" counts that the redundancy itself had hidden,
and 25 of 34 obfuscated corpus grammars came back with more rules than their clean form.

The llama.cpp target keeps its static guard (``llamacpp_guard``): its extractor and guard read
one calibrated model, the one ``--cost-model`` names. Both are deterministic (counts of the
grammar and model files, no timing); the decision models are named with their sha256 in the
"guard" report and in the batch cache key (``costmodels.predict.models_digest``).
"""

from __future__ import annotations

import math
import os
from typing import Callable

from ..costmodels.calibration import engine_node_weights
from ..costmodels.engine_shapes import (CLEAR_GAIN, ENGINE_SHAPES, LOWERED_STAR_ENGINES, UNBOUNDED_ENGINES,
                                        clearly_better_for, engine_costs, lowered_repetitions, unbounded_rules, worse_for)
from ..costmodels.predict import ENGINES, DecisionModel, features
from ..formats import dialect_record, engine_reads
from ..grammar import Grammar
from ..transforms.reshape.derived_lookaheads import keep_derived_lookaheads
from .portable import fixup as portable_fixup, reduce as portable_reduce

# a candidate predicted slower than this in any engine is not kept: the A/A noise of one p95 on
# a shared machine, and the floor (0.9× = 1.11× the time)
SLOWER = 1.1


class NoSlowerGuard:
    """``worse``: the first components where the candidate costs one of ``engines`` more than
    the reference, as one line (None when it costs none of them more). The reference is
    ``baseline(original)`` (default: the original itself)."""

    def __init__(self, engines: tuple[str, ...] = tuple(ENGINE_SHAPES), strict: bool = False,
                 baseline: Callable[[Grammar], Grammar] | None = None, against: str = "the input",
                 name: str = "no-slower", clear: bool = False):
        self.engines, self.strict, self.baseline, self.against, self.name = engines, strict, baseline, against, name
        self.clear = clear
        engine = "no engine's" if len(engines) > 1 else f"no {engines[0]}"
        self._accepted = (("clearly faster, " if clear else "") + f"{engine} static cost grows"
                          + (f" and its model cost is below {against}'s (or it is {against})" if strict else ""))

    def accepted(self, original: Grammar) -> str:
        return self._accepted

    def weights(self, models: dict | None = None) -> dict:
        """Each engine's node weights: from the model ``models`` names for it (the one the
        user named for the target's calibrated engine, which the extractor read too), else
        the shipped one, else None (generic)."""
        out = {}
        for e in self.engines:
            named = (models or {}).get(e)
            try:
                out[e] = engine_node_weights(e, named).weights
            except OSError:
                if named is not None:
                    raise
                out[e] = None  # no shipped model for this engine: generic weights
        return out

    def worse(self, original: Grammar, candidate: Grammar, models: dict | None = None) -> str | None:
        ref = self.baseline(original) if self.baseline is not None else original
        if candidate == ref:
            return None
        w = self.weights(models)
        before, after = engine_costs(ref, w), engine_costs(candidate, w)
        grew = [g for g in worse_for(before, after) if g[0] in self.engines]
        if not grew and self.strict:
            grew = [(e, "cost model not lower", before[e].cost, after[e].cost) for e in self.engines
                    if not after[e].cost < before[e].cost - 1e-9]
        if grew:
            shown = [f"{e} {what} {_num(b)}→{_num(a)}" for e, what, b, a in grew[:4]]
            return (f"costs more than {self.against}: " + ", ".join(shown)
                    + (f" (+{len(grew) - 4} more)" if len(grew) > 4 else ""))
        if self.clear and not self._clearly_better(ref, candidate, before, after):
            cut = min(after[e].cost / before[e].cost for e in self.engines if before[e].cost > 0)
            return (f"not clearly faster than {self.against}: no engine's model cost ≤ {CLEAR_GAIN:g}× "
                    f"{self.against}'s (best {cut:.2f}×) and no slow shape fewer")
        return None

    def _clearly_better(self, ref: Grammar, candidate: Grammar, before: dict, after: dict) -> bool:
        if any(e in self.engines for e, *_ in clearly_better_for(before, after)):
            return True
        same = all(before[e] == after[e] for e in self.engines)
        return same and len(candidate.rules) < len(ref.rules)


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def without_redundancy(g: Grammar) -> Grammar:
    """The portable target's reference form: ``g`` without its redundancy (pass-through and
    duplicated rules, split literals, unreachable rules: ``portable.reduce``), with the
    target's fix-ups, and with the lookaheads xgrammar derives for ``g``'s rules kept
    (``keep_derived_lookaheads``) — what it keeps when an output is rejected."""
    reduced = portable_fixup(portable_reduce(g))
    if reduced == g:
        return reduced
    return keep_derived_lookaheads(g, reduced, dialect_record(reduced.dialect).name_separator)[0]


class PredictedGuard:
    """The default target's cost decision: ``worse`` is None (keep the candidate) when no engine
    of ``engines`` is predicted slower than its noise (``SLOWER``×, or the engine's A/A noise
    in its model's data where larger: llguidance's p95 is the noisiest), else one line saying
    which engine and by how much. A candidate predicted within noise everywhere is kept: the
    passes made it smaller (κ, rules), and removing redundancy is the optimizer's job when no
    engine it targets gets slower (issue 23, item 4). A pair outside the data an engine's model
    was fitted on (``DecisionModel.supports``) gets no prediction there: it vetoes nothing. Where
    the candidate has more repetitions that xgrammar lowers into helper rules ending inside
    nearly every token (``_lowered_stars``) it is slower there whatever the model says (500×
    inside a string, a shape no pair it was fitted on had). The reference is
    ``baseline(original)``; the predictions are each engine's decision model
    (``costmodels.predict``: fitted on measured JSONSchemaBench pairs; ``models`` may name a
    folder of ``decision-ENGINE.json`` in place of the shipped ones). A candidate that is the
    reference is kept as it is. An engine gramopt cannot hand the input to at all (xgrammar and
    llama.cpp: a Lark grammar with a lexer of its own, ``formats.engine_reads``) is not asked:
    it will not run the output either."""

    def __init__(self, engines: tuple[str, ...] = ENGINES, baseline: Callable[[Grammar], Grammar] | None = None,
                 against: str = "the input", name: str = "no-slower"):
        self.engines, self.baseline, self.against, self.name = engines, baseline, against, name

    def models(self, models: dict | None = None) -> dict:
        """engine -> its decision model (the one in the folder ``models`` names for it, else shipped)."""
        return {e: DecisionModel.load(e, (models or {}).get(e) if _is_decision_dir((models or {}).get(e)) else None)
                for e in self.engines}

    def asked(self, original: Grammar) -> list[str]:
        """The engines priced for ``original``: those gramopt can hand it to
        (``formats.engine_reads``); none else gets the output."""
        return [e for e in self.engines if engine_reads(e, original)]

    def accepted(self, original: Grammar) -> str:
        """The note of a kept candidate: the decision models of the engines ``worse`` asks."""
        ms = self.models()
        named = ", ".join(ms[e].source for e in self.asked(original))
        return (f"predicted slower than its noise (≥ {SLOWER:g}×) in no engine, against {self.against} "
                f"(decision models: {named or 'none: no engine it prices reads the input'})")

    def predictions(self, original: Grammar, candidate: Grammar, models: dict | None = None) -> dict:
        """engine -> predicted p95 ratio candidate / reference (< 1: faster)."""
        ref = self.baseline(original) if self.baseline is not None else original
        return _ratios(self.models(models), features(ref), features(candidate))

    def worse(self, original: Grammar, candidate: Grammar, models: dict | None = None) -> str | None:
        ref = self.baseline(original) if self.baseline is not None else original
        engines = self.asked(original)
        if candidate == ref or not engines:
            return None
        ms, a, b = self.models(models), features(ref), features(candidate)
        pred = _ratios(ms, a, b)
        known = {e for e, m in ms.items() if m.supports(a, b)}  # outside its data: no prediction
        unbounded = _unbounded_in(ref, candidate)
        lowered = _lowered_stars(ref, candidate)
        known -= unbounded | lowered
        noise = {e: max(SLOWER, m.noise) for e, m in ms.items()}
        slower = ([e for e in engines if e in known and pred[e] > noise[e]]
                  + sorted(lowered & set(engines)))
        shown = ", ".join(f"{e} {pred[e]:.2f}×" if e in known else
                          f"{e}: the reference's self-concatenation is unbounded there" if e in unbounded else
                          f"{e}: more repetitions it lowers into helper rules ending inside nearly every token"
                          if e in lowered else
                          f"{e} outside its model's data" for e in engines)
        if slower:
            return f"predicted slower than {self.against} in {', '.join(slower)} ({shown})"
        return None


def _unbounded_in(reference: Grammar, candidate: Grammar) -> set[str]:
    """The engines where ``reference``'s mask time has no bound that ``candidate``'s keeps
    (``costmodels.engine_shapes.unbounded_rules``: xgrammar on a self-concatenation, masks that
    grow with every byte read; llguidance on an endless lexeme, a mask that may never return).
    No model fitted on features prices that, and no candidate without such a rule is slower
    there."""
    return {e for e in UNBOUNDED_ENGINES
            if unbounded_rules(reference, e) and not unbounded_rules(candidate, e)}


def _lowered_stars(reference: Grammar, candidate: Grammar) -> set[str]:
    """The engines where ``candidate`` has more of the repetitions they lower into helper rules
    ending inside nearly every token than ``reference`` (``costmodels.engine_shapes.
    lowered_repetitions``: the stars of ``lowered_stars``, ~500× the mask time in xgrammar inside
    a string, and the counted repetitions of a group, ~3,000×; no model fitted on the EBNF forms
    saw one). Fewer is left to the model: the count also takes in ``digit*`` with
    ``digit ::= [0-9]``, which Qwen's one-digit tokens rarely cross (the first version let
    xgrammar's model off there and changed 4 of 27 decisions on JSONSchemaBench)."""
    if len(lowered_repetitions(candidate)) > len(lowered_repetitions(reference)):
        return set(LOWERED_STAR_ENGINES)
    return set()


def _ratios(models: dict, reference: dict, candidate: dict) -> dict:
    """engine -> predicted p95 ratio of the candidate's features to the reference's."""
    return {e: math.exp(m.log_ratio(reference, candidate)) for e, m in models.items()}


def _is_decision_dir(path: str | None) -> bool:
    return bool(path) and os.path.isdir(path) and any(f.startswith("decision-") for f in os.listdir(path))


GUARD = PredictedGuard(baseline=without_redundancy, against="the input without its redundancy")


def llamacpp_guard(fixed_up: Callable[[Grammar], Grammar]) -> NoSlowerGuard:
    """The llama.cpp target's guard. What moves llama.cpp's mask time is the form's parse
    stacks and the order it tries them (``benchmarks/llamacpp_profile.py``): the order is the
    target's fix-up, which applies to any form; so the e-graph's output is kept only where
    llama.cpp's model prices it lower than the input with the same fix-ups (``fixed_up``),
    the form written otherwise."""
    return NoSlowerGuard(("llama.cpp",), strict=True, baseline=fixed_up,
                         against="the fixed-up input", name="llama.cpp-cost")


__all__ = ["GUARD", "SLOWER", "NoSlowerGuard", "PredictedGuard", "llamacpp_guard"]
