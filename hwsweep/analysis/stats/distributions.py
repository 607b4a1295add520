"""The distribution functions the statistics use (Student t, normal, chi-squared) and D'Agostino's skewness test,
from scipy.special: the functions scipy.stats calls underneath, with its answers at the edges (NaN for a df <= 0
or a probability outside [0, 1]; a probability of 0 or 1 at the ends of the support), without loading scipy.stats.
Its import is ~1 CPU-s, the largest constant cost of a suite's aggregate and of status (issue 71)."""

from __future__ import annotations

import numpy as np
import scipy  # lazy submodules: see the package's docstring


def _valid(values, valid):
    """values where valid, NaN elsewhere; a number for numbers, as scipy.stats answers."""
    out = np.where(valid, values, np.nan)
    return out[()] if out.ndim == 0 else out


def _probability(q) -> np.ndarray:
    return (q >= 0) & (q <= 1)


def t_cdf(x, df):
    x, df = np.asarray(x, float), np.asarray(df, float)
    with np.errstate(invalid="ignore"):
        return _valid(scipy.special.stdtr(df, x), df > 0)


def t_sf(x, df):
    x, df = np.asarray(x, float), np.asarray(df, float)
    with np.errstate(invalid="ignore"):
        return _valid(scipy.special.stdtr(df, -x), df > 0)


def t_ppf(q, df):
    q, df = np.asarray(q, float), np.asarray(df, float)
    with np.errstate(invalid="ignore"):
        inner = scipy.special.stdtrit(df, q)  # the support's ends as scipy.stats says them: stdtrit(df, 0) is +inf
        return _valid(np.where(q == 0, -np.inf, np.where(q == 1, np.inf, inner)), (df > 0) & _probability(q))


def norm_cdf(x):
    return _valid(scipy.special.ndtr(np.asarray(x, float)), True)


def norm_ppf(q):
    q = np.asarray(q, float)
    return _valid(scipy.special.ndtri(q), _probability(q))


def chi2_ppf(q, df):
    q, df = np.asarray(q, float), np.asarray(df, float)
    with np.errstate(invalid="ignore"):
        return _valid(2 * scipy.special.gammaincinv(df / 2, q), (df > 0) & _probability(q))


def skewtest_p(values) -> float:
    """Two-sided p-value of D'Agostino's test that the skewness of normal data is 0 (scipy.stats.skewtest's, its
    steps in its order) for one sample of >= 8 values; NaN where they do not vary."""
    a = np.asarray(values, float)
    if len(a) < 8:
        raise ValueError(f"the skewness test needs 8 values, not {len(a)}")
    mean = np.mean(a, keepdims=True)
    centred = a - mean
    m2, m3 = np.mean(centred**2), np.mean(centred**2 * centred)
    with np.errstate(all="ignore"):
        b2 = np.where(m2 <= (np.finfo(float).eps * mean[0]) ** 2, np.nan, m3 / m2**1.5)
        n = np.float64(len(a))
        y = b2 * np.sqrt(((n + 1) * (n + 3)) / (6.0 * (n - 2)))
        beta2 = 3.0 * (n**2 + 27 * n - 70) * (n + 1) * (n + 3) / ((n - 2.0) * (n + 5) * (n + 7) * (n + 9))
        w2 = -1 + np.sqrt(2 * (beta2 - 1))
        delta, alpha = 1 / np.sqrt(0.5 * np.log(w2)), np.sqrt(2.0 / (w2 - 1))
        y = np.where(y == 0, 1.0, y)
        z = delta * np.log(y / alpha + np.sqrt((y / alpha) ** 2 + 1))
        return float(2 * scipy.special.ndtr(-np.abs(z)))
