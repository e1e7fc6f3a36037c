"""The benchmark report: ``report.md`` and PNG plots (matplotlib, Agg backend).

    paths = write_report(results, out_dir, notes=[...], meta={...})

Figures in the report are speedups original ÷ optimized (> 1: the optimized grammar is
faster); a grammar whose p50 speedup is below ``SLOWER`` is flagged. Plots:

    speedup.png          per-grammar p50 speedup bars, one group per grammar, a bar per engine
    steps/<case>.png     mask time vs step, original vs optimized, a panel per engine
"""

from __future__ import annotations

import math
import os
import re

SLOWER = 0.95


def geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fmt_x(x) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}×" if x >= 100 else f"{x:.2f}×"


def _us(x) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def engines_of(results) -> list[str]:
    """The engines measured, in the canonical order (cached results come back key-sorted)."""
    from .engines import ENGINES
    seen: dict = {}
    for r in results:
        for e in r.get("engines", {}):
            seen.setdefault(e, None)
    return sorted(seen, key=lambda e: (ENGINES.index(e) if e in ENGINES else len(ENGINES), e))


def _ok(r, eng):
    e = r.get("engines", {}).get(eng, {})
    return e if e.get("status") == "ok" and "optimized" in e else None


def summary_rows(results) -> list[dict]:
    """Per engine: how many grammars were measured, how many got slower, the worst and
    geometric-mean p50 speedups (all, obfuscated suite, pathological suite), and G4 against
    [ab]* (original and optimized) when both were measured."""
    rows = []
    by_name = {r["name"]: r for r in results}
    for eng in engines_of(results):
        ok = [(r, _ok(r, eng)) for r in results if _ok(r, eng)]
        sp = [e["speedup_p50"] for _, e in ok if e.get("speedup_p50")]
        slower = [r["name"] for r, e in ok if (e.get("speedup_p50") or 1) < SLOWER]
        skipped = {r.get("engines", {}).get(eng, {}).get("status") for r in results} - {"ok", None}
        row = {"engine": eng, "measured": len(ok), "slower": slower,
               "worst": min(sp) if sp else None, "geomean": geomean(sp),
               "geomean_obfuscated": geomean([e["speedup_p50"] for r, e in ok if r["suite"] == "obfuscated"]),
               "pathological": {r["name"]: e["speedup_p50"] for r, e in ok if r["suite"] == "pathological"},
               "not_measured": sorted(r["name"] for r in results
                                      if r.get("engines", {}).get(eng, {}).get("status") != "ok"),
               "statuses": sorted(s for s in skipped if s)}
        g4, ab = _ok(by_name.get("g4", {}), eng), _ok(by_name.get("ab-star", {}), eng)
        if g4 and ab and ab["original"]["p50"]:
            row["g4_vs_abstar"] = (g4["original"]["p50"] / ab["original"]["p50"],
                                   g4["optimized"]["p50"] / ab["original"]["p50"])
        rows.append(row)
    return rows


def summary_table(results) -> str:
    head = ("| engine | measured | slower (p50 < 0.95×) | worst p50 | geomean p50 | geomean obfuscated "
            "| pathological p50 speedups | G4 ÷ [ab]* at 200 (original → optimized) |")
    lines = [head, "|" + "---|" * 8]
    for row in summary_rows(results):
        path = ", ".join(f"{k} {_fmt_x(v)}" for k, v in row["pathological"].items()) or "–"
        g4 = row.get("g4_vs_abstar")
        g4s = f"{_fmt_x(g4[0])} → {_fmt_x(g4[1])}" if g4 else "–"
        slower = f"{len(row['slower'])}" + (f" ({', '.join(row['slower'])})" if row["slower"] else "")
        lines.append(f"| {row['engine']} | {row['measured']} | {slower} | {_fmt_x(row['worst'])} | "
                     f"{_fmt_x(row['geomean'])} | {_fmt_x(row['geomean_obfuscated'])} | {path} | {g4s} |")
    return "\n".join(lines)


