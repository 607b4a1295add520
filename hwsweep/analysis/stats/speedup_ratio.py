"""A speedup ratio and its interval: time for the fixed step budget, baseline / hardware, as the geometric
mean of the per-seed ratios with a t CI on the log ratios (ratio of mean times when no seed is shared)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hwsweep.analysis.stats.distributions import t_ppf
from hwsweep.analysis.stats.t_interval import mean_ci
from hwsweep.analysis.stats.tost import welch_df
from hwsweep.analysis.stats.untested import NEEDS_SEEDS, NO_SPREAD, REPEATS, repeats

GEOMETRIC = "geometric mean of per-seed ratios, t CI on log ratios"
RATIO_OF_MEANS = "ratio of mean times, Welch CI on log means"


def speedup_ci(base: np.ndarray, new: np.ndarray, confidence: float, paired: bool = True):
    """Speedup base / new of times (rows: cases, columns: seeds) with its CI. Paired: the
    geometric mean of per-seed ratios, t CI on the log ratios (n - 1 df); unpaired: the ratio of
    mean times, a Welch CI on the log of the means (delta method). NaN CI below 2 seeds or without spread."""
    base, new = np.atleast_2d(np.asarray(base, float)), np.atleast_2d(np.asarray(new, float))
    if paired:
        logs = np.log(base) - np.log(new)
        est = np.exp(logs.mean(axis=1))
        low, high = mean_ci(logs, confidence)
        spread = np.ptp(logs, axis=1) > 0  # no spread: no interval (one of zero width would be p = 0)
        return est, np.where(spread, np.exp(low), np.nan), np.where(spread, np.exp(high), np.nan)
    mb, mn = base.mean(axis=1), new.mean(axis=1)
    est = mb / mn
    if base.shape[1] < 2 or new.shape[1] < 2:
        return est, np.full(len(est), np.nan), np.full(len(est), np.nan)
    vb = base.var(axis=1, ddof=1) / base.shape[1] / mb**2  # var of log mean, delta method
    vn = new.var(axis=1, ddof=1) / new.shape[1] / mn**2
    se = np.sqrt(vb + vn)
    df = welch_df(vb, vn, base.shape[1], new.shape[1])
    half = np.where(se > 0, t_ppf(0.5 + confidence / 2, df) * se, np.nan)
    return est, est * np.exp(-half), est * np.exp(half)


def cell_seed_times(runs: pd.DataFrame, cell: list[str]) -> dict:
    """Each cell's training time per seed (the mean of a seed's runs; the cell: the columns `cell` names), in one
    groupby: cell key -> its times by seed, in seed order. A groupby per cell cost a millisecond and more, asked
    several times per cell."""
    per_seed = runs.groupby([*cell, "seed"]).train_seconds.mean()
    levels = list(range(len(cell)))
    return {key: times.droplevel(levels) for key, times in per_seed.groupby(level=levels, sort=False)}


def ratio(tr: pd.Series, ts: pd.Series, confidence: float) -> dict:
    """The speedup of a cell over a reference cell, from their cell_seed_times (`ts`, `tr`), with its interval, its
    method and, where it has no interval, the note that says why."""
    shared = sorted(set(tr.index) & set(ts.index))
    if shared:
        est, low, high = speedup_ci(tr.loc[shared].to_numpy(), ts.loc[shared].to_numpy(), confidence, True)
        method, n = GEOMETRIC, len(shared)
    else:
        est, low, high = speedup_ci(tr.to_numpy(), ts.to_numpy(), confidence, False)
        method, n = RATIO_OF_MEANS, 0
    why = "" if np.isfinite(low[0]) else REPEATS if repeats(tr.to_numpy(), ts.to_numpy()) else (
        NO_SPREAD if min(len(tr), len(ts)) >= 2 else NEEDS_SEEDS)  # fmt: skip
    return {"value": float(est[0]), "low": float(low[0]), "high": float(high[0]), "method": method, "n_pairs": n,
            "note": why}  # fmt: skip
