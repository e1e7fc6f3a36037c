"""What an optimization reports: one ``PassReport`` per pass run, and the ``Report`` of the
whole run (κ, SAC-proxy and rules before and after, verification, the dialect written,
warnings, stops and notes), as text (``format``) and as JSON (``to_json``). Filled by
``gramopt.passes`` and ``gramopt.optimizer.run_job``; formatting only, no decisions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .formats import display_name


@dataclass
class PassReport:
    name: str
    kappa_before: int
    kappa_after: int
    rules_before: int
    rules_after: int
    seconds: float
    removed: list[str] = field(default_factory=list)
    fired: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    saturation: dict | None = None
    stops: list[str] = field(default_factory=list)  # a limit cut the pass short, and its fallback

    def to_json(self) -> dict:
        return {"pass": self.name, "kappa_before": self.kappa_before, "kappa_after": self.kappa_after,
                "rules_before": self.rules_before, "rules_after": self.rules_after,
                "seconds": round(self.seconds, 4), "removed": self.removed, "fired": self.fired,
                "notes": self.notes, "saturation": self.saturation, "stops": self.stops}


@dataclass
class Report:
    target: str
    passes: list[PassReport] = field(default_factory=list)
    kappa_before: int = 0
    kappa_after: int = 0
    sac_before: float = 0.0
    sac_after: float = 0.0
    rules_before: int = 0
    rules_after: int = 0
    seconds: float = 0.0
    verified: str = "skipped"  # "ok", "skipped", or "failed"
    verify_stats: dict = field(default_factory=dict)
    written_as: str | None = None  # the dialect the command wrote (set by ``gramopt optimize``)
    cost_model: str | None = None  # the calibrated model the extractor used (name and SHA-256)
    warnings: list[str] = field(default_factory=list)  # about the input (empty language) or the output
    stops: list[str] = field(default_factory=list)  # a work limit cut a stage short (and its fallback)
    notes: list[str] = field(default_factory=list)  # e.g. the grammar stays ambiguous (cli optimize)
    sac_growth: dict | None = None  # gramopt.summary.sac_growth of the output, when measured

    def format(self) -> str:
        head = f"{'pass':<12} {'κ before':>9} {'κ after':>8} {'rules':>11} {'ms':>8}  fired / notes"
        lines = [f"target {self.target}", head, "-" * len(head)]
        for p in self.passes:
            fired = ", ".join(f"{k}×{v}" for k, v in sorted(p.fired.items(), key=lambda kv: -kv[1]))
            extra = "; ".join(x for x in [fired] + p.notes + p.stops if x)
            lines.append(f"{p.name:<12} {p.kappa_before:>9} {p.kappa_after:>8} "
                         f"{p.rules_before:>5}→{p.rules_after:<5} {p.seconds * 1000:>8.1f}  {extra}")
            if p.removed:
                shown = ", ".join(p.removed[:8]) + (f", … {len(p.removed) - 8} more" if len(p.removed) > 8 else "")
                lines.append(f"{'':<12} removed: {shown}")
        lines.append("-" * len(head))
        lines.append(f"{'total':<12} {self.kappa_before:>9} {self.kappa_after:>8} "
                     f"{self.rules_before:>5}→{self.rules_after:<5} {self.seconds * 1000:>8.1f}  "
                     f"SAC-proxy {self.sac_before:g}→{self.sac_after:g}; verification {self.verified}")
        if self.cost_model:
            lines.append(f"cost model {self.cost_model}")
        if self.written_as:
            lines.append(f"written as {display_name(self.written_as)}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        lines.extend(f"stopped: {w}" for w in self.stops)
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"target": self.target, "kappa_before": self.kappa_before, "kappa_after": self.kappa_after,
                "sac_proxy_before": self.sac_before, "sac_proxy_after": self.sac_after,
                "rules_before": self.rules_before, "rules_after": self.rules_after,
                "seconds": round(self.seconds, 4), "verified": self.verified,
                "verify_stats": self.verify_stats, "written_as": self.written_as, "warnings": self.warnings,
                "stops": self.stops,
                "notes": self.notes, "sac_growth": self.sac_growth,
                "cost_model": self.cost_model,
                "passes": [p.to_json() for p in self.passes]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False, default=str)


__all__ = ["PassReport", "Report"]
