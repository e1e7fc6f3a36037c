"""Fit the per-engine decision models on one half of the measured forms, report accuracy on the other.

    python benchmarks/fit_cost_model.py benchmarks/results/cost-model-2026-11-27/*/forms.jsonl
    python benchmarks/fit_cost_model.py FILES --write      # also write gramopt/costmodels/models/decision-*.json
    python benchmarks/fit_cost_model.py FILES --models DIR # evaluate the models in DIR (or the shipped ones)

Rows come from ``benchmarks/cost_pairs.py`` (JSONSchemaBench schemas, both converters' forms; each
row has its half, ``split``: sha256 of the schema's name). A *pair* is two forms of one row measured
in one engine: the earlier form in the row's order is the reference (the input first, then the
candidate, reduced, ...), the measured ratio ``log(p95 later / p95 reference)``. The models
(``gramopt.costmodels.predict``) are fitted on the pairs of the "fit" half only, ratios clipped to
±``CLIP``.

Accuracy per engine, on the "eval" half: over the pairs whose measured p95 ratio is outside
[1/1.2, 1.2], the share where the predicted faster form is the measured faster one — for the new
model and, beside it, for the shape-count guard it replaces (``engine_shapes.worse_for`` restricted
to the engine: "not slower" when no component grew). "decision pairs" are those the default
target's guard decides: reference = the input or the reduced form, other = the candidate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys

BAND = math.log(1.2)
CLIP = 4.0
ENGINES = ("xgrammar", "llguidance", "llama.cpp")
DECISION = {("input", "candidate"), ("reduced", "candidate")}


def load_rows(paths: list[str]) -> tuple[list[dict], str]:
    """The rows of every file (sorted by schema, converter: order-independent), and the sha256
    of their canonical JSON (what a model was fitted on)."""
    rows = [json.loads(x) for p in paths for x in open(p, encoding="utf-8") if x.strip()]
    rows = sorted((r for r in rows if "engines" in r), key=lambda r: (r["schema"], r["converter"]))
    h = hashlib.sha256("".join(json.dumps(r, sort_keys=True) for r in rows).encode()).hexdigest()
    return rows, h


def pairs_of(rows: list[dict], engine: str, feats: dict) -> list[dict]:
    """Every (reference, other) pair of forms timed in ``engine``, per row."""
    out = []
    for r in rows:
        m = r["engines"].get(engine, {})
        timed = [f["label"] for f in r["forms"] if "p95" in m.get("forms", {}).get(f["label"], {})]
        aa = m.get("aa", {}).get("p95")
        for i, a in enumerate(timed):
            for b in timed[i + 1:]:
                ta, tb = m["forms"][a]["p95"], m["forms"][b]["p95"]
                if ta <= 0 or tb <= 0:
                    continue
                out.append({"schema": r["schema"], "converter": r["converter"], "split": r["split"], "ref": a,
                            "other": b, "fa": feats[(r["schema"], r["converter"], a)],
                            "fb": feats[(r["schema"], r["converter"], b)], "y": math.log(tb / ta),
                            "aa": math.log(m["forms"]["input"]["p95"] / aa) if aa else 0.0})
    return out


def old_guard_not_slower(engine: str, ga, gb) -> bool:
    from gramopt.costmodels.calibration import engine_node_weights
    from gramopt.costmodels.engine_shapes import engine_costs, worse_for
    try:
        w = {engine: engine_node_weights(engine).weights}
    except OSError:
        w = {}
    return not [g for g in worse_for(engine_costs(ga, w), engine_costs(gb, w)) if g[0] == engine]


GAIN = 0.95  # a feature joins only if it cuts the cross-validated error by 5%
RIDGES = (0.3, 1.0, 3.0, 10.0, 30.0)


def aa_noise(rows: list[dict], engine: str) -> float:
    """The upper quartile, over the fit half's rows, of the A/A p95 ratio max(x, 1/x) in ``engine``:
    the engine's noise (what the guard does not count as slower)."""
    import numpy as np
    xs = [abs(math.log(r["engines"][engine]["forms"]["input"]["p95"] / r["engines"][engine]["aa"]["p95"]))
          for r in rows if r["split"] == "fit" and "aa" in r["engines"].get(engine, {})]
    return float(math.exp(np.percentile(xs, 75))) if xs else 1.0


def _folds(ps: list[dict]) -> list[list[dict]]:
    return [[p for p in ps if hashlib.sha256(p["schema"].encode()).digest()[1] % 2 == k] for k in (0, 1)]


