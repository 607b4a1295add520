"""Statistics over seeds and hardware: pure functions on DataFrames, vectorised cores.

- seed_summary: per suite x variant x hardware and metric, n / mean / std / standard error /
  t-based CI of the mean (Student, n - 1 df) / min / max.
- equivalence: each hardware against the baseline, per compared metric: paired TOST on the
  per-seed differences when both ran the same seeds (Welch-TOST otherwise), the difference and
  its CI, the t-test of "no difference" (a shift inside the margin is reported), a verdict, the
  power of these seeds and the seeds an equivalence decision needs (t-based power at an assumed
  true difference of 0). The overall verdict of a hardware is an intersection-union test over
  the primary metrics: equivalent only when every primary metric is.
- speedup: time for the fixed step budget, baseline / hardware, as the geometric mean of the
  per-seed ratios with a t CI on the log ratios (ratio of mean times when no seed is shared);
  device-hours and cost ratios derived from that speedup (one kind of mean), with its interval;
  parallel efficiency only within one device type against a smaller device count of it, and
  Amdahl's serial fraction fitted to every run's time (the reference count's time is data).
- power, seeds_needed: TOST power at no true difference; the seeds needed plan with an upper
  confidence bound of an estimated spread, so that the promised power holds (simulation tests).

Every function works for whatever metrics the config declares (Settings); no name is listed here.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy  # its submodules load on first use: scipy.stats (~0.4 s) only where a statistic is computed

from hwsweep.analysis.words import amount, finite, in_words, side, span
from hwsweep.contracts.records import SPEED_COLUMNS, STARTUP_COLUMNS

CELL = ["suite", "variant", "hardware"]
POWER = 0.8  # the power seeds_needed promises
SEEDS_CAP = 100  # seeds_needed above this is reported as "more than SEEDS_CAP"
CI_METHOD = "t (Student, n-1 df)"
PAIRED = "paired TOST"
WELCH = "Welch TOST"
GEOMETRIC = "geometric mean of per-seed ratios, t CI on log ratios"
RATIO_OF_MEANS = "ratio of mean times, Welch CI on log means"


@dataclass(frozen=True)
class Settings:
    """How to compare: the config's `statistics` and the declared metrics (names in order,
    and the equivalence margin of each metric that has one)."""

    confidence: float = 0.95
    resamples: int = 9999  # kept for configs that set it; the shipped intervals are t-based
    seed: int = 0
    metrics: tuple = ()  # every declared metric, in order
    margins: dict = field(default_factory=dict)  # name -> margin, for the metrics that are compared
    primary: tuple = ()  # the compared metrics that decide a hardware's overall verdict
    variant_primary: tuple = ()  # every primary metric: a variant's overall verdict (a difference needs no margin)
    goals: dict = field(default_factory=dict)  # name -> "max" | "min"
    scales: dict = field(default_factory=dict)  # name -> 100 for shares (bounds [0, 1]: written in points)
    bounds: dict = field(default_factory=dict)  # name -> (low, high), for the metrics that declare them

    @classmethod
    def of(cls, statistics: dict, metrics) -> "Settings":
        compared = [m for m in metrics if m.margin is not None]
        scales = {m.name: 100.0 for m in metrics if m.bounds is not None and list(m.bounds) == [0, 1]}
        return cls(**statistics, metrics=tuple(m.name for m in metrics), margins={m.name: m.margin for m in compared},
                   primary=tuple(m.name for m in compared if m.primary),
                   variant_primary=tuple(m.name for m in metrics if m.primary), goals={m.name: m.goal for m in metrics},
                   scales=scales, bounds={m.name: tuple(m.bounds) for m in metrics if m.bounds is not None})  # fmt: skip

    @property
    def alpha(self) -> float:
        return 1 - self.confidence


# -- seed variance -----------------------------------------------------------------------


def t_half_width(std, n, confidence: float) -> np.ndarray:
    """Half-width of the Student t CI of a mean from the sample std and count (n - 1 df); NaN below 2."""
    n = np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        # stdtrit is t.ppf (the same function underneath) without loading scipy.stats: the figures job, which needs
        # only this, takes ~0.25 CPU-s less (status and aggregate load scipy.stats for their tests anyway)
        half = scipy.special.stdtrit(np.maximum(n - 1, 1), 0.5 + confidence / 2) * np.asarray(std, float) / np.sqrt(n)
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


def _describe(groups, column: str, settings: Settings) -> pd.DataFrame:
    out = groups[column].agg(["count", "mean", "std", "min", "max"])
    out["se"] = out["std"] / np.sqrt(out["count"])
    half = t_half_width(out["std"], out["count"], settings.confidence)
    out["ci_low"] = np.where(out["count"] >= 2, out["mean"] - half, np.nan)
    out["ci_high"] = np.where(out["count"] >= 2, out["mean"] + half, np.nan)
    out["ci_note"] = np.where(out["count"] >= 2, "", "CI not available: fewer than 2 seeds")
    out = out.rename(columns={"count": "n"})
    return out.add_prefix(f"{column}_")


def seed_summary(runs: pd.DataFrame, settings: Settings = Settings()) -> pd.DataFrame:
    grouped = runs.groupby(CELL, sort=False)
    out = grouped.agg(
        n_seeds=("seed", "nunique"),
        world_size=("world_size", "first"),
        gpu_type=("gpu_type", "first"),
        samples_per_second=("samples_per_second", "mean"),
        train_seconds=("train_seconds", "mean"),
        startup_seconds=("startup_seconds", "mean"),
        eval_seconds=("eval_seconds", "mean"),
    )
    for column in STARTUP_COLUMNS + SPEED_COLUMNS:  # absent from a runs.csv written before them
        if column in runs:
            values = pd.to_numeric(runs[column], errors="coerce")
            out[column] = values.groupby([runs[c] for c in CELL], sort=False).mean()
    out["ci_method"] = CI_METHOD
    if "strategy" in runs:  # ddp or fsdp: part of what the devices are (absent from a runs.csv written before it)
        out["strategy"] = grouped["strategy"].first()
    if "seeded" in runs:  # a script without a seed flag: the seed spread is run-to-run noise only
        out["seeded"] = grouped["seeded"].all()
    if "checks" in runs:  # where a run did not follow its plan: carried to the comparison and the report
        out["checks"] = grouped["checks"].agg(lambda c: "; ".join(sorted({x for x in c if isinstance(x, str) and x})))
    parts = [out] + [_describe(grouped, m, settings) for m in settings.metrics if m in runs]
    return pd.concat(parts, axis=1).reset_index()


# -- equivalence: vectorised cores (rows: cases, columns: seeds) ---------------------------


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
    se = np.sqrt(va + vb)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(se > 0, (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)), np.inf)
    return a.mean(axis=1) - b.mean(axis=1), se, df


def decide(d, se, df, margin: float, alpha: float) -> dict:
    """Tests of one difference (arrays of cases): TOST at +-margin, the t-test of 0 and the
    verdict. equivalent: TOST rejects (the 1 - 2 alpha CI lies inside the margin); different:
    the 1 - alpha CI lies wholly beyond the margin; inconclusive otherwise. se 0: no p-value (NaN)."""
    d, se, df = (np.asarray(x, float) for x in (d, se, df))
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(se > 0, se, 1.0)
        p_lower = scipy.stats.t.sf((d + margin) / safe, df)  # H0: d <= -margin
        p_upper = scipy.stats.t.cdf((d - margin) / safe, df)  # H0: d >= +margin
        # No spread (se 0) gives no p-value: a test would say p = 0 from nothing. Bitwise equal pairs (every
        # difference exactly 0) are equivalent without one; any other zero spread is inconclusive.
        p_tost = np.where(se > 0, np.maximum(p_lower, p_upper), np.nan)
        p_diff = np.where(se > 0, 2 * scipy.stats.t.sf(np.abs(d) / safe, df), np.nan)
        t1 = np.where(se > 0, scipy.stats.t.ppf(1 - alpha, df), 0.0)
        t2 = np.where(se > 0, scipy.stats.t.ppf(1 - alpha / 2, df), 0.0)
    tested = se > 0
    exact = tested | (d == 0)  # bitwise equal pairs: the difference is 0, not estimated
    ci_low, ci_high = np.where(exact, d - t2 * se, np.nan), np.where(exact, d + t2 * se, np.nan)
    verdict = np.where(tested & (p_tost < alpha) | ~tested & (d == 0) & (margin > 0), "equivalent",
                       np.where(tested & ((ci_low > margin) | (ci_high < -margin)), "different", "inconclusive"))  # fmt: skip
    return {"difference": d, "se": se, "df": df, "ci_low": ci_low, "ci_high": ci_high,
            "tost_ci_low": np.where(exact, d - t1 * se, np.nan), "tost_ci_high": np.where(exact, d + t1 * se, np.nan),
            "p_difference": p_diff, "p_tost": p_tost, "verdict": verdict,
            "shifted": (verdict == "equivalent") & (p_diff < alpha)}  # fmt: skip


# -- interval data: each value known only to lie in [low, high] (time to target between two evaluations) ----

CORNERS_UP_TO = 12  # box dimensions whose 2^n corners are enumerated; a looser bound (still valid) above


def _corners(n: int) -> np.ndarray:
    """Every corner of an n-dimensional unit box (rows of 0/1)."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(float)


