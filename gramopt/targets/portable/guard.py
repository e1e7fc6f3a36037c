"""The portable target's guard: a candidate is kept only where no engine's cost grows.

    GUARD.worse(original, candidate) -> str | None   why the candidate may be slower (None: keep it)

Engines prefer different forms of one language (xgrammar decides a right-recursive "text
until" rule with a lookahead in its mask cache, llguidance runs the same part as a star in its
lexer: ``benchmarks/results``), so no single rewrite is faster everywhere. The guard compares
the candidate with the input under every engine's static cost (``costmodels.engine_shapes``:
its calibrated model's cost and the counts of the shapes measured to make it slow) and
rejects the candidate when any component grew for any engine. It is deterministic (counts of
the grammar, no timing) and conservative: a rewrite whose effect the counts cannot vouch for
is not taken: the pass manager then keeps the input with only the target's safety fix-ups
(``passes._judged``; the clean-ups alone are no safer for every engine).
"""

from __future__ import annotations

from ...costmodels.calibration import engine_node_weights
from ...costmodels.engine_shapes import ENGINE_SHAPES, engine_costs, worse_for
from ...grammar import Grammar


class NoSlowerGuard:
    """``worse``: the first components where the candidate costs more than the original,
    as one line (None when it costs no engine more)."""

    name = "no-slower"

    def weights(self) -> dict:
        out = {}
        for e in ENGINE_SHAPES:
            try:
                out[e] = engine_node_weights(e).weights
            except OSError:  # no shipped model for this engine: generic weights
                out[e] = None
        return out

    def worse(self, original: Grammar, candidate: Grammar) -> str | None:
        w = self.weights()
        grew = worse_for(engine_costs(original, w), engine_costs(candidate, w))
        if not grew:
            return None
        shown = [f"{e} {what} {_num(b)}→{_num(a)}" for e, what, b, a in grew[:4]]
        return ", ".join(shown) + (f" (+{len(grew) - 4} more)" if len(grew) > 4 else "")


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


GUARD = NoSlowerGuard()

__all__ = ["GUARD", "NoSlowerGuard"]
