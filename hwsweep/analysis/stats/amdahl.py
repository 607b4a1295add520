"""Amdahl's law: the serial fraction fitted to every run's time (the reference count's time is data, with
an error) and the speedup it predicts."""

from __future__ import annotations

import math

import numpy as np

from hwsweep.analysis.stats.distributions import t_ppf

GOLDEN = (math.sqrt(5) - 1) / 2


def amdahl_fit(devices: np.ndarray, seconds: np.ndarray, confidence: float = 0.95) -> dict:
    """Amdahl's serial fraction f from every run's time (rows: cases, columns: runs; `devices`: each
    column's device count relative to the type's smallest). Model: log t = c + log(f + (1 - f) / N) +
    noise of one spread: c, the smallest count's log time, is fitted like f, so its error carries into
    f's (the reference point is data with an error, not a fixed point of the curve). Least squares,
    f in [0, 1] by golden section with c profiled out; its standard error from the Jacobian and a t
    interval with runs - 2 df (tests/analysis/test_stats_simulation.py measures its coverage)."""
    x = np.asarray(devices, float)
    y = np.log(np.atleast_2d(np.asarray(seconds, float)))

    def rss(f):  # f: (cases,) -> residual sum of squares with c at its optimum
        r = y - np.log(f[:, None] + (1 - f[:, None]) / x)
        return ((r - r.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)

    lo, hi = np.zeros(len(y)), np.ones(len(y))
    for _ in range(60):  # the bracket shrinks to 1e-12
        a, b = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
        left = rss(a) <= rss(b)
        hi, lo = np.where(left, b, hi), np.where(left, lo, a)
    f = (lo + hi) / 2
    m = x.size
    j = (1 - 1 / x) / (f[:, None] + (1 - f[:, None]) / x)  # d log t / d f
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(rss(f) / (m - 2) / ((j - j.mean(axis=1, keepdims=True)) ** 2).sum(axis=1))
    half = t_ppf(0.5 + confidence / 2, m - 2) * se
    return {"f": f, "se": se, "low": np.clip(f - half, 0, 1), "high": np.clip(f + half, 0, 1)}


def amdahl_speedup(f: float, n: float) -> float:
    return 1 / (f + (1 - f) / n)