def _corner_moments(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample variance (ddof 1) of x at every corner of the box [lo, hi] (rows: cases):
    (cases, 2^n) each, from sums so that no (cases, 2^n, n) array is formed."""
    centre = ((lo + hi) / 2).mean(axis=1, keepdims=True)  # centred first: no cancellation in the sums
    lo, width = lo - centre, hi - lo
    k, n = _corners(lo.shape[1]), lo.shape[1]
    total = lo.sum(axis=1, keepdims=True) + width @ k.T
    squares = (lo**2).sum(axis=1, keepdims=True) + (2 * lo * width) @ k.T + (width**2) @ k.T
    mean = total / n
    return mean + centre, np.maximum(squares - n * mean**2, 0.0) / (n - 1)


BALL_DIRECTIONS = 32  # the outer polygon of _ball_corners: its excess over the circle is 1 / cos(pi / 128) - 1, 0.03%


def _ball_corners(centre, spread, first, second) -> tuple:
    """Virtual corners (upper means, se, lower means, se) for centre ± (spread t + sqrt(first^2 + second^2 t^2)):
    the square root written as the largest of BALL_DIRECTIONS lines of an outer polygon, so that the largest
    mean + t se over them still bounds it at every t >= 0."""
    step = math.pi / 2 / BALL_DIRECTIONS
    angle = (np.arange(BALL_DIRECTIONS) + 0.5) * step
    stretch = 1 / math.cos(step / 2)
    shift, se = first * np.cos(angle) * stretch, spread + second * np.sin(angle) * stretch
    return centre + shift, se, centre - shift, se


def _midpoints_and_radius(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (lo + hi) / 2, np.sqrt((((hi - lo) / 2) ** 2).sum(axis=1, keepdims=True))


def _ball_bound(lo: np.ndarray, hi: np.ndarray) -> tuple:
    """Paired differences above CORNERS_UP_TO seeds: virtual corners whose mean + t se bounds mean + t sd / sqrt(n)
    over the box. x = m + e with m the midpoints and e inside the ball of radius W = |half-widths|: sd(x) <= sd(m)
    + |P e| / sqrt(n - 1) (P removes the mean), and mean(e) + t |P e| / sqrt(n (n - 1)) <= W sqrt(1/n + t^2 /
    (n (n - 1))) (Cauchy-Schwarz). Nearly exact where the intervals are alike (one evaluation grid)."""
    n = lo.shape[1]
    mid, radius = _midpoints_and_radius(lo, hi)
    return _ball_corners(mid.mean(axis=1, keepdims=True), mid.std(axis=1, ddof=1, keepdims=True) / math.sqrt(n),
                         radius / math.sqrt(n), radius / math.sqrt(n * (n - 1)))  # fmt: skip


def _ball_bound_welch(a_lo, a_hi, b_lo, b_hi) -> tuple:
    """_ball_bound for two unpaired sides and Welch's se: with C = Wa^2 / (na (na - 1)) + Wb^2 / (nb (nb - 1)) and
    K = na + nb - 2, mean(ea) - mean(eb) + t sqrt(|P ea|^2 / (na (na - 1)) + |P eb|^2 / (nb (nb - 1))) is at most
    sqrt(C (K + t^2)) over both balls (Lagrange), and the midpoints' part adds to it by Minkowski."""
    (ma, ra), (mb, rb) = _midpoints_and_radius(a_lo, a_hi), _midpoints_and_radius(b_lo, b_hi)
    na, nb = ma.shape[1], mb.shape[1]
    c = np.sqrt(ra**2 / (na * (na - 1)) + rb**2 / (nb * (nb - 1)))
    spread = np.sqrt(ma.var(axis=1, ddof=1, keepdims=True) / na + mb.var(axis=1, ddof=1, keepdims=True) / nb)
    return _ball_corners(ma.mean(axis=1, keepdims=True) - mb.mean(axis=1, keepdims=True), spread,
                         c * math.sqrt(na + nb - 2), c)  # fmt: skip


def interval_moments(a_lo, a_hi, b_lo, b_hi, paired: bool) -> tuple:
    """The mean difference a - b and its standard error over the box the true values lie in (rows: cases,
    columns: seeds; paired: a[:, i] and b[:, i] are one seed): (upper means, their se, lower means, their se,
    df), the first pair to bound the difference from above, the second from below. mean + t se is convex
    in the true values, so its largest value over the box lies at a corner: the corners are enumerated up
    to CORNERS_UP_TO dimensions (exact), above that a bound, nearly exact on one evaluation grid (_ball_bound,
    _ball_bound_welch). Unpaired:
    Welch's standard error with its smallest df (min(n_a, n_b) - 1), so that t is one number for the box."""
    a_lo, a_hi, b_lo, b_hi = (np.atleast_2d(np.asarray(x, float)) for x in (a_lo, a_hi, b_lo, b_hi))
    if paired:
        lo, hi = a_lo - b_hi, a_hi - b_lo
        n = lo.shape[1]
        if n <= CORNERS_UP_TO:
            mean, var = _corner_moments(lo, hi)
            se = np.sqrt(var / n)
            return mean, se, mean, se, n - 1.0
        return (*_ball_bound(lo, hi), n - 1.0)
    na, nb = a_lo.shape[1], b_lo.shape[1]
    df = min(na, nb) - 1.0
    if na + nb <= CORNERS_UP_TO:
        ma, va = _corner_moments(a_lo, a_hi)
        mb, vb = _corner_moments(b_lo, b_hi)
        mean = (ma[:, :, None] - mb[:, None, :]).reshape(len(ma), -1)
        se = np.sqrt(va[:, :, None] / na + vb[:, None, :] / nb).reshape(len(ma), -1)
        return mean, se, mean, se, df
    return (*_ball_bound_welch(a_lo, a_hi, b_lo, b_hi), df)


def _largest_t(room: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Per case, the largest t with room - t se > 0 at every corner (room: how far each corner lies inside)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se > 0, room / np.where(se > 0, se, 1.0), np.where(room > 0, np.inf, -np.inf))
    return t.min(axis=1)


def interval_decide(a_lo, a_hi, b_lo, b_hi, margin: float, alpha: float, paired: bool) -> dict:
    """decide() for values known only to their intervals: every statement holds for every placement of the
    true values inside them, so its error rate is at most that of the test on the true values. The intervals
    are the union over the box of the t intervals; a p-value is the largest over the box. Where the standard
    error is 0 at every corner (no spread and exact values) nothing is tested: p NaN, inconclusive."""
    um, us, lm, ls, df = interval_moments(a_lo, a_hi, b_lo, b_hi, paired)
    with np.errstate(invalid="ignore"):
        t1, t2 = scipy.stats.t.ppf(1 - alpha, df), scipy.stats.t.ppf(1 - alpha / 2, df)
    spread = (us.max(axis=1) > 0) | (ls.max(axis=1) > 0)
    mids = [(np.atleast_2d(np.asarray(lo, float)) + np.atleast_2d(np.asarray(hi, float))) / 2
            for lo, hi in ((a_lo, a_hi), (b_lo, b_hi))]  # fmt: skip
    d = mids[0].mean(axis=1) - mids[1].mean(axis=1) if not paired else (mids[0] - mids[1]).mean(axis=1)
    tost = np.minimum(_largest_t(margin - um, us), _largest_t(lm + margin, ls))  # TOST rejects for t below it
    apart = np.maximum(_largest_t(lm, ls), _largest_t(-um, us))  # the CI excludes 0 for t below it
    nan = np.full(len(d), np.nan)
    p_tost = np.where(spread, scipy.stats.t.sf(tost, df), nan)
    p_diff = np.where(spread, np.minimum(1.0, 2 * scipy.stats.t.sf(apart, df)), nan)
    ci_low = np.where(spread, (lm - t2 * ls).min(axis=1), nan)
    ci_high = np.where(spread, (um + t2 * us).max(axis=1), nan)
    verdict = np.where(spread & (p_tost < alpha), "equivalent",
                       np.where(spread & ((ci_low > margin) | (ci_high < -margin)), "different", "inconclusive"))  # fmt: skip
    return {"difference": d, "df": np.full(len(d), df), "ci_low": ci_low, "ci_high": ci_high,
            "tost_ci_low": np.where(spread, (lm - t1 * ls).min(axis=1), nan),
            "tost_ci_high": np.where(spread, (um + t1 * us).max(axis=1), nan),
            "p_difference": p_diff, "p_tost": p_tost, "verdict": verdict, "spread": spread}  # fmt: skip


# -- power and seeds needed -----------------------------------------------------------------

_NODES = (np.arange(96) + 0.5) / 96  # quantile midpoints: the quadrature over the sample variance
SPREAD_BOUND = 0.7  # seeds_needed plans with this one-sided upper confidence bound of an estimated spread


@functools.lru_cache(maxsize=512)
def _power_terms(k: int, alpha: float, paired: bool) -> tuple[np.ndarray, float]:
    """(t * se / sd at each quadrature node, sd of the estimated difference / sd) of the TOST with
    k seeds: the power at spread sd is the mean of 2 Phi((margin / sd - first) / second) - 1."""
    chi = scipy.stats.chi2.ppf(_NODES, k - 1) / (k - 1)  # s^2 / sd^2
    if paired:
        return scipy.stats.t.ppf(1 - alpha, k - 1) * np.sqrt(chi / k), 1 / math.sqrt(k)
    va, vb = np.meshgrid(chi, chi)
    v = (va + vb) / k
    df = v**2 / ((va / k) ** 2 / (k - 1) + (vb / k) ** 2 / (k - 1))
    return scipy.stats.t.ppf(1 - alpha, df) * np.sqrt(v), math.sqrt(2 / k)


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
            out[i] = np.clip(2 * scipy.stats.norm.cdf((margin / sd - tse) / w) - 1, 0, None).mean()
    return out


def spread_bound(sd: float, df: float, level: float = SPREAD_BOUND) -> float:
    """One-sided upper `level` confidence bound of a normal spread estimated as `sd` with df
    degrees of freedom (sd itself where df is infinite: a known spread)."""
    if not math.isfinite(df):
        return sd
    return sd * math.sqrt(df / scipy.stats.chi2.ppf(1 - level, df))


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


def seeds_words(needed: float) -> str:
    """What seeds_needed promises, in words (the finding's and the headline's)."""
    if needed == math.inf:
        return f"more than {SEEDS_CAP} seeds per hardware would be needed"
    if needed is None or not np.isfinite(needed):
        return "more seeds needed"
    return (f"{int(needed)} seeds per hardware would show equivalence {POWER:.0%} of the time if there is no true "
            "difference")


# -- equivalence ---------------------------------------------------------------------------

NEEDS_SEEDS = "needs >= 2 seeds on both"
BITWISE = "bitwise equal on every seed: equal without a test"
NO_SPREAD = "no spread over the seeds (every seed's difference the same): nothing to test from"


def compare(a: np.ndarray, b: np.ndarray, margin: float | None, confidence: float, paired: bool = False) -> dict:
    """One metric of one hardware (a) against the baseline (b); paired: a[i] and b[i] are the
    same seed. margin None: the difference, its CI and its t-test only (verdict 'not compared';
    a variant's metric without a margin)."""
    alpha = 1 - confidence
    a, b = np.asarray(a, float), np.asarray(b, float)
    test = PAIRED if paired else WELCH
    if len(a) < 2 or len(b) < 2:
        return {"test": test, "n": len(a), "n_baseline": len(b), "margin": margin, "verdict": "inconclusive",
                "shifted": False, "note": NEEDS_SEEDS}  # fmt: skip
    d, se, df = paired_stats(a, b) if paired else welch_stats(a, b)
    out = {k: v[0] for k, v in decide(d, se, df, math.nan if margin is None else margin, alpha).items()}
    sd = float(np.std(a - b, ddof=1)) if paired else math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    note = (BITWISE if out["difference"] == 0 else NO_SPREAD) if se[0] == 0 else ""
    if margin is None:  # no margin: nothing to say about equivalence, power or seeds for it
        return {"test": test, "n": len(a), "n_baseline": len(b), **out, "verdict": "not compared", "shifted": False,
                "margin": math.nan, "p_tost": math.nan, "power": math.nan, "seeds_needed": math.nan, "note": note}  # fmt: skip
    n = len(a) if paired else min(len(a), len(b))
    df = len(a) - 1 if paired else len(a) + len(b) - 2  # the spread's degrees of freedom
    return {
        "test": test, "n": len(a), "n_baseline": len(b), **out, "verdict": str(out["verdict"]),
        "shifted": bool(out["shifted"]), "margin": margin, "power": float(power(n, sd, margin, alpha, paired)[0]),
        "seeds_needed": math.nan if sd == 0 else seeds_needed(sd, margin, alpha, paired, df), "note": note,
    }  # fmt: skip


def finding(row, scale: float = 1.0, metric: str = "difference", goal: str = "max", confidence: float = 0.95) -> str:
    """The verdict in words, with the direction only where the interval shows one (words.in_words):
    'equivalent, but shifted inside ±0.5 points: better token accuracy by +0.44 points (90% interval ...; shift
    p = 0.003)', the interval the TOST tested."""
    v = row["verdict"]
    beyond = f"±{amount(row['margin'], scale)}"

    def said():  # only verdicts that were tested have a difference to word
        return in_words(metric, row["difference"], row["ci_low"], row["ci_high"], confidence, goal, scale)

    if v == "equivalent":
        if row.get("shifted"):
            return f"equivalent, but {shift_words(row, scale, metric, goal, confidence)}"
        if not finite(row.get("tost_ci_low")):  # bitwise equal: nothing estimated
            return "equivalent (bitwise equal on every seed)"
        tested = span(row["tost_ci_low"], row["tost_ci_high"], scale, row["margin"])
        return f"equivalent ({1 - 2 * (1 - confidence):.0%} interval {tested}, inside {beyond})"
    if v == "different":
        return f"different, beyond {beyond}: {said()}"
    if NO_SPREAD in str(row.get("note", "")):
        return f"inconclusive — {NO_SPREAD}"
    tested = ""
    if finite(row.get("tost_ci_low")) and finite(row.get("tost_ci_high")):
        interval = span(row["tost_ci_low"], row["tost_ci_high"], scale, row["margin"])
        tested = f" ({1 - 2 * (1 - confidence):.0%} interval {interval}, not inside {beyond})"
    return f"inconclusive{tested} — {seeds_words(row.get('seeds_needed', math.nan))}"


def shift_words(row, scale: float, metric: str, goal: str, confidence: float) -> str:
    """An equivalent but shifted metric with the interval the TOST tested (1 - 2 alpha, inside the margin) and
    the shift's test: 'shifted inside ±0.5 points: better token accuracy by +0.44 points (90% interval +0.389
    to +0.499 points; shift p = 0.003)'. The direction is the 1 - alpha interval's, which excludes 0."""
    way = side(row["ci_low"], row["ci_high"], 0.0, goal)
    tested = span(row["tost_ci_low"], row["tost_ci_high"], scale, row["margin"])
    return (f"shifted inside ±{amount(row['margin'], scale)}: {way} {metric.replace('_', ' ')} by "
            f"{amount(row['difference'], scale, True)} ({1 - 2 * (1 - confidence):.0%} interval {tested}; shift p = "
            f"{row['p_difference']:.2g})")  # fmt: skip


EQUIVALENCE_COLUMNS = [
    "suite", "variant", "hardware", "baseline", "metric", "primary", "scale", "goal", "test", "n", "n_baseline",
    "difference", "ci_low", "ci_high", "tost_ci_low", "tost_ci_high", "p_difference", "p_tost", "margin", "verdict",
    "shifted", "finding", "power", "seeds_needed", "note",
]  # fmt: skip


# Seeds that are not seeds: every seed of both hardware gave the same value (a script that gets no seed, or
# ignores it). Zero spread is no evidence of equivalence: a test would say p = 0 from nothing. The one sentence
# of every comparison that meets them (fixed steps, variants, time to target, speedup).
REPEATS = "no seed variation: nothing can be tested from identical repeats; pass a seed flag the script uses"
AT_BOUND = "no spread to test from: a bound reached, not missing seeds"  # ends the sentence of at_bound()


def repeats(a, b) -> bool:
    """Whether both sides are >= 2 runs that all gave one value each (identical repeats, not seeds): values, or
    whole curves' fingerprints (time to target)."""
    return len(a) >= 2 and len(b) >= 2 and len(set(list(a))) == 1 and len(set(list(b))) == 1


def at_bound(name: str, value: float, bounds, scale: float = 1.0) -> str:
    """'exact accuracy is 0 on every seed (its floor): no spread ...' for a value at a declared bound; ''
    elsewhere."""
    if bounds is None or value not in tuple(bounds):
        return ""
    which = "floor" if value == bounds[0] else "ceiling"
    return f"{name.replace('_', ' ')} is {amount(value, scale)} on every seed (its {which}): {AT_BOUND}"


def constant(a, b, name: str, settings: Settings) -> str:
    """Why one metric's values cannot be tested (both sides one value each): the metric at its floor or
    ceiling on either side (named so), else identical repeats (REPEATS); '' when they can be."""
    if not repeats(a, b):
        return ""
    bounds, scale = settings.bounds.get(name), settings.scales.get(name, 1.0)
    return next((said for said in (at_bound(name, float(x[0]), bounds, scale) for x in (b, a)) if said), REPEATS)


def untestable(note) -> bool:
    """Whether a row's note says its values could not be tested at all (constant: more seeds of them decide nothing)."""
    return isinstance(note, str) and (REPEATS in note or note.endswith(AT_BOUND) or NO_SPREAD in note)


def pairing(sub: pd.DataFrame, base: pd.DataFrame) -> tuple[bool, list, str]:
    """Paired when both ran the same seeds (>= 2 shared) and the seed drives the run."""
    shared = sorted(set(sub.seed) & set(base.seed))
    seeded = "seeded" not in sub or bool(sub.seeded.all() and base.seeded.all())
    if len(shared) < 2 or not seeded:
        return False, shared, "" if seeded else "not seeded: seeds are repeats, compared unpaired"
    alone = sorted(set(sub.seed) ^ set(base.seed))
    return True, shared, f"seeds {alone} not on both: left out of the pairing" if alone else ""


def sides(sub: pd.DataFrame, base: pd.DataFrame, metric: str, paired: bool, shared: list) -> tuple[np.ndarray, np.ndarray]:
    """One metric's values of both sides: the shared seeds in one order when paired (a seed missing the
    value on either side left out), else every value of each."""
    if not paired:
        return sub[metric].dropna().to_numpy(float), base[metric].dropna().to_numpy(float)
    x = sub.set_index("seed")[metric].loc[shared]
    y = base.set_index("seed")[metric].loc[shared]
    ok = x.notna().to_numpy() & y.notna().to_numpy()
    return x.to_numpy(float)[ok], y.to_numpy(float)[ok]


def equivalence(runs: pd.DataFrame, baseline: str, settings: Settings = Settings()) -> pd.DataFrame:
    rows = []
    cells = {key: frame for key, frame in runs.groupby(CELL, sort=False)}
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, variant, baseline))
        if hw == baseline or base is None:
            continue
        paired, shared, note = pairing(sub, base)
        for metric, margin in settings.margins.items():
            a, b = sides(sub, base, metric, paired, shared)
            scale = settings.scales.get(metric, 1.0)
            why = constant(a, b, metric, settings)
            if why:
                result = {"test": PAIRED if paired else WELCH, "n": len(a), "n_baseline": len(b), "margin": margin,
                          "difference": float(a.mean() - b.mean()), "verdict": "inconclusive", "shifted": False,
                          "finding": why, "note": why}  # fmt: skip
                rows.append({"suite": suite, "variant": variant, "hardware": hw, "baseline": baseline, "metric": metric,
                             "primary": metric in settings.primary, "scale": scale,
                             "goal": settings.goals.get(metric, "max")} | result)  # fmt: skip
                continue
            result = compare(a, b, margin, settings.confidence, paired=paired)
            result["note"] = "; ".join(x for x in (result.get("note", ""), note) if x)
            result["finding"] = finding(result, scale, metric, settings.goals.get(metric, "max"),
                                        settings.confidence)  # fmt: skip
            rows.append({"suite": suite, "variant": variant, "hardware": hw, "baseline": baseline, "metric": metric,
                         "primary": metric in settings.primary, "scale": scale,
                         "goal": settings.goals.get(metric, "max")} | result)  # fmt: skip
    return pd.DataFrame(rows, columns=EQUIVALENCE_COLUMNS)


