"""Per-engine prediction of the mask-time ratio of two forms of one language, fitted on measured pairs.

    features(grammar) -> {name: count}             linear in the grammar's size (reachable rules only)
    DecisionModel.load(engine, named=None)          the shipped ``models/decision-ENGINE.json`` or a file named
    model.log_ratio(reference, candidate) -> float  predicted log(p95 time of candidate / of reference)
    model.supports(reference, candidate) -> bool   whether the pair lies within the data it was fitted on
    fit(engine, pairs, ridge) -> DecisionModel      least squares on feature differences (no intercept)
    models_digest()                                 sha256 of the shipped decision models' bytes (cache key)

The model is antisymmetric by construction: a pair's inputs are the differences
``φ(candidate) − φ(reference)`` with ``φ(x) = log(1 + count)`` per feature, and there is no
intercept, so equal forms are predicted equal and swapping a pair flips the sign. Weights are
fitted per engine on (form, form) pairs of JSONSchemaBench schemas measured in that engine
(``benchmarks/cost_pairs.py``: per-mask p95, interleaved, minimum of repeats), target
``log(p95 candidate / p95 reference)``; ``benchmarks/fit_cost_model.py`` fits on the schemas of
one hash half and reports the accuracy on the other. The files store weights rounded to six
significant digits and carry the sha256 of the data they were fitted on, so the same data gives
the same bytes; ``source()`` names a model with the sha256 of its file (report, cache key).

Data support: a model fitted on JSON-schema forms knows nothing of a direction no pair took (G4's
``S ::= S S | "a" | "b"`` as ``[ab]*``: fewer recursions came only with xgrammar's lookahead in
the data, and the xgrammar model called the star 6.7x slower). A model keeps the ridge inverse
of its pairs' Gram matrix over *every* feature; a pair whose leverage ``x' (X'X + λI)^-1 x`` is
more than ``SUPPORT_MARGIN`` times the largest leverage among the pairs fitted on lies outside
the data, and its prediction is not used (``supports``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass

from ..grammar import Alt, CharClass, Grammar, Literal, Ref, Repeat, walk
from ..grammar.analysis import nullable_rules, reachable_rules, recursive_references, recursive_rules, structure

SUPPORT_MARGIN = 2.0
MODELS_DIR = os.path.join(os.path.dirname(__file__), "models")
ENGINES = ("xgrammar", "llguidance", "llama.cpp")
FEATURES = ("kappa", "rules", "alternatives", "max_alternatives", "atoms", "references", "shared_rules",
            "star_groups", "class_plus", "bounded_repeats", "nullable_rules", "nullable_refs", "lookaheads",
            "lookahead_recursions", "recursions", "left_recursions", "leaf_rules")


def features(g: Grammar) -> dict:
    """Counts over the rules the start reaches, each computed in one walk of the rules (plus the
    linear analyses it calls): κ and rule count; ``alternatives`` (top-level, all rules) and the
    widest rule's (llama.cpp keeps one stack per alternative); ``atoms`` (literals and classes)
    and ``references``; ``shared_rules`` (referenced from two places or more); ``star_groups``
    (unbounded repeats of a group or rule), ``class_plus`` (of a class or one character),
    ``bounded_repeats`` (``x{m,n}``); nullable rules and references to them; rules with an
    xgrammar lookahead and those of them that are recursive; recursive references; left
    recursive rules; ``leaf_rules`` (bodies without references: llguidance's lexemes)."""
    from .kappa import kappa
    keep = set(reachable_rules(g))
    part = g if len(keep) == len(g.rules) else g.replace_rules([r for r in g.rules if r.name in keep])
    nullable = nullable_rules(part)
    s = structure(part)
    recursive = recursive_rules(part)
    f = dict.fromkeys(FEATURES, 0)
    f["kappa"], f["rules"] = kappa(part), len(part.rules)
    uses: dict = {}
    for r in part.rules:
        alts = len(r.body.items) if isinstance(r.body, Alt) else 1
        f["alternatives"] += alts
        f["max_alternatives"] = max(f["max_alternatives"], alts)
        f["lookaheads"] += r.lookahead is not None
        has_ref = False
        for node in walk(r.body):
            if isinstance(node, Ref):
                has_ref = True
                f["references"] += 1
                uses[node.name] = uses.get(node.name, 0) + 1
                f["nullable_refs"] += node.name in nullable
            elif isinstance(node, (Literal, CharClass)):
                f["atoms"] += 1
            elif isinstance(node, Repeat):
                if node.max is None:
                    single = isinstance(node.item, CharClass) or (isinstance(node.item, Literal)
                                                                  and len(node.item.text) == 1)
                    if single:
                        f["class_plus"] += node.min >= 1
                    elif not isinstance(node.item, Literal):
                        f["star_groups"] += 1
                elif node.max > max(node.min, 1):
                    f["bounded_repeats"] += 1
        f["leaf_rules"] += not has_ref
        f["lookahead_recursions"] += r.lookahead is not None and r.name in recursive
    f["shared_rules"] = sum(1 for n in uses.values() if n > 1)
    f["nullable_rules"] = len(nullable)
    f["recursions"] = recursive_references(part)
    f["left_recursions"] = len(s.left_recursive)
    return f


def _phi(f: dict) -> list[float]:
    return [math.log1p(f[k]) for k in FEATURES]


def difference(reference: dict, candidate: dict) -> list[float]:
    """The model's inputs for a pair: φ(candidate) − φ(reference), in ``FEATURES`` order."""
    return [b - a for a, b in zip(_phi(reference), _phi(candidate))]


@dataclass(frozen=True)
class DecisionModel:
    """One engine's weights on the feature differences, and where they came from."""

    engine: str
    weights: dict
    fitted_on: dict
    source: str = ""
    noise: float = 1.0  # the upper quartile of the A/A p95 ratio (max(x, 1/x)) in the data fitted on
    # {"inverse": (X'X + λI)^-1 over every feature, "max_leverage": the largest among the pairs}
    support: dict | None = None

    def supports(self, reference: Grammar | dict, candidate: Grammar | dict) -> bool:
        """Whether the pair's leverage is within ``SUPPORT_MARGIN`` × the largest of the pairs the
        model was fitted on (module docstring); a model without support data supports every pair."""
        if not self.support:
            return True
        a = reference if isinstance(reference, dict) else features(reference)
        b = candidate if isinstance(candidate, dict) else features(candidate)
        x = difference(a, b)
        inv = self.support["inverse"]
        lev = sum(x[i] * inv[i][j] * x[j] for i in range(len(x)) for j in range(len(x)) if x[i] and x[j])
        return lev <= SUPPORT_MARGIN * self.support["max_leverage"]

    def log_ratio(self, reference: Grammar | dict, candidate: Grammar | dict) -> float:
        """Predicted log(p95 mask time of ``candidate`` / of ``reference``): < 0 means faster."""
        a = reference if isinstance(reference, dict) else features(reference)
        b = candidate if isinstance(candidate, dict) else features(candidate)
        return sum(self.weights.get(k, 0.0) * d for k, d in zip(FEATURES, difference(a, b)))

    def to_json(self) -> str:
        body = {"engine": self.engine, "predicts": "log(p95 candidate / p95 reference) per mask",
                "inputs": "log1p(count) of candidate minus reference, per feature; no intercept",
                "features": list(FEATURES), "weights": {k: _round(self.weights.get(k, 0.0)) for k in FEATURES},
                "fitted_on": self.fitted_on, "noise": _round(self.noise)}
        if self.support:
            body["support"] = {"inverse": [[_round(v) if abs(v) > 1e-9 else 0.0 for v in row]
                                           for row in self.support["inverse"]],
                               "max_leverage": _round(self.support["max_leverage"])}
        return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def load(cls, engine: str, named: str | None = None) -> "DecisionModel":
        """``engine``'s decision model: the file ``named`` (or ``decision-ENGINE.json`` in the folder
        named), else the shipped one; OSError when there is none."""
        path = named or os.path.join(MODELS_DIR, f"decision-{engine}.json")
        if os.path.isdir(path):
            path = os.path.join(path, f"decision-{engine}.json")
        key = (engine, os.path.abspath(path))
        if key not in _CACHE:
            with open(path, "rb") as fh:
                raw = fh.read()
            d = json.loads(raw)
            where = f"shipped decision-{engine}.json" if named is None else path
            _CACHE[key] = cls(d["engine"], dict(d["weights"]), d.get("fitted_on", {}),
                              f"{where} (sha256 {hashlib.sha256(raw).hexdigest()[:16]})", d.get("noise", 1.0),
                              d.get("support"))
        return _CACHE[key]


_CACHE: dict = {}


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def fit(engine: str, pairs: list[tuple[dict, dict, float]], ridge: float = 1.0, fitted_on: dict | None = None,
        weight=None, using: tuple[str, ...] = FEATURES, noise: float = 1.0) -> DecisionModel:
    """Ridge least squares of the measured log ratio on the feature differences, no intercept.
    ``pairs``: (reference features, candidate features, log(p95 candidate / p95 reference));
    ``weight``: optional per-pair weights; ``using``: the features fitted (the others weigh 0).
    Deterministic for the same pairs in the same order."""
    import numpy as np
    cols = [FEATURES.index(k) for k in using]
    X = np.array([difference(a, b) for a, b, _ in pairs], dtype=float).reshape(len(pairs), len(FEATURES))[:, cols]
    y = np.array([r for *_, r in pairs], dtype=float)
    w = np.ones(len(pairs)) if weight is None else np.asarray(weight, dtype=float)
    sw = np.sqrt(w)[:, None]
    A = (X * sw).T @ (X * sw) + ridge * np.eye(len(cols))
    coef = dict(zip(using, np.linalg.solve(A, (X * sw).T @ (y * sw[:, 0])))) if cols else {}
    full = np.array([difference(a, b) for a, b, _ in pairs], dtype=float).reshape(len(pairs), len(FEATURES))
    inverse = np.linalg.inv(full.T @ full + ridge * np.eye(len(FEATURES)))
    leverage = float(np.max(np.einsum("ij,jk,ik->i", full, inverse, full))) if len(pairs) else 0.0
    return DecisionModel(engine, {k: _round(float(coef.get(k, 0.0))) for k in FEATURES}, dict(fitted_on or {}),
                         noise=noise, support={"inverse": inverse.tolist(), "max_leverage": leverage})


def models_digest(named: str | None = None) -> str:
    """The sha256 (16 hex) of every engine's decision model file, shipped or in the folder
    ``named``: what the batch cache key carries."""
    h = hashlib.sha256()
    for e in ENGINES:
        try:
            h.update(DecisionModel.load(e, named).source.encode())
        except OSError:
            h.update(f"{e}: none".encode())
    return h.hexdigest()[:16]


__all__ = ["MODELS_DIR", "ENGINES", "FEATURES", "SUPPORT_MARGIN", "DecisionModel", "difference", "features", "fit", "models_digest"]
