"""The no-slower guard: a candidate is kept only where no engine's static cost grows (and,
for the portable target, where it is clearly faster for one).

    NoSlowerGuard(engines, strict=False, baseline=None, clear=False).worse(original, candidate, models=None)
                     -> str | None   (``models``: engine -> a cost model the user named, else the shipped one)
    GUARD            every engine, clearly faster (the portable target)
    llamacpp_guard   llama.cpp alone, strict, against the input with the fix-ups (llama.cpp target)

Engines prefer different forms of one language (xgrammar decides a right-recursive "text
until" rule with a lookahead in its mask cache, llguidance runs the same part as a star in its
lexer: ``benchmarks/results``), so no single rewrite is faster everywhere. The guard compares
the candidate with a reference form (the input, or what the target would write without its
e-graph: ``baseline``) under each of its engines' static costs (``costmodels.engine_shapes``:
the engine's calibrated model's cost and the counts of the shapes measured to make it slow)
and rejects the candidate when any component grew for any of its engines; a ``strict`` guard
also rejects one whose model cost is not lower; a ``clear`` guard (the portable target's) one
that no engine gains from clearly (``engine_shapes.clearly_better_for``: a model cost at most
``CLEAR_GAIN`` of the reference's, or a slow shape fewer; smaller static gains measured as
noise, 0.88–1.08×). A ``clear``
guard keeps a candidate that costs every engine exactly what the reference does in fewer
rules: what went is rules the start does not reach (or their duplicates), which engines
compile but never step through.

The portable target's reference (``GUARD``) is the input *without its redundancy*
(``without_redundancy``: pass-through and duplicated rules merged, split literals fused,
unreachable rules dropped, then the fix-ups) — also what the target keeps when the candidate
is rejected (``Target.reduce``). Removing redundancy is never judged: it adds no state, no
step and no shape an engine pays for; judging it against the raw input rejected it for
"shape" counts that the redundancy itself had hidden (a duplicated rule is one shared rule
less; a left-recursive helper fixed up as a star is one star group more), and 25 of 34
obfuscated corpus grammars came back with more rules than their clean form. What the guard
still judges is what the optimizer adds beyond that: a right-recursive rule rewritten as a
star group (xgrammar: 87 µs → 246 ms p95 on its converter's string rule; lookahead rules
are pinned and never rewritten at all, ``Rule.pinned``), new shared or nullable references,
plus-of-class loops.
It is deterministic (counts of the grammar, no timing) and conservative: a rewrite whose
effect the counts cannot vouch for is not taken: the pass manager then keeps the input with
only the target's fix-ups (``passes._judged``; the clean-ups alone are no safer for every engine).
"""

from __future__ import annotations

from typing import Callable

from ..costmodels.calibration import engine_node_weights
from ..costmodels.engine_shapes import CLEAR_GAIN, ENGINE_SHAPES, clearly_better_for, engine_costs, worse_for
from ..grammar import Grammar
from .portable import fixup as portable_fixup, reduce as portable_reduce


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
        self.accepted = (("clearly faster, " if clear else "") + f"{engine} static cost grows"
                         + (f" and its model cost is below {against}'s (or it is {against})" if strict else ""))

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
    duplicated rules, split literals, unreachable rules: ``portable.reduce``) and with the
    target's fix-ups — what it keeps when an output is rejected."""
    return portable_fixup(portable_reduce(g))


GUARD = NoSlowerGuard(clear=True, baseline=without_redundancy, against="the input without its redundancy")


def llamacpp_guard(fixed_up: Callable[[Grammar], Grammar]) -> NoSlowerGuard:
    """The llama.cpp target's guard. What moves llama.cpp's mask time is the form's parse
    stacks and the order it tries them (``benchmarks/llamacpp_profile.py``): the order is the
    target's fix-up, which applies to any form; so the e-graph's output is kept only where
    llama.cpp's model prices it lower than the input with the same fix-ups (``fixed_up``),
    the form written otherwise."""
    return NoSlowerGuard(("llama.cpp",), strict=True, baseline=fixed_up,
                         against="the fixed-up input", name="llama.cpp-cost")


__all__ = ["GUARD", "NoSlowerGuard", "llamacpp_guard"]