# -- the normality the intervals assume -------------------------------------------------------

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
        p = np.minimum(1.0, 2 * n * scipy.stats.t.sf(np.sqrt(t2), n - 2))
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
                found.append(f"seed {seeds[column[0]]} lies apart in {name} (Grubbs p = {p[0]:.1g}, {share})")
            if len(values) >= SKEW_SEEDS and scipy.stats.skewtest(values).pvalue * tests[key[0]] < SPREAD_LEVEL:
                found.append(f"{name} looks skewed over the seeds ({share})")
        more = ", ".join(str(s) for s in range(top, top + min(sub.seed.nunique(), MORE_SEEDS)))
        text = "; ".join(found) + f": the intervals assume roughly normal seeds; add seeds {more} to check" if found else ""
        rows.append(dict(zip(CELL, key)) | {"seed_spread": text})
    return pd.DataFrame(rows, columns=CELL + ["seed_spread"])


def overall(equiv: pd.DataFrame) -> pd.DataFrame:
    """Per cell: equivalent only when every primary metric is (intersection-union: the 5%
    level holds without correction); different when a primary metric is; else inconclusive."""
    rows = []
    for key, sub in equiv.groupby(CELL, sort=False):
        prim = sub[sub.primary.astype(bool)]
        if prim.empty:
            verdict = "not compared"
        elif (prim.verdict == "equivalent").all():
            verdict = "equivalent"
        elif (prim.verdict == "different").any():
            verdict = "different"
        else:
            verdict = "inconclusive"
        rows.append(dict(zip(CELL, key)) | {"verdict": verdict})
    return pd.DataFrame(rows, columns=CELL + ["verdict"])


