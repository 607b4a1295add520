"""Student t confidence intervals of a mean (n - 1 df): the half-width from a std and a count, and the
intervals of many rows of seeds at once."""

from __future__ import annotations

import warnings

import numpy as np

from hwsweep.analysis.stats.distributions import t_ppf


def t_half_width(std, n, confidence: float) -> np.ndarray:
    """Half-width of the Student t CI of a mean from the sample std and count (n - 1 df); NaN below 2."""
    n = np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = t_ppf(0.5 + confidence / 2, np.maximum(n - 1, 1)) * np.asarray(std, float) / np.sqrt(n)
    return np.where(n >= 2, half, np.nan)


def mean_ci(values: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Student t CIs of the mean for each row of `values` (rows: cells, columns: seeds; NaN
    where a row has fewer than 2 values). Exact coverage for normal data at any n."""
    values = np.atleast_2d(np.asarray(values, float))
    n = np.sum(~np.isnan(values), axis=1)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=1)
        half = t_half_width(np.nanstd(values, axis=1, ddof=1), n, confidence)
    return mean - half, mean + half
