"""Per-engine calibrated cost models: T_mask ≈ w·c + b, fitted by least squares.

The paper's model is T_mask ≈ a·(α·c) + b with c the work counted per step; here a and α
fold into one weight vector w. For every engine the features of a step are gramopt's own
runtime counters on the same trajectory (``runtime.Counters``: predictions, completions,
scans, trie nodes, Leo hits, sets), the exact SAC of the step (``costmodels.sac``) and the
static features of the grammar form (``static_features``). xgrammar and llguidance expose
no counters of their own: their time is *predicted* from gramopt's counters and the static
features — what the fit says is how much of their time these explain (R²).

    model = fit(rows, engine)                  Model: weights, intercept, R², residuals
    model.node_weights                         per-e-node costs for the extractor (below)
    save_model(model, dir); load_model(engine, named=None)   JSON: the one shipped in
                                               costmodels/models/, or the file / folder named
                                               (``gramopt calibrate`` writes user_models_dir())

From fitted weights to extraction costs. The extractor prices a grammar statically, so a
node's cost is the effect of one more static feature (A → A A, A op A, (x?)*, nullable
alternatives, left / right recursion) on the engine's step time, in the unit the
extractor's κ term counts:

* paired (used when the rows come from ``gramopt bench``, which names each form's
  language): forms of one language (a grammar, its optimized and obfuscated forms) share
  the trajectory, so the language's own cost cancels within the group; log T̄ is fitted
  on the within-group feature differences (``paired_node_weights``);
* affine (rows without languages): the dynamic weights are folded into the static ones
  through d̄ ≈ M·s + m₀ fitted across forms, e = w_s + M·w_d (``affine_node_weights``).

Constraints: costs are clipped to [0, CAP] (the extractor's monotonicity needs
non-negative node costs) and never below the generic ones (``_in_kappa_units``); the unit is κ when κ's own effect is positive, else A → A A
keeps its generic cost and anchors the others; a weak fit (paired R² < 0.5), or one where
neither has a positive effect, keeps the generic weights — each case says so in ``notes``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from ..grammar import Alt, Grammar, Ref, Repeat, Seq, walk
from ..grammar.analysis import nullable_expr, nullable_rules

DYNAMIC = ("predictions", "completions", "scans", "trie_nodes", "leo", "sets", "sac")
STATIC = ("kappa", "rules", "concat", "infix", "nullrep", "nullalt", "left_rec", "right_rec", "lookahead")
FEATURES = DYNAMIC + STATIC
# the node weights the extractor reads, and their generic values (sac_proxy's constants)
NODE_KEYS = ("concat", "infix", "nullrep", "nullalt", "left_rec", "right_rec")
CAP = 1000.0
MODELS_DIR = os.path.join(os.path.dirname(__file__), "models")


def generic_node_weights() -> dict:
    from .sac_proxy import W_CONCAT, W_INFIX, W_NULLALT, W_NULLREP
    return {"kappa": 1.0, "concat": W_CONCAT, "infix": W_INFIX, "nullrep": W_NULLREP, "nullalt": W_NULLALT,
            "left_rec": 0.0, "right_rec": 0.0}


def static_features(grammar: Grammar) -> dict:
    """Counts of the shapes the SAC proxy prices (see ``sac_proxy``) plus κ, the rule
    count, directly left / right recursive alternatives (A → A β, A → β A with the other
    end not A), and rules with an xgrammar lookahead assertion (not an e-node cost: the
    xgrammar target adds them after extraction; a control in the fits, since they change
    xgrammar's time by orders of magnitude)."""
    from .kappa import kappa
    nullable = nullable_rules(grammar)
    f = dict.fromkeys(STATIC, 0)
    f["kappa"], f["rules"] = kappa(grammar), len(grammar.rules)
    f["lookahead"] = sum(1 for r in grammar.rules if r.lookahead is not None)
    for rule in grammar.rules:
        me = Ref(rule.name)
        for a in (rule.body.items if isinstance(rule.body, Alt) else (rule.body,)):
            if isinstance(a, Seq):
                first, last = a.items[0] == me, a.items[-1] == me
                if first and last:
                    f["concat" if len(a.items) == 2 else "infix"] += 1
                elif first:
                    f["left_rec"] += 1
                elif last:
                    f["right_rec"] += 1
        for node in walk(rule.body):
            if isinstance(node, Repeat) and node.max is None and nullable_expr(node.item, nullable):
                f["nullrep"] += 1
            if isinstance(node, Alt):
                f["nullalt"] += max(0, sum(1 for i in node.items if nullable_expr(i, nullable)) - 1)
    return f


@dataclass
class Model:
    engine: str
    features: list[str]
    weights: dict
    intercept: float
    r2: float
    residuals: dict
    n_steps: int
    n_forms: int
    node_weights: dict = field(default_factory=generic_node_weights)
    notes: list[str] = field(default_factory=list)
    fitted_on: dict = field(default_factory=dict)

    def predict(self, x: dict) -> float:
        return self.intercept + sum(self.weights[k] * float(x.get(k, 0.0)) for k in self.features)

    def to_json(self) -> dict:
        return asdict(self)

    def format(self) -> str:
        w = ", ".join(f"{k} {v:.4g}" for k, v in self.weights.items() if v)
        nw = ", ".join(f"{k} {v:.3g}" for k, v in self.node_weights.items())
        return (f"{self.engine}: R² {self.r2:.3f} over {self.n_steps} steps of {self.n_forms} forms; "
                f"T ≈ {self.intercept:.3g} μs + {w or '0'}; residual rmse {self.residuals.get('rmse', 0):.3g} μs; "
                f"node weights {nw}" + (f" ({'; '.join(self.notes)})" if self.notes else ""))


def least_squares(X: np.ndarray, y: np.ndarray):
    """(w, b) minimising ‖X·w + b − y‖² (minimum-norm for collinear features: exact data
    are recovered exactly whenever the features are linearly independent). ``y`` may be a
    matrix (one column per target): then w is a matrix and b a vector."""
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    sol, *_ = np.linalg.lstsq(A, y, rcond=None)
    return sol[:-1], (float(sol[-1]) if np.ndim(sol) == 1 else sol[-1])


def r_squared(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


def fit(rows: list[dict], engine: str, features=FEATURES, meta: dict | None = None) -> Model:
    """Fit T_mask (``row["t_us"]``) on ``features`` over ``rows`` (one per step, each also
    naming its ``form``); node weights from the static features (module docstring)."""
    if not rows:
        raise ValueError(f"no measured steps for {engine}")
    features = [k for k in features if any(k in r for r in rows)]
    X = np.array([[float(r.get(k, 0.0)) for k in features] for r in rows])
    y = np.array([float(r["t_us"]) for r in rows])
    w, b = least_squares(X, y)
    pred = X @ w + b
    res = y - pred
    by_form: dict = {}
    for r, e in zip(rows, res):
        by_form.setdefault(r.get("form", "?"), []).append(float(e))
    residuals = {"rmse": float(np.sqrt(np.mean(res ** 2))), "mean_abs": float(np.mean(np.abs(res))),
                 "p95_abs": float(np.percentile(np.abs(res), 95)), "max_abs": float(np.max(np.abs(res))),
                 "by_form": {k: float(np.mean(v)) for k, v in sorted(by_form.items())}}
    model = Model(engine, list(features), {k: float(v) for k, v in zip(features, w)}, b, r_squared(y, pred),
                  residuals, len(rows), len(by_form), fitted_on=dict(meta or {}))
    model.node_weights, notes = node_weights(model, rows)
    model.notes += notes
    return model


def node_weights(model: Model, rows: list[dict]) -> tuple[dict, list[str]]:
    """Per-e-node costs in κ units (module docstring): from paired forms of one language
    when the rows name their ``group`` (``paired_node_weights``), else from the fitted
    affine model through the static features."""
    if any("group" in r for r in rows):
        out = paired_node_weights(rows)
        if out is not None:
            return out
    return affine_node_weights(model, rows)


def affine_node_weights(model: Model, rows: list[dict]) -> tuple[dict, list[str]]:
    """Node weights from the affine fit: d̄ ≈ M·s + m₀ across forms folds the dynamic
    weights into the static ones, e = w_s + M·w_d, then e_k / e_κ (module docstring)."""
    dyn = [k for k in model.features if k in DYNAMIC]
    stat = [k for k in model.features if k in STATIC]
    forms: dict = {}
    for r in rows:
        forms.setdefault(r.get("form", "?"), []).append(r)
    if "kappa" not in stat or len(forms) < 3:
        return generic_node_weights(), ["affine: too few forms or no κ feature: generic node weights"]
    S = np.array([[float(rs[0].get(k, 0.0)) for k in stat] for rs in forms.values()])
    eff = np.array([model.weights[k] for k in stat])
    if dyn:
        D = np.array([[np.mean([float(r.get(k, 0.0)) for r in rs]) for k in dyn] for rs in forms.values()])
        M, _ = least_squares(S, D)  # D ≈ S·M + m0 : M is (static × dynamic)
        eff = eff + M @ np.array([model.weights[k] for k in dyn])
    e = dict(zip(stat, eff))
    return _in_kappa_units(e, "affine")


PAIRED = ("kappa",) + NODE_KEYS + ("lookahead",)  # lookahead: a control, not a node cost


def paired_node_weights(rows: list[dict], ridge: float = 1e-9):
    """Node weights from forms of the same language (``row["group"]``: a grammar, its
    optimized and obfuscated forms, all on the same trajectory). Within a group the
    trajectory and language are fixed, so the group's effect cancels: per form the mean
    step time T̄_f, and

        log T̄_f − mean_g log T̄  ≈  Σ_k β_k (s_fk − mean_g s_k)

    (least squares, a tiny ridge for features that barely vary). Logarithms, because an
    engine's step time spans orders of magnitude across grammars: an affine fit of the
    absolute times is decided by the slowest grammar alone, while the extractor needs
    which form of *each* language is cheaper. The extractor's objective is additive in the
    features, as log T̄ is here, so costs β_k/β_κ in κ units rank forms as the fit does.
    A feature that never varies within a group keeps its generic weight (the data say
    nothing about it). None when fewer than two groups have two forms."""
    forms: dict = {}
    for r in rows:
        if "group" in r and float(r["t_us"]) > 0:
            forms.setdefault(r["form"], []).append(r)
    groups: dict = {}
    for f, rs in forms.items():
        groups.setdefault(rs[0]["group"], []).append(
            (float(np.log(np.mean([float(r["t_us"]) for r in rs]))), [float(rs[0].get(k, 0.0)) for k in PAIRED]))
    Y, S = [], []
    for members in groups.values():
        if len(members) < 2:
            continue
        y = np.array([m[0] for m in members])
        x = np.array([m[1] for m in members])
        Y += list(y - y.mean())
        S += list(x - x.mean(axis=0))
    if len(Y) < 4:
        return None
    S, Y = np.array(S), np.array(Y)
    varies = [j for j in range(len(PAIRED)) if np.any(np.abs(S[:, j]) > 1e-12)]
    if 0 not in varies:
        return generic_node_weights(), ["κ never varies within a language: generic node weights"]
    Sv = S[:, varies]
    scale = float(np.sum(Sv ** 2)) or 1.0
    A = np.vstack([Sv, np.sqrt(ridge * scale) * np.eye(len(varies))])
    beta, *_ = np.linalg.lstsq(A, np.concatenate([Y, np.zeros(len(varies))]), rcond=None)
    pred = Sv @ beta
    e = {PAIRED[j]: float(b) for j, b in zip(varies, beta)}
    r2 = r_squared(Y, pred)
    out, notes = _in_kappa_units(e, "paired", r2)
    notes.append("log-time per feature: " + ", ".join(f"{k} {v:.3g}" for k, v in e.items()))
    notes.append(f"paired log fit over {len(Y)} forms in {sum(1 for m in groups.values() if len(m) > 1)} "
                 f"languages: R² {r2:.3f}")
    return out, notes


MIN_PAIRED_R2 = 0.5


def _in_kappa_units(e: dict, how: str, r2: float | None = None) -> tuple[dict, list[str]]:
    """Node costs from per-feature effects ``e``, clipped to [0, CAP]; a feature without an
    estimate keeps its generic weight.

    The unit: κ when its own effect is positive (e_k / e_κ). Measured, κ often has none
    (a smaller grammar is not a faster one), and then the scale is anchored on the best
    identified shape, A → A A: it keeps its generic cost W_CONCAT and every other feature
    costs W_CONCAT·e_k/e_concat. Neither positive, or a paired fit explaining less than
    ``MIN_PAIRED_R2`` of the variance: all generic (the data do not support a change).

    A fitted cost never goes below the generic one: the generic weights price the
    ambiguity shapes by their asymptotic cost (Θ(t²) packed splits per step for A → A A),
    true in every Earley-based engine, and a fit over a few languages that finds such a
    shape cheap is under-identified rather than right. Calibration can only add what an
    engine makes dear (left or right recursion, say), never remove the protection."""
    gen = generic_node_weights()
    if r2 is not None and r2 < MIN_PAIRED_R2:
        return gen, [f"{how}: R² {r2:.2f} < {MIN_PAIRED_R2}: generic node weights"]
    if e.get("kappa", 0.0) > 1e-12:
        unit, anchor = e["kappa"], "κ"
    elif e.get("concat", 0.0) > 1e-12:
        unit, anchor = e["concat"] / gen["concat"], "A → A A"
    else:
        return gen, [f"{how}: neither κ nor A → A A has a positive effect: generic node weights"]
    out = {"kappa": 1.0}
    for k in NODE_KEYS:
        out[k] = max(gen[k], float(np.clip(e[k] / unit, 0.0, CAP))) if k in e else gen[k]
    return out, [f"{how}: costs anchored on {anchor}, never below the generic ones"]


# ---------------------------------------------------------------- from bench results


def rows_from_results(results: list[dict], engine: str) -> list[dict]:
    """Steps of ``engine`` from ``gramopt bench`` results: each step's median time joined
    with gramopt's counters and SAC at the same step of the same form, plus the form's
    static features (the first trajectory of each case: where the counters were taken)."""
    rows = []
    for res in results:
        ent = res.get("engines", {}).get(engine, {})
        if ent.get("status") != "ok":
            continue
        target = ent.get("target")
        for which, key in (("original", "original"), ("optimized", f"opt:{target}")):
            form = res.get("forms", {}).get(key)
            meas = ent.get(which)
            if not form or not meas or "counters" not in form or not form["counters"]:
                continue
            counters = form["counters"]
            n = min(len(meas["per_step_us"]), len(next(iter(counters.values()))))
            sac = form.get("sac_per_token", [])
            for i in range(n):
                row = {k: counters[k][i] for k in DYNAMIC if k in counters}
                row["sac"] = sac[i] if i < len(sac) else 0
                row.update(form["static"])
                row["t_us"] = meas["per_step_us"][i]
                row["form"] = f"{res['name']}:{which}"
                row["group"] = res.get("group") or res["name"].split("~")[0]
                rows.append(row)
    return rows


# ---------------------------------------------------------------- storage


def user_models_dir() -> str:
    """Where ``gramopt calibrate`` writes by default: $GRAMOPT_MODELS, else
    $XDG_CONFIG_HOME/gramopt/models (~/.config/gramopt/models). Nothing reads it unless it is
    named (``--cost-model``): see ``model_path``."""
    env = os.environ.get("GRAMOPT_MODELS")
    if env:
        return env
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "gramopt", "models")


def save_model(model: Model, folder: str) -> str:
    from ..formats import write_file
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{model.engine}.json")
    write_file(path, json.dumps(model.to_json(), indent=1, sort_keys=True) + "\n")
    return path


def model_path(engine: str, named: str | None = None) -> str:
    """Where the model of ``engine`` is read from: ``named`` (a model file, or a folder
    holding ``ENGINE.json``, as ``gramopt calibrate`` writes) when given, else the one shipped
    in the package. Never a folder found in the environment: a model shapes the output, so
    it is used only when named (``optimize(..., cost_model=PATH)``, ``--cost-model PATH``)."""
    if named is None:
        return os.path.join(MODELS_DIR, f"{engine}.json")
    return os.path.join(named, f"{engine}.json") if os.path.isdir(named) else named


def load_model(engine: str, named: str | None = None) -> Model | None:
    """The model for ``engine`` (``model_path``); None when there is none."""
    try:
        with open(model_path(engine, named), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return Model(**data)


@dataclass(frozen=True)
class NodeWeights:
    """The extractor's node weights from a model, and which model: ``source`` names it (the
    shipped one, or the path named) with the SHA-256 of its bytes, for the report and the
    cache key; ``weights`` None when there is no model (the generic costs apply)."""

    weights: dict | None
    source: str


_WEIGHTS_CACHE: dict = {}


def engine_node_weights(engine: str, named: str | None = None) -> NodeWeights:
    """The node weights of ``engine``'s model (``model_path``). Cached per process and path."""
    path = model_path(engine, named)
    key = (engine, os.path.abspath(path))
    if key not in _WEIGHTS_CACHE:
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:16]
        except OSError:
            digest = None
        m = load_model(engine, named)
        where = f"shipped {engine}.json" if named is None else path
        _WEIGHTS_CACHE[key] = NodeWeights(dict(m.node_weights) if m is not None else None,
                                          f"{where} (sha256 {digest})" if m is not None else f"none ({where} absent)")
        if named is not None and m is None:
            raise FileNotFoundError(f"no cost model for {engine} at {path}")
    return _WEIGHTS_CACHE[key]


__all__ = ["DYNAMIC", "FEATURES", "STATIC", "Model", "NodeWeights", "engine_node_weights", "model_path", "fit", "generic_node_weights",
           "least_squares", "load_model", "node_weights", "r_squared", "rows_from_results", "save_model",
           "static_features"]
