"""The engines a benchmark drives (adapters live in ``gramopt.engines``), and the figures per
run of masks.

    DRIVERS["xgrammar"](env)     an adapter (``gramopt.engines.ENGINES``)
    TARGET_OF[engine]            the optimizer target each engine is measured under
    percentiles(times_s)         p50 / p95 / max / mean in microseconds

A trajectory is a sample text tokenized with the vocabulary's tokenizer, cut at
``max_tokens``, plus the stop token when the whole sample fit. At every step the engine
fills the mask for the next token (the timed call), then accepts the token; an engine
that rejects a token of the trajectory raises ``EngineError`` (the grammar and the engine
disagree about the sample: reported, not timed).
"""

from __future__ import annotations

import numpy as np

from ..engines import ENGINES as DRIVERS
from ..engines import EngineError, Env
from ..runtime.tokenize import TokenizeError, Tokenizer

ENGINES = tuple(n for n, e in DRIVERS.items() if e.default)  # measured unless others are named
TARGET_OF = {name: eng.target for name, eng in DRIVERS.items()}


def engine_names(text: str) -> tuple[str, ...]:
    """The engines named in a comma-separated list (``--engines``); an unknown name is a
    ``GrammarError`` that lists the known ones."""
    from ..grammar import GrammarError

    names = tuple(e.strip() for e in text.split(",") if e.strip())
    unknown = [e for e in names if e not in DRIVERS]
    if unknown:
        raise GrammarError(f"unknown engine(s) {', '.join(unknown)} (known: {', '.join(DRIVERS)})")
    return names


def percentiles(times_s) -> dict:
    """p50/p95/max in microseconds over all steps (empty → zeros)."""
    a = np.asarray(list(times_s), float) * 1e6
    if a.size == 0:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0, "mean": 0.0}
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max()), "mean": float(a.mean())}


__all__ = ["DRIVERS", "ENGINES", "TARGET_OF", "EngineError", "Env", "TokenizeError", "Tokenizer", "engine_names",
           "percentiles"]
