"""The equivalence test for interval data: each value known only to lie in [low, high] (time to target
between two evaluations). Every statement holds for every placement of the true values inside their intervals."""

from __future__ import annotations

import math

import numpy as np

from hwsweep.analysis.stats.distributions import t_ppf, t_sf

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
    error is 0 at every corner (no spread and exact values) nothing is tested: p NaN, inconclusive. p_beyond: the
    one-sided p that the difference lies beyond the margin on its side (beyond_above: above +margin), the test of
    an RCP-style flag that a shift inside the margin never raises."""
    um, us, lm, ls, df = interval_moments(a_lo, a_hi, b_lo, b_hi, paired)
    with np.errstate(invalid="ignore"):
        t1, t2 = t_ppf(1 - alpha, df), t_ppf(1 - alpha / 2, df)
    spread = (us.max(axis=1) > 0) | (ls.max(axis=1) > 0)
    mids = [(np.atleast_2d(np.asarray(lo, float)) + np.atleast_2d(np.asarray(hi, float))) / 2
            for lo, hi in ((a_lo, a_hi), (b_lo, b_hi))]  # fmt: skip
    d = mids[0].mean(axis=1) - mids[1].mean(axis=1) if not paired else (mids[0] - mids[1]).mean(axis=1)
    tost = np.minimum(_largest_t(margin - um, us), _largest_t(lm + margin, ls))  # TOST rejects for t below it
    apart = np.maximum(_largest_t(lm, ls), _largest_t(-um, us))  # the CI excludes 0 for t below it
    # One-sided beyond the margin (MLPerf's reference-convergence question: does it converge slower, or faster,
    # than the reference's spread allows): the lower bound above +margin, or the upper below -margin.
    above, below = _largest_t(lm - margin, ls), _largest_t(-um - margin, us)
    nan = np.full(len(d), np.nan)
    p_tost = np.where(spread, t_sf(tost, df), nan)
    p_diff = np.where(spread, np.minimum(1.0, 2 * t_sf(apart, df)), nan)
    ci_low = np.where(spread, (lm - t2 * ls).min(axis=1), nan)
    ci_high = np.where(spread, (um + t2 * us).max(axis=1), nan)
    verdict = np.where(spread & (p_tost < alpha), "equivalent",
                       np.where(spread & ((ci_low > margin) | (ci_high < -margin)), "different", "inconclusive"))  # fmt: skip
    return {"difference": d, "df": np.full(len(d), df), "ci_low": ci_low, "ci_high": ci_high,
            "tost_ci_low": np.where(spread, (lm - t1 * ls).min(axis=1), nan),
            "tost_ci_high": np.where(spread, (um + t1 * us).max(axis=1), nan),
            "p_difference": p_diff, "p_tost": p_tost, "verdict": verdict, "spread": spread,
            "p_beyond": np.where(spread, t_sf(np.maximum(above, below), df), nan),
            "beyond_above": above >= below}  # fmt: skip
