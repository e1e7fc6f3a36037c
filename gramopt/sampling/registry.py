"""Estimators by name: ``make_estimator("exact" | "onestep" | "mc" | "uniform", ...)``.

``"none"`` is an alias of ``"uniform"`` (masked sampling). ``"exact"`` enumerates the viable
prefixes within ``max_tokens`` (raises ``ExactTooLarge`` beyond ``max_nodes``); ``"mc"`` takes
``k`` and ``horizon`` (default: 8 rollouts to the end of the budget).
"""

from __future__ import annotations

from .exact import Exact, ValueTree
from .montecarlo import MonteCarlo
from .onestep import OneStep
from .uniform import Uniform

NAMES = ("uniform", "onestep", "mc", "exact")


def make_estimator(name: str, *, model=None, new_matcher=None, bos: int = 0, eos_ids=(), max_tokens: int = 64,
                   temperature: float = 1.0, seed: int = 0, k: int = 8, horizon: int | None = None,
                   max_nodes: int = 2_000_000):
    name = {"none": "uniform", "montecarlo": "mc"}.get(name, name)
    if name == "uniform":
        return Uniform()
    if name == "onestep":
        return OneStep()
    if model is None or new_matcher is None:
        raise ValueError(f"estimator '{name}' needs the model and a matcher factory")
    if name == "mc":
        return MonteCarlo(model, new_matcher, k=k, horizon=max_tokens if horizon is None else horizon, bos=bos,
                          temperature=temperature, seed=seed, max_tokens=max_tokens)
    if name == "exact":
        return Exact(ValueTree(model, new_matcher(), bos=bos, eos_ids=eos_ids, max_tokens=max_tokens,
                               max_nodes=max_nodes, temperature=temperature))
    raise ValueError(f"unknown estimator '{name}' (choose from {', '.join(NAMES)})")