def engine_table(results, eng: str) -> str:
    lines = ["| grammar | suite | steps | compile ms | p50 μs | p95 μs | max μs | p50 × | p95 × | κ | SAC/token |",
             "|" + "---|" * 11]
    for r in results:
        e = r.get("engines", {}).get(eng)
        if not e:
            continue
        steps = r.get("trajectory", {}).get("tokens", "–")
        if e.get("status") != "ok":
            lines.append(f"| {r['name']} | {r['suite']} | {steps} | {e.get('status', '?')}: "
                         f"{(e.get('note') or '').replace('|', '/')} |||||||| ")
            continue
        o, p = e["original"], e.get("optimized")
        fo, fp = r.get("forms", {}).get("original", {}), r.get("forms", {}).get(f"opt:{e['target']}", {})

        def pair(key, fmt=_us, scale=1.0):
            return fmt(o[key] * scale) + (f" → {fmt(p[key] * scale)}" if p else "")

        def sac(f):
            s = f.get("sac_per_token")
            return f"{sum(s) / len(s):.1f}" if s else "–"
        flag = " **slower**" if p and (e.get("speedup_p50") or 1) < SLOWER else ""
        lines.append(
            f"| {r['name']} | {r['suite']} | {steps} | {pair('compile_s', lambda x: f'{x:.1f}', 1e3)} | "
            f"{pair('p50')} | {pair('p95')} | {pair('max')} | {_fmt_x(e.get('speedup_p50'))}{flag} | "
            f"{_fmt_x(e.get('speedup_p95'))} | {fo.get('kappa', '–')} → {fp.get('kappa', '–')} | "
            f"{sac(fo)} → {sac(fp)} |")
    return "\n".join(lines)