# -- speedup, efficiency and cost ---------------------------------------------------------


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
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(se > 0, (vb + vn) ** 2 / (vb**2 / (base.shape[1] - 1) + vn**2 / (new.shape[1] - 1)), np.inf)
    half = np.where(se > 0, scipy.stats.t.ppf(0.5 + confidence / 2, df) * se, np.nan)
    return est, est * np.exp(-half), est * np.exp(half)


def _times(frame: pd.DataFrame) -> pd.Series:
    return frame.groupby("seed").train_seconds.mean()


def _ratio(ref: pd.DataFrame, sub: pd.DataFrame, confidence: float) -> dict:
    tr, ts = _times(ref), _times(sub)
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
    half = scipy.stats.t.ppf(0.5 + confidence / 2, m - 2) * se
    return {"f": f, "se": se, "low": np.clip(f - half, 0, 1), "high": np.clip(f + half, 0, 1)}


def amdahl_speedup(f: float, n: float) -> float:
    return 1 / (f + (1 - f) / n)


def contention(frame: pd.DataFrame) -> str:
    """'cpu2: 2 of 3 runs (1 other hwsweep run(s) on the node)' for one cell's runs measured under contention
    (runs.csv `contended`, hwsweep.host.contended); '' when none was."""
    if "contended" not in frame:
        return ""
    flagged = frame.contended.fillna("").astype(str)
    flagged = flagged[flagged != ""]
    return "" if flagged.empty else f"{frame.hardware.iloc[0]}: {len(flagged)} of {len(frame)} runs ({flagged.iloc[0]})"


