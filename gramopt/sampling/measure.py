"""Distances between string distributions: total variation, bootstrap intervals, chi-square.

Distributions are ``dict[bytes, float]``; samples are lists of strings. ``tv`` is
½ Σ |p − q| over the union of supports. ``bootstrap_tv`` resamples the samples with
replacement (normal interval); the plug-in TV of N samples is biased upwards by sampling
noise, so compare against ``noise_floor`` (the same statistic for N exact draws from the
target). ``chi_square`` pools the target's cells with expected count < ``min_expected`` into
one cell (and counts samples outside the target's support there too).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch


def tv(p: dict, q: dict) -> float:
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


def bootstrap_tv(samples, target: dict, *, rounds: int = 200, seed: int = 0) -> tuple[float, float, float]:
    """(TV of the samples, lower, upper): a normal bootstrap interval, TV ± 1.96 × the standard
    deviation of the TV of ``rounds`` resamples. (The plug-in TV is biased upwards by the
    sampling noise itself, and more so in a resample, so the resamples' percentiles would sit
    above the estimate; their spread is what measures its uncertainty.)"""
    keys = sorted(set(samples) | set(target))
    pos = {k: i for i, k in enumerate(keys)}
    idx = np.array([pos[s] for s in samples])
    t = np.array([target.get(k, 0.0) for k in keys])
    n = len(idx)
    rng = np.random.default_rng(seed)

    def stat(ix):
        return 0.5 * np.abs(np.bincount(ix, minlength=len(keys)) / n - t).sum()

    sd = float(np.std([stat(idx[rng.integers(0, n, n)]) for _ in range(rounds)]))
    est = float(stat(idx))
    return est, max(0.0, est - 1.96 * sd), est + 1.96 * sd


def sample_target(target: dict, n: int, seed: int = 0) -> list:
    """``n`` exact draws from ``target`` (for the noise floor)."""
    keys = sorted(target)
    p = np.array([target[k] for k in keys])
    rng = np.random.default_rng(seed)
    return [keys[i] for i in rng.choice(len(keys), size=n, p=p / p.sum())]


def noise_floor(target: dict, n: int, *, rounds: int = 200, seed: int = 0) -> tuple[float, float, float]:
    """Mean and 95% range of the plug-in TV of ``n`` exact draws from ``target``."""
    keys = sorted(target)
    p = np.array([target[k] for k in keys])
    p = p / p.sum()
    rng = np.random.default_rng(seed)
    vals = [0.5 * np.abs(rng.multinomial(n, p) / n - p).sum() for _ in range(rounds)]
    return float(np.mean(vals)), float(np.quantile(vals, 0.025)), float(np.quantile(vals, 0.975))


def chi_square(samples, target: dict, *, min_expected: float = 5.0) -> tuple[float, int, float]:
    """(statistic, degrees of freedom, p-value) of the samples against ``target``."""
    n = len(samples)
    c = Counter(samples)
    obs, exp = [], []
    pool_o, pool_e = 0.0, 0.0
    for k in sorted(target):
        e = n * target[k]
        if e >= min_expected:
            obs.append(c.get(k, 0))
            exp.append(e)
        else:
            pool_o += c.get(k, 0)
            pool_e += e
    pool_o += sum(v for k, v in c.items() if k not in target)
    if pool_e > 0 or pool_o > 0:
        obs.append(pool_o)
        exp.append(max(pool_e, 1e-12))
    o, e = np.array(obs, float), np.array(exp, float)
    stat = float(((o - e) ** 2 / e).sum())
    df = len(o) - 1
    if df < 1:
        return stat, df, 1.0
    p = float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                      torch.tensor(stat / 2, dtype=torch.float64)))
    return stat, df, p


def mean_of(samples, fn) -> float:
    return float(np.mean([fn(s) for s in samples])) if samples else math.nan


def expectation(target: dict, fn) -> float:
    return float(sum(p * fn(s) for s, p in target.items()))
