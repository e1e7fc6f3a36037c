"""``gramopt.analyze``: what a person (table) or a tool (JSON) wants to know about a grammar.

Sizes (rules, |N| and productions of the canonical BNF, κ), the structural findings
(nullable, unreachable, unproductive, left recursion, unguarded cycles) and ambiguity
warnings, each with its rule and line.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from .costmodels import kappa_of_bnf
from .grammar import Grammar, lower
from .grammar.ambiguity import Finding, ambiguity_findings
from .grammar.analysis import Structure, structure


@dataclass(frozen=True)
class Analysis:
    rules: int
    nonterminals: int  # |N| of the canonical BNF (user rules + helpers)
    productions: int
    kappa: int
    start: str
    dialect: str
    structure: Structure
    findings: tuple[Finding, ...]
    lines: dict  # rule name → source line (None when unknown)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=list)

    def format(self, path: str | None = None) -> str:
        """A readable report: a size table, then one line per finding."""
        s = self.structure
        where = path or "<grammar>"
        rows = [
            ("rules", self.rules),
            ("nonterminals |N| (canonical BNF)", self.nonterminals),
            ("productions", self.productions),
            ("kappa", self.kappa),
            ("start rule", self.start),
            ("dialect", self.dialect),
        ]
        width = max(len(k) for k, _ in rows)
        out = [f"{where}", *(f"  {k:<{width}}  {v}" for k, v in rows)]
        issues: list[tuple[str, str, str]] = []

        def line_of(name: str) -> str:
            ln = self.lines.get(name)
            return f"{where}:{ln}" if ln else where

        for name in s.unreachable:
            issues.append((line_of(name), "warning", f"rule '{name}' is unreachable from '{self.start}'"))
        for name in s.unproductive:
            issues.append((line_of(name), "warning", f"rule '{name}' derives no finite string"))
        for name in s.left_recursive:
            kind = "directly" if name in s.directly_left_recursive else "indirectly"
            issues.append((line_of(name), "note", f"rule '{name}' is {kind} left-recursive "
                                                  f"(llama.cpp rejects it)"))
        for cycle in s.unguarded_cycles:
            issues.append((line_of(cycle[0]), "warning",
                           f"unguarded cycle {' ⇒ '.join((*cycle, cycle[0]))} "
                           f"(derives itself consuming nothing: infinitely ambiguous)"))
        for f in self.findings:
            level = "note" if f.kind == "overlap" else "warning"
            issues.append((line_of(f.rule), level, f"rule '{f.rule}': {f.message} [{f.kind}]"))
        if s.nullable:
            shown = ", ".join(s.nullable[:12]) + (" …" if len(s.nullable) > 12 else "")
            out.append(f"  nullable rules ({len(s.nullable)}): {shown}")
        if issues:
            out.append(f"  findings ({len(issues)}):")
            out.extend(f"{loc}: {lvl}: {msg}" for loc, lvl, msg in issues)
        else:
            out.append("  findings: none")
        return "\n".join(out)


def analyze(grammar: Grammar) -> Analysis:
    bnf = lower(grammar)
    return Analysis(
        rules=len(grammar.rules),
        nonterminals=len(bnf.nonterminals),
        productions=len(bnf.productions),
        kappa=kappa_of_bnf(bnf),
        start=grammar.start,
        dialect=grammar.dialect,
        structure=structure(grammar),
        findings=tuple(ambiguity_findings(grammar)),
        lines={r.name: (r.pos.line if r.pos else None) for r in grammar.rules},
    )