def _means(frame: pd.DataFrame, columns: list[str]) -> dict:
    return {c: float(pd.to_numeric(frame[c], errors="coerce").mean()) if c in frame else math.nan for c in columns}


def speedup(runs: pd.DataFrame, baseline: str, settings: Settings = Settings(), prices: dict | None = None,
            currency: str = "USD") -> pd.DataFrame:  # fmt: skip
    """Per cell: speedup over the baseline for the fixed step budget (any device type), device-
    hours and money; parallel efficiency against the smallest device count of the same type."""
    prices = prices or {}
    # A run without a timed step (steps: 1: its only step is startup) measured no training time:
    # its times are unknown (NaN), never a zero that divides.
    runs = runs.assign(**{c: runs[c].where(runs[c] > 0) for c in ("train_seconds", "samples_per_second")})
    cells = {key: frame for key, frame in runs.groupby(CELL, sort=False)}
    rows = []
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, variant, baseline))
        if base is None:
            continue
        r = _ratio(base, sub, settings.confidence)
        ws, ws_base = int(sub.world_size.iloc[0]), int(base.world_size.iloc[0])
        gpu, gpu_base = sub.gpu_type.iloc[0], base.gpu_type.iloc[0]
        hours = float((sub.world_size * sub.train_seconds).mean() / 3600)
        price, price_base = prices.get(hw), prices.get(baseline)
        cost = hours * price if price is not None else math.nan
        # Ratios of device-hours and money follow the speedup's own mean (the geometric mean of the
        # per-seed ratios), so one sentence never mixes it with a ratio of arithmetic means.
        per_hour = (math.nan if price is None else price) / price_base if price_base else math.nan
        cost_ratio = [per_hour * ws / ws_base / x for x in (r["value"], r["high"], r["low"])]
        rows.append({
            "suite": suite, "variant": variant, "hardware": hw, "baseline": hw == baseline, "gpu_type": gpu,
            "world_size": ws,
            "strategy": sub.strategy.iloc[0] if "strategy" in sub else None,
            "n_pairs": r["n_pairs"], "speedup": r["value"], "speedup_ci_low": r["low"], "speedup_ci_high": r["high"],
            "speedup_method": r["method"], "speedup_note": r["note"] if hw != baseline else "",
            "throughput_ratio": sub.samples_per_second.mean() / base.samples_per_second.mean(),
            "device_ratio": ws / ws_base,
            "same_device_type": gpu == gpu_base,
            "time_saved_seconds": base.train_seconds.mean() - sub.train_seconds.mean(),
            "device_hours": hours,
            "device_hours_ratio": ws / ws_base / r["value"] if gpu == gpu_base else math.nan,
            "price_per_device_hour": math.nan if price is None else price, "currency": currency,
            "cost_per_run": cost, "cost_per_cell": cost * len(sub) if price is not None else math.nan,
            "cost_ratio": cost_ratio[0], "cost_ratio_ci_low": cost_ratio[1], "cost_ratio_ci_high": cost_ratio[2],
            # Whose timings measured other work too: this hardware's runs and the baseline's.
            "contention": "; ".join(c for c in (contention(sub), contention(base) if hw != baseline else "") if c),
        } | _means(sub, [c for c in SPEED_COLUMNS if c != "flops_per_step"]))  # fmt: skip
    out = pd.DataFrame(rows)
    if out.empty:  # no run to compare (every run stopped at its targets): a table of no rows, still readable
        return pd.DataFrame(columns=CELL)
    for col in ("scaling_reference", "scaling_speedup", "scaling_ci_low", "scaling_ci_high", "efficiency"):
        out[col] = math.nan if col != "scaling_reference" else ""
    for col in AMDAHL_COLUMNS:
        out[col] = math.nan
    for _, idx in out.groupby(["suite", "variant", "gpu_type"], sort=False).groups.items():
        _scaling(out, idx, cells, baseline, settings)
    return out


