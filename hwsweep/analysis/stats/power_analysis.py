"""Power and seeds needed: the TOST's power at no true difference, and the seeds an equivalence decision
needs, planned with an upper confidence bound of an estimated spread so that the promised power holds
(tests/analysis/test_stats_simulation.py measures it)."""

from __future__ import annotations

import functools
import math

import numpy as np

from hwsweep.analysis.stats.distributions import chi2_ppf, norm_cdf, norm_ppf, t_ppf

POWER = 0.8  # the power seeds_needed promises
SEEDS_CAP = 100  # seeds_needed above this is reported as "more than SEEDS_CAP"
_NODES = (np.arange(96) + 0.5) / 96  # quantile midpoints: the quadrature over the sample variance
SPREAD_BOUND = 0.7  # seeds_needed plans with this one-sided upper confidence bound of an estimated spread


@functools.lru_cache(maxsize=512)
def _power_terms(k: int, alpha: float, paired: bool) -> tuple[np.ndarray, float]:
    """(t * se / sd at each quadrature node, sd of the estimated difference / sd) of the TOST with
    k seeds: the power at spread sd is the mean of 2 Phi((margin / sd - first) / second) - 1."""
    chi = chi2_ppf(_NODES, k - 1) / (k - 1)  # s^2 / sd^2
    if paired:
        return t_ppf(1 - alpha, k - 1) * np.sqrt(chi / k), 1 / math.sqrt(k)
    va, vb = np.meshgrid(chi, chi)
    v = (va + vb) / k
    df = v**2 / ((va / k) ** 2 / (k - 1) + (vb / k) ** 2 / (k - 1))
    return t_ppf(1 - alpha, df) * np.sqrt(v), math.sqrt(2 / k)


def power(n, sd: float, margin: float, alpha: float, paired: bool) -> np.ndarray:
    """Power of the shipped TOST to show equivalence at a true difference of 0, with n seeds
    per hardware (paired: n pairs whose differences have spread `sd`; unpaired: n seeds on each
    hardware, both with spread `sd`, Welch-TOST). Exact up to quadrature: the estimated
    difference is normal, the sample variance(s) chi-square."""
    n = np.atleast_1d(np.asarray(n, float))
    if sd == 0:
        return np.ones(len(n))
    out = np.zeros(len(n))
    for i, k in enumerate(n):
        if k >= 2:
            tse, w = _power_terms(int(k), float(alpha), bool(paired))
            out[i] = np.clip(2 * norm_cdf((margin / sd - tse) / w) - 1, 0, None).mean()
    return out


def spread_bound(sd: float, df: float, level: float = SPREAD_BOUND) -> float:
    """One-sided upper `level` confidence bound of a normal spread estimated as `sd` with df
    degrees of freedom (sd itself where df is infinite: a known spread)."""
    if not math.isfinite(df):
        return sd
    return sd * math.sqrt(df / chi2_ppf(1 - level, df))


def seeds_needed(sd: float, margin: float, alpha: float, paired: bool, df: float = math.inf, target: float = POWER,
                 cap: int = SEEDS_CAP) -> float:  # fmt: skip
    """Fewest seeds per hardware whose TOST shows equivalence with `target` power when the true
    difference is 0 (an assumption: the observed difference is not plugged in); inf above cap.
    A spread estimated with df degrees of freedom is planned with at its SPREAD_BOUND upper
    confidence bound: planned with as it is, the promise holds only about 60-70% of the time
    (tests/analysis/test_stats_simulation.py measures the power the rule achieves)."""
    if not np.isfinite(sd):
        return math.nan
    if sd == 0:
        return 2.0
    sd = spread_bound(sd, df)
    lo, hi = 2, cap
    if power(hi, sd, margin, alpha, paired)[0] < target:
        return math.inf
    while lo < hi:  # power grows with n
        mid = (lo + hi) // 2
        if power(mid, sd, margin, alpha, paired)[0] >= target:
            hi = mid
        else:
            lo = mid + 1
    return float(lo)


def seeds_to_decide(sd: float, d: float, margin: float, alpha: float, paired: bool, df: float = math.inf,
                    slack: float = 0.0, target: float = POWER, cap: int = SEEDS_CAP) -> float:
    """Fewest seeds per hardware that decide a difference observed as `d` either way `target` of the time, were it
    the true one: inside ±margin, the TOST's one-sided (1 - alpha) bound within it; outside (or margin 0: a
    direction), the two-sided (1 - alpha) interval beyond it. `slack`: what the evaluation grid's worst case takes
    off the room (time to target). The spread is planned with at its SPREAD_BOUND upper bound; inf above cap or
    where the difference lies at the margin."""
    if not (np.isfinite(sd) and np.isfinite(d)):
        return math.nan
    inside = abs(d) < margin
    room = (margin - abs(d) if inside else abs(d) - margin) - slack
    if room <= 0:
        return math.inf
    if sd == 0:
        return 2.0
    sd, k = spread_bound(sd, df), 1.0 if paired else 2.0
    z = norm_ppf(target)
    n = np.arange(2, cap + 1)  # every count at once: one t quantile call, not one a count (~100 a metric)
    t = t_ppf(1 - alpha if inside else 1 - alpha / 2, n - 1 if paired else 2 * n - 2)
    enough = np.flatnonzero((t + z) * sd * np.sqrt(k / n) <= room)
    return float(n[enough[0]]) if len(enough) else math.inf


def seeds_words(needed: float) -> str:
    """What seeds_needed promises, in words (the finding's and the headline's)."""
    if needed == math.inf:
        return f"more than {SEEDS_CAP} seeds per hardware would be needed"
    if needed is None or not np.isfinite(needed):
        return "more seeds needed"
    return (f"{int(needed)} seeds per hardware would show equivalence {POWER:.0%} of the time if there is no true "
            "difference")
