"""``gramopt.analyze``: what a person (table) or a tool (JSON) wants to know about a grammar.

Sizes (rules, |N| and productions of the canonical BNF, κ), the structural findings
(nullable, unreachable, unproductive, left recursion, unguarded cycles) and ambiguity
warnings, each with its rule and line; and whether the grammar *stays* ambiguous in a way
that costs per token (``sac_growth``): the exact SAC — new split packed nodes per symbol,
``costmodels.sac`` with Leo's strategy as the runtime runs — along a sampled sentence
grows from the first third to the last. No rewrite removes inherent ambiguity, so the
report then recommends the matrix runtime (``Matcher(grammar, vocab, backend="valiant")``),
whose table holds sets per span and whose per-mask cost does not depend on the number of
parses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from .costmodels import kappa_of_bnf
from .costmodels.engine_shapes import compile_work
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
    sac_growth: dict | None = None  # see sac_growth(); None for Lark grammars or no sentence
    compile_work: int = 0  # costmodels.engine_shapes.compile_work: rules × positions, the engine check's size

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=list)

    def format(self, path: str | None = None) -> str:
        """A readable report: a size table, then one line per finding."""
        s = self.structure
        where = path or "<grammar>"
        limit = _check_limit()
        rows = [
            ("rules", self.rules),
            ("nonterminals |N| (canonical BNF)", self.nonterminals),
            ("productions", self.productions),
            ("kappa", self.kappa),
            ("engine compile work", f"{self.compile_work:,} (the engine check's limit: {limit:,})"),
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
        if self.compile_work > limit:
            issues.append((where, "note", f"its engine compile work is over the engine check's limit: optimize "
                                          f"writes it unchanged for a target checked in the engines "
                                          f"(--max-engine-check-size; --max-engine-check-steps 0)"))
        note = ambiguity_note(self.sac_growth)
        if note:
            issues.append((where, "note", note))
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
        sac_growth=sac_growth(grammar),
        compile_work=compile_work(grammar),
    )


def _check_limit() -> int:
    from .egraph import Limits
    return Limits().engine_check_size


SAC_SAMPLE_SYMBOLS = 48  # symbols of the sampled sentence the SAC is measured along
SAC_GROWTH_FACTOR = 2.0  # last-third mean over first-third mean that counts as growth


def sac_growth(grammar: Grammar, seed: int = 0) -> dict | None:
    """SAC per symbol along sampled text: the longest of a few seeded random derivations,
    and all of them concatenated when that is still a prefix, each cut at
    SAC_SAMPLE_SYMBOLS code points (a cut sentence is a prefix, which the SAC is defined
    on); of the two the more growing figure: mean new split packed nodes in the first and
    the last third, ``growing`` when the last is ≥ SAC_GROWTH_FACTOR × the first and ≥ 4.
    ``ambiguous`` (the grammar stays ambiguous in a way that costs per token) when the SAC
    proxy (costmodels.sac_proxy) counts a feature whose forest grows superlinearly — an
    ambiguous self-concatenation A → A A, infix A → A op A, a repeated nullable item — or
    counts any feature and the measured SAC is growing. A single sample can miss or
    overstate growth; the static features make the verdict stable.
    Deterministic (seeded); None when no sentence of ≥ 12 symbols is found or the
    grammar is Lark's (its sentences are terminal atoms, not text)."""
    import random

    from .costmodels.sac import sac_trace
    from .costmodels.sac_proxy import W_CONCAT, sac_proxy
    from .verify.derivations import heights, random_sentence
    from .verify.symbols import compile_grammar
    try:
        cg = compile_grammar(grammar)
    except Exception:  # noqa: BLE001 - a grammar the sampler cannot compile has no figure
        return None
    if cg.empty or cg.atoms is not None:
        return None
    rng = random.Random(seed)
    hts = heights(cg)
    sentences = []
    for depth in (8, 12, 16, 24, 32) * 6:
        try:
            sentences.append(bytes(random_sentence(cg, rng, depth, hts)).decode("utf-8"))
        except UnicodeDecodeError:
            continue
    sentences.sort(key=len, reverse=True)
    candidates = [sentences[0][:SAC_SAMPLE_SYMBOLS]] if sentences else []
    joined = "".join(sentences)[:SAC_SAMPLE_SYMBOLS]  # S → S S-like languages: sentences concatenate
    if len(joined) > len(candidates[0]) if candidates else False:
        candidates.append(joined)
    best = None
    for text in candidates:
        if len(text) < 12:
            continue
        trace = sac_trace(grammar, text)
        if len(trace) < len(text):  # the concatenation left the prefixes
            continue
        k = len(trace) // 3
        first = sum(trace[:k]) / k
        last = sum(trace[-k:]) / k
        r = {"symbols": len(trace), "first_third": round(first, 2), "last_third": round(last, 2),
             "max": max(trace), "growing": last >= 4 and last >= SAC_GROWTH_FACTOR * max(first, 1.0)}
        if best is None or (r["growing"], r["last_third"]) > (best["growing"], best["last_third"]):
            best = r
    if best is None:
        return None
    proxy = sac_proxy(grammar)
    best["sac_proxy"] = proxy
    best["ambiguous"] = proxy >= W_CONCAT or (proxy > 0 and best["growing"])
    return best


def ambiguity_note(growth: dict | None) -> str:
    """The report line for a grammar whose SAC keeps growing (empty otherwise)."""
    if not growth or not growth["ambiguous"]:
        return ""
    return (f"the grammar stays ambiguous (SAC proxy {growth['sac_proxy']:g}; SAC "
            f"{growth['first_third']:g} → {growth['last_third']:g} split nodes per symbol from the "
            f"first to the last third of a sampled text of {growth['symbols']} symbols): "
            f"Earley-style engines slow down with position; "
            f"no rewrite removes inherent ambiguity: run it on the matrix runtime "
            f"(Matcher(grammar, vocab, backend=\"valiant\"); gramopt bench --engines gramopt-valiant)")
