"""The equivalence test's vectorised cores (rows: cases, columns: seeds): the difference, its standard error
and df, paired (per-seed differences) or Welch; and decide(): TOST at +-margin, the t-test of no difference and
the verdict."""

from __future__ import annotations

import math

import numpy as np

from hwsweep.analysis.stats.distributions import t_cdf, t_ppf, t_sf


def paired_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean per-seed difference (a - b), its standard error and n - 1 df; a[:, i] and b[:, i]
    are the same seed."""
    d = np.atleast_2d(a) - np.atleast_2d(b)
    n = d.shape[1]
    return d.mean(axis=1), d.std(axis=1, ddof=1) / math.sqrt(n), np.full(len(d), n - 1.0)


def welch_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Difference of means (a - b), its standard error and Welch-Satterthwaite df."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    na, nb = a.shape[1], b.shape[1]
    va, vb = a.var(axis=1, ddof=1) / na, b.var(axis=1, ddof=1) / nb
    return a.mean(axis=1) - b.mean(axis=1), np.sqrt(va + vb), welch_df(va, vb, na, nb)


def welch_df(va, vb, na: int, nb: int) -> np.ndarray:
    """Welch-Satterthwaite df of a difference whose two squared standard errors are va and vb, from na and nb
    values; inf where both are 0 (no spread: the df does not matter)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(va + vb > 0, (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)), np.inf)


def decide(d, se, df, margin: float, alpha: float) -> dict:
    """Tests of one difference (arrays of cases): TOST at +-margin, the t-test of 0 and the
    verdict. equivalent: TOST rejects (the 1 - 2 alpha CI lies inside the margin); different:
    the 1 - alpha CI lies wholly beyond the margin; inconclusive otherwise. se 0: no p-value (NaN)."""
    d, se, df = (np.asarray(x, float) for x in (d, se, df))
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(se > 0, se, 1.0)
        p_lower = t_sf((d + margin) / safe, df)  # H0: d <= -margin
        p_upper = t_cdf((d - margin) / safe, df)  # H0: d >= +margin
        # No spread (se 0) gives no p-value: a test would say p = 0 from nothing. Bitwise equal pairs (every
        # difference exactly 0) are equivalent without one; any other zero spread is inconclusive.
        p_tost = np.where(se > 0, np.maximum(p_lower, p_upper), np.nan)
        p_diff = np.where(se > 0, 2 * t_sf(np.abs(d) / safe, df), np.nan)
        t1 = np.where(se > 0, t_ppf(1 - alpha, df), 0.0)
        t2 = np.where(se > 0, t_ppf(1 - alpha / 2, df), 0.0)
    tested = se > 0
    exact = tested | (d == 0)  # bitwise equal pairs: the difference is 0, not estimated
    ci_low, ci_high = np.where(exact, d - t2 * se, np.nan), np.where(exact, d + t2 * se, np.nan)
    verdict = np.where(tested & (p_tost < alpha) | ~tested & (d == 0) & (margin > 0), "equivalent",
                       np.where(tested & ((ci_low > margin) | (ci_high < -margin)), "different", "inconclusive"))  # fmt: skip
    return {"difference": d, "se": se, "df": df, "ci_low": ci_low, "ci_high": ci_high,
            "tost_ci_low": np.where(exact, d - t1 * se, np.nan), "tost_ci_high": np.where(exact, d + t1 * se, np.nan),
            "p_difference": p_diff, "p_tost": p_tost, "verdict": verdict,
            "shifted": (verdict == "equivalent") & (p_diff < alpha)}  # fmt: skip
