"""The normality the intervals assume: per cell, seeds that lie apart (Grubbs) or look skewed (D'Agostino),
with the seeds to add to check."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hwsweep.analysis.stats.distributions import skewtest_p, t_sf
from hwsweep.analysis.stats.settings import CELL, Settings
from hwsweep.analysis.words import plain

SPREAD_LEVEL = 0.05  # chance that a suite's normal seeds are flagged at all (Bonferroni over all its checks)
SKEW_SEEDS = 8  # the skewness test needs this many seeds
MORE_SEEDS = 5  # at most this many seeds offered to add


def grubbs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Grubbs test of the most extreme value of each row (rows: cases, columns: seeds, n >= 3):
    (its column, p-value). Exact for normal data: G's tail from the t distribution (n - 2 df). Where the
    other values are all equal there is no spread to hold the extreme one against: p = 1. Normal data tie
    with probability 0, so the level holds; a metric counted in steps (accuracy on N samples) ties often,
    and G then sits at its bound (n - 1) / sqrt(n), p ~ 0, however small the difference."""
    values = np.atleast_2d(np.asarray(values, float))
    n = values.shape[1]
    dev = np.abs(values - values.mean(axis=1, keepdims=True))
    column = dev.argmax(axis=1)
    others = np.delete(values, column + n * np.arange(len(values)), axis=None).reshape(len(values), n - 1)
    testable = others.max(axis=1) > others.min(axis=1)  # then the row's sd > 0 too
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(testable, dev.max(axis=1) / values.std(axis=1, ddof=1), 0.0)
        t2 = n * (n - 2) * g**2 / np.maximum((n - 1) ** 2 - n * g**2, 1e-300)
        p = np.minimum(1.0, 2 * n * t_sf(np.sqrt(t2), n - 2))
    return column, np.where(testable, p, 1.0)


def spread_check(runs: pd.DataFrame, settings: Settings = Settings()) -> pd.DataFrame:
    """Per cell, `seed_spread`: where its seeds of a metric (or of the log training time) have an
    outlier (Grubbs) or, from SKEW_SEEDS seeds, look skewed (D'Agostino), named with the seed, and
    the seeds to add; '' elsewhere. Every check of a suite (all its cells) shares SPREAD_LEVEL
    (Bonferroni), so a suite of normal seeds is flagged anywhere at most that often
    (tests/analysis/test_stats_simulation.py). With 3 seeds only a seed far apart shows (Grubbs' statistic is
    bounded by (n - 1) / sqrt(n))."""
    quantities = [m for m in settings.metrics if m in runs] + ["train_seconds"]
    top = int(runs.seed.max()) + 1 if len(runs) else 0
    cells = []  # (key, sub, checks: (name, seeds, values))
    for key, sub in runs.groupby(CELL, sort=False):
        sub = sub.sort_values("seed")
        checks = []
        for q in quantities:
            values = pd.to_numeric(sub[q], errors="coerce")
            ok = values.notna().to_numpy()
            if ok.sum() >= 3:
                v = values.to_numpy(float)[ok]
                checks.append(("training time" if q == "train_seconds" else q.replace("_", " "), sub.seed.to_numpy()[ok],
                               np.log(v) if q == "train_seconds" else v))  # fmt: skip
        cells.append((key, sub, checks))
    tests: dict = {}  # suite -> its checks, all cells together
    for key, _, checks in cells:
        tests[key[0]] = tests.get(key[0], 0) + len(checks) + sum(len(v) >= SKEW_SEEDS for *_, v in checks)
    rows = []
    for key, sub, checks in cells:
        share = f"{tests[key[0]]} checks of the suite share {SPREAD_LEVEL:.0%}"
        found = []
        for name, seeds, values in checks:
            column, p = grubbs(values[None, :])
            if p[0] * tests[key[0]] < SPREAD_LEVEL:
                found.append(f"seed {seeds[column[0]]} lies apart in {name} (Grubbs p = {plain(p[0], 1)}, {share})")
            if len(values) >= SKEW_SEEDS and skewtest_p(values) * tests[key[0]] < SPREAD_LEVEL:
                found.append(f"{name} looks skewed over the seeds ({share})")
        more = ", ".join(str(s) for s in range(top, top + min(sub.seed.nunique(), MORE_SEEDS)))
        text = "; ".join(found) + f": the intervals assume roughly normal seeds; add seeds {more} to check" if found else ""
        rows.append(dict(zip(CELL, key)) | {"seed_spread": text})
    return pd.DataFrame(rows, columns=CELL + ["seed_spread"])