AMDAHL_COLUMNS = ["amdahl_serial_fraction", "amdahl_serial_fraction_se", "amdahl_serial_fraction_ci_low",
                  "amdahl_serial_fraction_ci_high", "amdahl_extrapolated_devices", "amdahl_extrapolated_speedup"]  # fmt: skip


def _scaling(out: pd.DataFrame, idx, cells: dict, baseline: str, settings: Settings) -> None:
    """Efficiency within one device type, for the hardware above its smallest device count: speedup
    over that count (`scaling_reference`, the baseline where it is one) / device ratio; Amdahl's fit
    where the type has >= 3 device counts."""
    sub = out.loc[idx]
    smallest = sub[sub.world_size == sub.world_size.min()]
    ref = smallest[smallest.hardware == baseline] if (smallest.hardware == baseline).any() else smallest.iloc[:1]
    ref_hw, ref_ws = ref.hardware.iloc[0], int(ref.world_size.iloc[0])
    suite, variant = sub.suite.iloc[0], sub.variant.iloc[0]
    for i in idx:
        if out.at[i, "world_size"] == ref_ws:  # nothing smaller to compare with: no efficiency of 1 against itself
            continue
        r = _ratio(cells[(suite, variant, ref_hw)], cells[(suite, variant, out.at[i, "hardware"])], settings.confidence)
        out.loc[i, ["scaling_speedup", "scaling_ci_low", "scaling_ci_high"]] = r["value"], r["low"], r["high"]
        out.at[i, "scaling_reference"] = ref_hw
        out.at[i, "efficiency"] = r["value"] / (out.at[i, "world_size"] / ref_ws)
    sub = out.loc[idx]
    times = [np.asarray(_times(cells[(suite, variant, hw)]), float) for hw in sub.hardware]
    # runs of one step time no training (NaN): no fit rather than a fit to nothing
    if sub.world_size.nunique() >= 3 and all(len(t) and np.isfinite(t).all() and (t > 0).all() for t in times):
        devices = np.concatenate([np.full(len(t), ws / ref_ws) for t, ws in zip(times, sub.world_size)])
        fit = {k: float(v[0]) for k, v in amdahl_fit(devices, np.concatenate(times), settings.confidence).items()}
        n = 2 * int(sub.world_size.max())
        out.loc[idx, AMDAHL_COLUMNS] = [fit["f"], fit["se"], fit["low"], fit["high"], n,
                                        amdahl_speedup(fit["f"], n / ref_ws)]  # fmt: skip