def cv_error(engine: str, fit_ps: list[dict], ridge: float, using: tuple) -> float:
    """Two-fold (by schema hash) mean squared error of the clipped log ratio on the fit half."""
    from gramopt.costmodels import predict
    err, n = 0.0, 0
    folds = _folds(fit_ps)
    for k in (0, 1):
        train, test = folds[k], folds[1 - k]
        if not train or not test:
            continue
        m = predict.fit(engine, [(p["fa"], p["fb"], _clip(p["y"])) for p in train], ridge, using=using)
        err += sum((m.log_ratio(p["fa"], p["fb"]) - _clip(p["y"])) ** 2 for p in test)
        n += len(test)
    return err / n if n else 0.0


def _clip(y: float) -> float:
    return max(-CLIP, min(CLIP, y))


def choose(engine: str, fit_ps: list[dict]) -> tuple[float, tuple]:
    """(ridge, features): forward selection of features by two-fold cross-validated squared error
    on the fit half (a feature joins only if it lowers the error by ``1 - GAIN``), then the ridge of
    ``RIDGES`` with the lowest error (ties: the larger). Deterministic."""
    from gramopt.costmodels.predict import FEATURES
    using: tuple = ()
    best = cv_error(engine, fit_ps, 1.0, using)
    while True:
        trials = [(cv_error(engine, fit_ps, 1.0, using + (f,)), i, f) for i, f in enumerate(FEATURES) if f not in using]
        if not trials:
            break
        err, _, f = min(trials)
        if err >= best * GAIN:
            break
        best, using = err, using + (f,)
    ridge = min((cv_error(engine, fit_ps, r, using), -r) for r in RIDGES)[1] * -1
    return ridge, tuple(f for f in FEATURES if f in using)


def decision_outcome(rows: list[dict], engine: str, feats: dict, models: dict) -> list[float]:
    """Per eval row timed in ``engine``: p95 of the input / p95 of what the default target's
    decision keeps (candidate, else the no-e-graph form, else the reduced form; each judged
    against the reduced form, as ``targets.guard.GUARD``)."""
    from gramopt.targets.guard import SLOWER
    out = []
    for r in rows:
        m = r["engines"].get(engine, {}).get("forms", {})
        if "p95" not in m.get("input", {}):
            continue
        labels = [f["label"] for f in r["forms"]]
        ref = "reduced" if "reduced" in labels else "input"
        fr = feats[(r["schema"], r["converter"], ref)]

        def keeps(label):
            pred = [math.exp(models[e].log_ratio(fr, feats[(r["schema"], r["converter"], label)])) for e in models]
            slow = [math.exp(models[e].log_ratio(fr, feats[(r["schema"], r["converter"], label)]))
                    > max(SLOWER, models[e].noise) for e in models]
            return not any(slow) and min(pred) < 1.0
        chosen = next((lb for lb in ("candidate", "no-egraph") if lb in labels and keeps(lb)), ref)
        if "p95" in m.get(chosen, {}):
            out.append(m["input"]["p95"] / m[chosen]["p95"])
    return out


