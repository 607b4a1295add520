"""Statistics over seeds and hardware: pure functions on DataFrames.

- seed_summary: per suite x variant x hardware and metric, n / mean / std / standard error /
  bootstrap CI (BCa, seeded) / min / max.
- equivalence: each hardware against the baseline, per metric: Welch difference and CI, Welch
  p-value, TOST at margin epsilon, a verdict, the minimal detectable difference and the seeds
  a decision would need.
- speedup: time for the fixed step budget, baseline / hardware, paired by seed, with a bootstrap
  CI; efficiency, device-hours and cost; Amdahl's serial fraction where a device type has >= 3
  device counts.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

CELL = ["suite", "variant", "hardware"]
POWER = 0.8  # for the minimal detectable difference and the seeds needed


@dataclass(frozen=True)
class Settings:
    """How to compare: the config's `statistics` and the declared metrics (names in order,
    and the equivalence margin of each metric that has one)."""

    confidence: float = 0.95
    resamples: int = 9999
    seed: int = 0
    metrics: tuple = ()  # every declared metric, in order
    margins: dict = field(default_factory=dict)  # name -> margin, for the metrics that are compared
    primary: tuple = ()  # the compared metrics that decide a hardware's overall verdict
    goals: dict = field(default_factory=dict)  # name -> "max" | "min"

    @classmethod
    def of(cls, statistics: dict, metrics) -> "Settings":
        compared = [m for m in metrics if m.margin is not None]
        return cls(**statistics, metrics=tuple(m.name for m in metrics), margins={m.name: m.margin for m in compared},
                   primary=tuple(m.name for m in compared if m.primary), goals={m.name: m.goal for m in metrics})  # fmt: skip


# -- seed variance -----------------------------------------------------------------------


def bootstrap_ci(values: np.ndarray, settings: Settings) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """BCa CIs of the mean for each row of `values` (rows: cells, columns: seeds; all rows the
    same length). Falls back to the percentile method for a row where BCa is degenerate."""
    rows = len(values)
    low, high, notes = np.full(rows, np.nan), np.full(rows, np.nan), [""] * rows
    if values.shape[1] < 3:
        return low, high, ["CI not available: fewer than 3 seeds"] * rows
    constant = np.ptp(values, axis=1) == 0
    for method in ("BCa", "percentile"):
        todo = ~constant & np.isnan(low)
        if not todo.any():
            break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # degenerate rows come back as NaN and are retried
            res = sps.bootstrap((values[todo],), np.mean, axis=-1, vectorized=True, method=method,
                                n_resamples=settings.resamples, confidence_level=settings.confidence,
                                random_state=settings.seed, batch=max(1, 2_000_000 // (settings.resamples + 1)))  # fmt: skip
        low[todo], high[todo] = res.confidence_interval.low, res.confidence_interval.high
        if method == "percentile":
            for i in np.flatnonzero(todo):
                notes[i] = "percentile CI: BCa degenerate"
    low[constant] = high[constant] = values[constant, 0]
    for i in np.flatnonzero(constant):
        notes[i] = "all seeds equal"
    return low, high, notes


def _describe(groups: pd.core.groupby.DataFrameGroupBy, column: str, settings: Settings) -> pd.DataFrame:
    out = groups[column].agg(["count", "mean", "std", "min", "max"])
    out["se"] = out["std"] / np.sqrt(out["count"])
    out["ci_low"] = out["ci_high"] = np.nan
    out["ci_note"] = ""
    lists = groups[column].apply(lambda s: s.dropna().to_numpy())
    for n in sorted(set(out["count"])):  # vectorised bootstrap over all cells with n seeds
        idx = out.index[out["count"] == n]
        if n == 0:
            continue
        low, high, notes = bootstrap_ci(np.stack(lists.loc[idx].to_list()), settings)
        out.loc[idx, "ci_low"], out.loc[idx, "ci_high"], out.loc[idx, "ci_note"] = low, high, notes
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
    if "seeded" in runs:  # a script without a seed flag: the seed spread is run-to-run noise only
        out["seeded"] = grouped["seeded"].all()
    if "checks" in runs:  # where a run did not follow its plan: carried to the comparison and the report
        out["checks"] = grouped["checks"].agg(lambda c: "; ".join(sorted({x for x in c if isinstance(x, str) and x})))
    parts = [out] + [_describe(grouped, m, settings) for m in settings.metrics if m in runs]
    return pd.concat(parts, axis=1).reset_index()


# -- equivalence -------------------------------------------------------------------------


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Difference of means (a - b), its standard error and Welch-Satterthwaite degrees of freedom."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else float("inf")
    return float(np.mean(a) - np.mean(b)), se, df


def tost(a: np.ndarray, b: np.ndarray, margin: float) -> float:
    """p-value of the two one-sided Welch tests of |mean(a) - mean(b)| < margin (the larger one)."""
    d, se, df = welch(a, b)
    if se == 0:
        return 0.0 if abs(d) < margin else 1.0
    p_lower = sps.t.sf((d + margin) / se, df)  # H0: d <= -margin
    p_upper = sps.t.cdf((d - margin) / se, df)  # H0: d >= +margin
    return float(max(p_lower, p_upper))


def seeds_needed(sd: float, diff: float, margin: float, alpha: float) -> float:
    """Seeds per hardware for a decision at this spread: equivalence if |diff| < margin, else
    a difference beyond the margin; inf when diff sits on the margin. Normal approximation,
    power 0.8."""
    gap = abs(abs(diff) - margin)
    if sd == 0:
        return 2.0
    if gap == 0:
        return math.inf
    z = sps.norm.ppf(1 - alpha) + sps.norm.ppf(POWER)
    return float(max(2, math.ceil(2 * (z * sd / gap) ** 2)))


def compare(a: np.ndarray, b: np.ndarray, margin: float, confidence: float) -> dict:
    """One metric of one hardware (a) against the baseline (b)."""
    alpha = 1 - confidence
    if len(a) < 2 or len(b) < 2:
        return {"n": len(a), "n_baseline": len(b), "verdict": "inconclusive", "note": "needs >= 2 seeds on both"}
    d, se, df = welch(a, b)
    t2 = sps.t.ppf(1 - alpha / 2, df) if se > 0 else 0.0
    t1 = sps.t.ppf(1 - alpha, df) if se > 0 else 0.0
    p_welch = float(2 * sps.t.sf(abs(d) / se, df)) if se > 0 else (0.0 if d != 0 else 1.0)
    p_tost = tost(a, b, margin)
    ci = (d - t2 * se, d + t2 * se)
    if p_tost < alpha:
        verdict = "equivalent"
    elif p_welch < alpha and (ci[0] > margin or ci[1] < -margin):
        verdict = "different"
    else:
        verdict = "inconclusive"
    sd = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    return {
        "n": len(a), "n_baseline": len(b), "difference": d, "ci_low": ci[0], "ci_high": ci[1],
        "tost_ci_low": d - t1 * se, "tost_ci_high": d + t1 * se, "p_welch": p_welch, "p_tost": p_tost,
        "margin": margin, "verdict": verdict,
        "min_detectable_difference": (t2 + sps.t.ppf(POWER, df)) * se if se > 0 else 0.0,
        "seeds_needed": seeds_needed(sd, d, margin, alpha / 2 if verdict != "equivalent" else alpha),
        "note": "",
    }  # fmt: skip


EQUIVALENCE_COLUMNS = [
    "suite", "variant", "hardware", "baseline", "metric", "n", "n_baseline", "difference", "ci_low", "ci_high",
    "tost_ci_low", "tost_ci_high", "p_welch", "p_tost", "margin", "verdict", "min_detectable_difference",
    "seeds_needed", "note",
]  # fmt: skip


def equivalence(runs: pd.DataFrame, baseline: str, settings: Settings = Settings()) -> pd.DataFrame:
    rows = []
    cells = {key: frame for key, frame in runs.groupby(CELL, sort=False)}
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, variant, baseline))
        if hw == baseline or base is None:
            continue
        for metric, margin in settings.margins.items():
            result = compare(sub[metric].dropna().to_numpy(), base[metric].dropna().to_numpy(), margin,
                             settings.confidence)  # fmt: skip
            rows.append({"suite": suite, "variant": variant, "hardware": hw, "baseline": baseline,
                         "metric": metric} | result)  # fmt: skip
    return pd.DataFrame(rows, columns=EQUIVALENCE_COLUMNS)


# -- speedup and cost --------------------------------------------------------------------


def amdahl(device_ratio: np.ndarray, speedup: np.ndarray) -> float:
    """Serial fraction f of S(N) = 1 / (f + (1 - f) / N), least squares, 0 <= f <= 1."""
    fit, _ = optimize.curve_fit(lambda n, f: 1 / (f + (1 - f) / n), device_ratio, speedup, p0=[0.1], bounds=(0, 1))
    return float(fit[0])


def amdahl_speedup(f: float, n: float) -> float:
    return 1 / (f + (1 - f) / n)


def speedup(runs: pd.DataFrame, baseline: str, settings: Settings = Settings()) -> pd.DataFrame:
    """Time to finish the fixed step budget, baseline / hardware, paired by seed."""
    base = runs[runs.hardware == baseline][["suite", "variant", "seed", "train_seconds", "samples_per_second", "world_size"]]
    paired = runs.merge(base, on=["suite", "variant", "seed"], suffixes=("", "_base"))
    paired["ratio"] = paired.train_seconds_base / paired.train_seconds
    paired["throughput_ratio"] = paired.samples_per_second / paired.samples_per_second_base
    paired["device_ratio"] = paired.world_size / paired.world_size_base
    paired["device_hours"] = paired.world_size * paired.train_seconds / 3600
    paired["time_saved_seconds"] = paired.train_seconds_base - paired.train_seconds
    grouped = paired.groupby(CELL, sort=False)
    out = grouped.agg(
        n_pairs=("seed", "nunique"),
        speedup=("ratio", "mean"),
        speedup_std=("ratio", "std"),
        throughput_ratio=("throughput_ratio", "mean"),
        device_ratio=("device_ratio", "first"),
        device_hours=("device_hours", "mean"),
        time_saved_seconds=("time_saved_seconds", "mean"),
        gpu_type=("gpu_type", "first"),
    )
    ci = _describe(grouped, "ratio", settings)
    out["speedup_ci_low"], out["speedup_ci_high"] = ci["ratio_ci_low"], ci["ratio_ci_high"]
    out["speedup_ci_note"] = ci["ratio_ci_note"]
    out["efficiency"] = out.speedup / out.device_ratio
    out["relative_cost"] = out.device_ratio / out.speedup  # device-hours per baseline device-hour = 1 / efficiency
    out = out.reset_index()
    out["amdahl_serial_fraction"] = np.nan
    out["amdahl_extrapolated_devices"] = np.nan
    out["amdahl_extrapolated_speedup"] = np.nan
    for _, idx in out.groupby(["suite", "variant", "gpu_type"], sort=False).groups.items():
        sub = out.loc[idx]
        if sub.device_ratio.nunique() >= 3:
            f = amdahl(sub.device_ratio.to_numpy(float), sub.speedup.to_numpy(float))
            n = 2 * sub.device_ratio.max()
            out.loc[idx, "amdahl_serial_fraction"] = f
            out.loc[idx, "amdahl_extrapolated_devices"] = n
            out.loc[idx, "amdahl_extrapolated_speedup"] = amdahl_speedup(f, n)
    return out


def known_speedup(hours_base: float, hours_new: float, devices_base: int, devices_new: int) -> dict:
    """Speedup, efficiency and device-hour ratio from two wall times (worked examples, docs)."""
    s = hours_base / hours_new
    ratio = devices_new / devices_base
    return {"speedup": s, "efficiency": s / ratio, "relative_cost": ratio / s}


# -- the export ---------------------------------------------------------------------------


def comparison(summary: pd.DataFrame, equiv: pd.DataFrame, speed: pd.DataFrame, baseline: str,
               settings: Settings = Settings()) -> pd.DataFrame:  # fmt: skip
    """One row per suite x variant x hardware: metric means and CIs, verdicts, speedup, cost."""
    out = summary.copy()
    out.insert(3, "baseline", out.hardware == baseline)
    for metric in settings.margins:  # a metric without a margin is reported, not compared
        if equiv.empty or metric not in set(equiv.metric):
            out[f"{metric}_verdict"] = np.where(out.baseline, "baseline", "inconclusive")
            continue
        v = equiv[equiv.metric == metric][CELL + ["verdict", "difference"]]
        v = v.rename(columns={"verdict": f"{metric}_verdict", "difference": f"{metric}_difference"})
        out = out.merge(v, on=CELL, how="left")
        out.loc[out.baseline, f"{metric}_verdict"] = "baseline"
    keep = ["speedup", "speedup_ci_low", "speedup_ci_high", "throughput_ratio", "device_ratio", "efficiency",
            "device_hours", "relative_cost", "time_saved_seconds"]  # fmt: skip
    return out.merge(speed[CELL + keep], on=CELL, how="left")


def curve_band(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and min/max over seeds of each logged series, per cell, metric and step."""
    g = curves.groupby(CELL + ["metric", "step"], sort=False).value
    return g.agg(mean="mean", low="min", high="max").reset_index()