def known_speedup(hours_base: float, hours_new: float, devices_base: int, devices_new: int) -> dict:
    """Speedup, efficiency, device-hour ratio and time saved from two wall times of one device
    type (worked examples, docs)."""
    s = hours_base / hours_new
    ratio = devices_new / devices_base
    return {"speedup": s, "efficiency": s / ratio, "device_hours_ratio": ratio / s, "time_saved": hours_base - hours_new}


# -- the export ---------------------------------------------------------------------------


def comparison(summary: pd.DataFrame, equiv: pd.DataFrame, speed: pd.DataFrame, baseline: str,
               settings: Settings = Settings()) -> pd.DataFrame:  # fmt: skip
    """One row per suite x variant x hardware: metric means and CIs, verdicts (per metric and
    overall), speedup, cost."""
    out = summary.copy()
    out.insert(3, "baseline", out.hardware == baseline)
    verdicts = overall(equiv) if len(equiv) else pd.DataFrame(columns=CELL + ["verdict"])
    out = out.merge(verdicts, on=CELL, how="left")
    out["verdict"] = np.where(out.baseline, "baseline", out.verdict.fillna("inconclusive"))
    for metric in settings.margins:  # a metric without a margin is reported, not compared
        if equiv.empty or metric not in set(equiv.metric):
            out[f"{metric}_verdict"] = np.where(out.baseline, "baseline", "inconclusive")
            continue
        v = equiv[equiv.metric == metric][CELL + ["verdict", "difference", "finding", "test"]]
        v = v.rename(columns={"verdict": f"{metric}_verdict", "difference": f"{metric}_difference",
                              "finding": f"{metric}_finding", "test": f"{metric}_test"})  # fmt: skip
        out = out.merge(v, on=CELL, how="left")
        out.loc[out.baseline, f"{metric}_verdict"] = "baseline"
    keep = ["speedup", "speedup_ci_low", "speedup_ci_high", "speedup_method", "speedup_note", "throughput_ratio",
            "device_ratio",
            "same_device_type", "efficiency", "scaling_reference", "device_hours", "device_hours_ratio",
            "time_saved_seconds", "price_per_device_hour", "currency", "cost_per_run", "cost_per_cell",
            "cost_ratio", "cost_ratio_ci_low", "cost_ratio_ci_high", "contention"]  # fmt: skip
    if speed.empty:
        return out
    return out.merge(speed[CELL + keep], on=CELL, how="left")


def curve_band(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and min/max over seeds of each logged series, per cell, metric and step."""
    g = curves.groupby(CELL + ["metric", "step"], sort=False).value
    return g.agg(mean="mean", low="min", high="max").reset_index()


def curve_difference(curves: pd.DataFrame, baseline: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per cell, series and step: mean over seeds of (hardware - baseline, same seed) with a t
    band over the seeds; seeds the baseline did not run are left out."""
    base = curves[curves.hardware == baseline].drop(columns="hardware")
    keys = ["suite", "variant", "metric", "step", "seed"]
    merged = curves[curves.hardware != baseline].merge(base, on=keys, suffixes=("", "_base"))
    merged["diff"] = merged.value - merged.value_base
    g = merged.groupby(CELL + ["metric", "step"], sort=False)["diff"]
    out = g.agg(mean="mean", std="std", n="count").reset_index()
    half = t_half_width(out["std"], out.n, confidence)
    out["low"], out["high"] = out["mean"] - half, out["mean"] + half
    return out