def accuracy(ps: list[dict], predict) -> tuple[int, int]:
    """(right, decided): pairs outside the band where predict(pair) < 0 iff the other is faster."""
    decided = [p for p in ps if abs(p["y"]) > BAND]
    return sum(1 for p in decided if (predict(p) < 0) == (p["y"] < 0)), len(decided)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--write", action="store_true", help="write the fitted models into the package")
    ap.add_argument("--models", default="", help="evaluate these models (a folder; 'shipped': the package's)")
    ap.add_argument("--out", default="", help="write the table here too")
    ap.add_argument("--all-unseen", action="store_true",
                    help="with --models: every row is evaluated (rows the models were not fitted on, of either half)")
    a = ap.parse_args(argv)
    from gramopt.costmodels import predict
    from gramopt.formats import parse
    rows, digest = load_rows(a.files)
    grammars, feats = {}, {}
    for r in rows:
        for f in r["forms"]:
            g = parse(f["text"], f["dialect"])
            grammars[(r["schema"], r["converter"], f["label"])] = g
            feats[(r["schema"], r["converter"], f["label"])] = predict.features(g)
    lines = [f"Rows: {len(rows)} (schema × converter) from {', '.join(a.files)}; data sha256 {digest[:16]}; "
             f"fit half {sum(r['split'] == 'fit' for r in rows)} rows, eval half "
             f"{sum(r['split'] == 'eval' for r in rows)} rows.", "",
             "| engine | model | eval pairs | outside ±20% | right (model) | accuracy (model) | right (shape guard) | "
             "accuracy (shape guard) | decision pairs outside ±20% | model | shape guard |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    models, decision_pairs = {}, {}
    for e in ENGINES:
        ps = pairs_of(rows, e, feats)
        fit_ps = [p for p in ps if p["split"] == "fit"]
        ev = [p for p in ps if p["split"] == "eval" or (a.models and a.all_unseen)]
        if a.models:
            m = predict.DecisionModel.load(e, None if a.models == "shipped" else a.models)
        else:
            ridge, using = choose(e, fit_ps)
            m = predict.fit(e, [(p["fa"], p["fb"], _clip(p["y"])) for p in fit_ps], ridge,
                            {"data_sha256": digest, "pairs": len(fit_ps), "half": "fit", "ridge": ridge,
                             "selected": list(using),
                             "data": "JSONSchemaBench sample, benchmarks/results/cost-model-2026-11-27",
                             "clip": CLIP}, using=using, noise=aa_noise(rows, e))
            if a.write:
                with open(os.path.join(predict.MODELS_DIR, f"decision-{e}.json"), "w", encoding="utf-8") as fh:
                    fh.write(m.to_json())
        models[e] = m
        new = lambda p: m.log_ratio(p["fa"], p["fb"])  # noqa: E731
        key = lambda p: (p["schema"], p["converter"])  # noqa: E731
        old = lambda p: -1.0 if old_guard_not_slower(e, grammars[key(p) + (p["ref"],)],  # noqa: E731
                                                     grammars[key(p) + (p["other"],)]) else 1.0
        rn, n = accuracy(ev, new)
        ro, _ = accuracy(ev, old)
        dec = [p for p in ev if (p["ref"], p["other"]) in DECISION]
        decision_pairs[e] = [p for p in dec if abs(p["y"]) > BAND]
        dn, dd = accuracy(dec, new)
        do, _ = accuracy(dec, old)
        pct = lambda r, k: f"{r / k:.0%}" if k else "–"  # noqa: E731
        lines.append(f"| {e} | {m.source or 'fitted (fit half)'} | {len(ev)} | {n} | {rn} | {pct(rn, n)} | {ro} | "
                     f"{pct(ro, n)} | {dd} | {dn} ({pct(dn, dd)}) | {do} ({pct(do, dd)}) |")
        if not a.models:
            fit_r, fit_n = accuracy(fit_ps, new)
            lines.append(f"|  | (fit half: {len(fit_ps)} pairs, {fit_n} outside ±20%, {pct(fit_r, fit_n)} right) "
                         f"| | | | | | | | | |")
    lines += ["", "The decision on the eval half (what the default target's guard keeps, vs the input; the engine "
              "check not simulated): p95 ratio input / kept, > 1 faster", "",
              "| converter | engine | rows | geomean | min | below 0.9 | A/A outside ±10% |", "|---|---|---|---|---|---|---|"]
    ev_rows = [r for r in rows if r["split"] == "eval" or (a.models and a.all_unseen)]
    for conv in sorted({r["converter"] for r in ev_rows}):
        for e in ENGINES:
            rs = [r for r in ev_rows if r["converter"] == conv]
            xs = decision_outcome(rs, e, feats, models)
            aa = [r["engines"][e]["forms"]["input"]["p95"] / r["engines"][e]["aa"]["p95"] for r in rs
                  if "aa" in r["engines"].get(e, {})]
            if xs:
                gm = math.exp(sum(map(math.log, xs)) / len(xs))
                lines.append(f"| {conv} | {e} | {len(xs)} | {gm:.3f} | {min(xs):.2f} | {sum(x < 0.9 for x in xs)} | "
                             f"{sum(not 1 / 1.1 <= x <= 1.1 for x in aa)} |")
    lines += ["", "Decision pairs outside ±20% (evaluated rows): the measured p95 ratio candidate / reference beside "
              "the row's A/A (input against a second compile of itself) and the model's prediction", "",
              "| engine | schema | converter | pair | measured | A/A | predicted | right |", "|---|---|---|---|---|---|---|---|"]
    for e in ENGINES:
        for p in sorted(decision_pairs[e], key=lambda p: (p["schema"], p["converter"], p["ref"])):
            pred = models[e].log_ratio(p["fa"], p["fb"])
            lines.append(f"| {e} | {p['schema']} | {p['converter']} | {p['ref']} → {p['other']} | "
                         f"{math.exp(p['y']):.2f} | {math.exp(p['aa']):.2f} | {math.exp(pred):.2f} | "
                         f"{'yes' if (pred < 0) == (p['y'] < 0) else 'no'} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