def targets_table(results) -> str:
    """Which form each target chose: κ after, and whether the targets' outputs differ."""
    targets: dict = {}
    for r in results:
        for t in r.get("targets", {}):
            targets.setdefault(t, None)
    ts = list(targets)
    lines = ["| grammar | κ | " + " | ".join(f"{t}: κ after" for t in ts) + " | distinct outputs |",
             "|" + "---|" * (len(ts) + 3)]
    differ = 0
    for r in results:
        tg = r.get("targets", {})
        texts = {tg[t].get("text") for t in ts if t in tg and "text" in tg[t]}
        differ += len(texts) > 1
        cells = []
        for t in ts:
            x = tg.get(t, {})
            cells.append(f"{x['kappa_after']}" + ("" if x.get("changed") else " (unchanged)") if "kappa_after" in x
                         else (x.get("error", "–")[:60] if x else "–"))
        k0 = next((tg[t]["kappa_before"] for t in ts if "kappa_before" in tg.get(t, {})), "–")
        lines.append(f"| {r['name']} | {k0} | " + " | ".join(cells) + f" | {len(texts)} |")
    lines.append("")
    lines.append(f"The targets chose different forms for {differ} of {len(results)} grammars.")
    return "\n".join(lines)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def plot_speedups(results, path: str) -> bool:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    engs = engines_of(results)
    names = [r["name"] for r in results if any(_ok(r, e) for e in engs)]
    if not names:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(names) * max(1, len(engs)) / 2 + 2), 4.5))
    width = 0.8 / max(1, len(engs))
    by_name = {r["name"]: r for r in results}
    for j, eng in enumerate(engs):
        xs, ys = [], []
        for i, n in enumerate(names):
            e = _ok(by_name[n], eng)
            if e and e.get("speedup_p50"):
                xs.append(i + (j - (len(engs) - 1) / 2) * width)
                ys.append(e["speedup_p50"])
        ax.bar(xs, ys, width, label=eng)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(SLOWER, color="red", lw=0.6, ls="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("p50 speedup (original ÷ optimized)")
    ax.set_title("per-grammar speedup per engine")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_steps(r: dict, path: str) -> bool:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    engs = [e for e in r.get("engines", {}) if _ok(r, e)]
    if not engs:
        return False
    fig, axes = plt.subplots(1, len(engs), figsize=(4.2 * len(engs), 3.2), squeeze=False)
    for ax, eng in zip(axes[0], engs):
        e = r["engines"][eng]
        ax.plot(e["original"]["per_step_us"], label="original", lw=1)
        ax.plot(e["optimized"]["per_step_us"], label=f"optimized ({e['target']})", lw=1)
        ax.set_yscale("log")
        ax.set_title(eng, fontsize=9)
        ax.set_xlabel("step (token)")
        ax.set_ylabel("mask μs")
        ax.legend(fontsize=7)
    fig.suptitle(r["name"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def calibration_section(results) -> list[str]:
    """Per engine, the calibrated model fitted on these very results (not stored: that is
    ``gramopt calibrate``): R², residuals, node weights."""
    from ..costmodels.calibration import fit, rows_from_results
    lines = []
    for eng in engines_of(results):
        rows = rows_from_results(results, eng)
        if len(rows) < 2:
            continue
        m = fit(rows, eng)
        worst = sorted(m.residuals["by_form"].items(), key=lambda kv: -abs(kv[1]))[:3]
        lines.append(f"- **{eng}**: R² {m.r2:.3f} over {m.n_steps} steps of {m.n_forms} forms; residual rmse "
                     f"{m.residuals['rmse']:.3g} μs, p95 |residual| {m.residuals['p95_abs']:.3g} μs; largest mean "
                     f"residuals: " + ", ".join(f"{k} {v:+.3g} μs" for k, v in worst))
        lines.append("  node weights (κ units): " + ", ".join(f"{k} {v:.3g}" for k, v in m.node_weights.items())
                     + (f" — {'; '.join(m.notes)}" if m.notes else ""))
    return lines


def write_report(results: list[dict], out_dir: str, notes=(), meta: dict | None = None,
                 plots: bool = True) -> dict:
    """Write ``report.md`` (and the plots, when matplotlib is installed) under ``out_dir``;
    returns {"report": path, "plots": [paths], "notes": [...]}."""
    from ..formats import write_file
    os.makedirs(out_dir, exist_ok=True)
    notes = list(notes)
    made: list[str] = []
    if plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            notes.append("matplotlib not installed: no plots (pip install gramopt[bench])")
            plots = False
    if plots:
        p = os.path.join(out_dir, "speedup.png")
        if plot_speedups(results, p):
            made.append(p)
        os.makedirs(os.path.join(out_dir, "steps"), exist_ok=True)
        for r in results:
            p = os.path.join(out_dir, "steps", _slug(r["name"]) + ".png")
            if plot_steps(r, p):
                made.append(p)
    meta = dict(meta or {})
    out = ["# gramopt bench", ""]
    if meta:
        out += [", ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    out += ["Speedups are original ÷ optimized per-mask time (> 1: the optimized grammar is faster), "
            "measured interleaved on the same token trajectories; each engine's grammar is optimized "
            "for that engine's target.", "", "## Summary", "", summary_table(results), ""]
    if any(os.path.basename(p) == "speedup.png" for p in made):
        out += ["![per-grammar speedups](speedup.png)", ""]
    for eng in engines_of(results):
        out += [f"## {eng}", "", engine_table(results, eng), ""]
    out += ["## Target choices", "", targets_table(results), ""]
    cal = calibration_section(results)
    if cal:
        out += ["## Calibration (T_mask ≈ w·c + b on these measurements)", ""] + cal + [""]
    steps = [p for p in made if os.sep + "steps" + os.sep in p]
    if steps:
        out += ["## Mask time per step", ""]
        out += [f"![{os.path.basename(p)}](steps/{os.path.basename(p)})" for p in steps]
        out.append("")
    case_notes = [f"{r['name']}: {n}" for r in results for n in r.get("notes", [])]
    case_notes += [f"{eng}: {e['note']}" if e.get("status") == "skipped" else f"{r['name']} / {eng}: {e['note']}"
                   for r in results for eng, e in r.get("engines", {}).items() if e.get("note")]
    if notes or case_notes:
        out += ["## Notes", ""] + [f"- {n}" for n in list(dict.fromkeys(notes + case_notes))] + [""]
    path = os.path.join(out_dir, "report.md")
    write_file(path, "\n".join(out))
    return {"report": path, "plots": made, "notes": notes}
