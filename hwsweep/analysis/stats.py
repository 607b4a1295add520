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
  device-hours, cost in money, time saved; parallel efficiency and Amdahl's serial fraction
  only within one device type against its own smallest device count.

Every function works for whatever metrics the config declares (Settings); no name is listed here.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

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
    goals: dict = field(default_factory=dict)  # name -> "max" | "min"
    scales: dict = field(default_factory=dict)  # name -> 100 for shares (bounds [0, 1]: written in points)

    @classmethod
    def of(cls, statistics: dict, metrics) -> "Settings":
        compared = [m for m in metrics if m.margin is not None]
        scales = {m.name: 100.0 for m in metrics if m.bounds is not None and list(m.bounds) == [0, 1]}
        return cls(**statistics, metrics=tuple(m.name for m in metrics), margins={m.name: m.margin for m in compared},
                   primary=tuple(m.name for m in compared if m.primary), goals={m.name: m.goal for m in metrics},
                   scales=scales)  # fmt: skip

    @property
    def alpha(self) -> float:
        return 1 - self.confidence


def amount(value: float, scale: float = 1.0, signed: bool = False) -> str:
    """A difference or margin in the metric's units: shares (scale 100) in percentage points."""
    if value is None or not np.isfinite(value):
        return "n/a"
    v = value * scale
    text = f"{v:+.3g}" if signed else f"{v:.3g}"
    return f"{text} points" if scale == 100 else text


# -- seed variance -----------------------------------------------------------------------


def t_half_width(std, n, confidence: float) -> np.ndarray:
    """Half-width of the Student t CI of a mean from the sample std and count (n - 1 df); NaN below 2."""
    n = np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = sps.t.ppf(0.5 + confidence / 2, np.maximum(n - 1, 1)) * np.asarray(std, float) / np.sqrt(n)
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
    the 1 - alpha CI lies wholly beyond the margin; inconclusive otherwise."""
    d, se, df = (np.asarray(x, float) for x in (d, se, df))
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(se > 0, se, 1.0)
        p_lower = sps.t.sf((d + margin) / safe, df)  # H0: d <= -margin
        p_upper = sps.t.cdf((d - margin) / safe, df)  # H0: d >= +margin
        p_tost = np.where(se > 0, np.maximum(p_lower, p_upper), np.where(np.abs(d) < margin, 0.0, 1.0))
        p_diff = np.where(se > 0, 2 * sps.t.sf(np.abs(d) / safe, df), np.where(d != 0, 0.0, 1.0))
        t1 = np.where(se > 0, sps.t.ppf(1 - alpha, df), 0.0)
        t2 = np.where(se > 0, sps.t.ppf(1 - alpha / 2, df), 0.0)
    ci_low, ci_high = d - t2 * se, d + t2 * se
    verdict = np.where(p_tost < alpha, "equivalent",
                       np.where((ci_low > margin) | (ci_high < -margin), "different", "inconclusive"))  # fmt: skip
    return {"difference": d, "se": se, "df": df, "ci_low": ci_low, "ci_high": ci_high, "tost_ci_low": d - t1 * se,
            "tost_ci_high": d + t1 * se, "p_difference": p_diff, "p_tost": p_tost, "verdict": verdict,
            "shifted": (verdict == "equivalent") & (p_diff < alpha)}  # fmt: skip


# -- power and seeds needed -----------------------------------------------------------------

_NODES = (np.arange(96) + 0.5) / 96  # quantile midpoints: the quadrature over the sample variance


def power(n, sd: float, margin: float, alpha: float, paired: bool) -> np.ndarray:
    """Power of the shipped TOST to show equivalence at a true difference of 0, with n seeds
    per hardware (paired: n pairs whose differences have spread `sd`; unpaired: n seeds on each
    hardware, both with spread `sd`, Welch-TOST). Exact up to quadrature: the estimated
    difference is normal, the sample variance(s) chi-square."""
    n = np.atleast_1d(np.asarray(n, float))
    out = np.zeros(len(n))
    if sd == 0:
        return np.ones(len(n))
    for i, k in enumerate(n):
        if k < 2:
            continue
        chi = sps.chi2.ppf(_NODES, k - 1) / (k - 1)  # s^2 / sd^2
        if paired:
            se = sd * np.sqrt(chi / k)
            t = sps.t.ppf(1 - alpha, k - 1)
            sd_mean = sd / math.sqrt(k)
        else:
            va, vb = np.meshgrid(chi, chi)
            v = sd**2 * (va + vb) / k
            se = np.sqrt(v)
            df = v**2 / ((sd**2 * va / k) ** 2 / (k - 1) + (sd**2 * vb / k) ** 2 / (k - 1))
            t = sps.t.ppf(1 - alpha, df)
            sd_mean = sd * math.sqrt(2 / k)
        p = 2 * sps.norm.cdf((margin - t * se) / sd_mean) - 1
        out[i] = np.clip(p, 0, None).mean()
    return out


def seeds_needed(sd: float, margin: float, alpha: float, paired: bool, target: float = POWER,
                 cap: int = SEEDS_CAP) -> float:  # fmt: skip
    """Fewest seeds per hardware whose TOST shows equivalence with `target` power when the true
    difference is 0 (an assumption: the observed difference is not plugged in); inf above cap."""
    if not np.isfinite(sd):
        return math.nan
    if sd == 0:
        return 2.0
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


# -- equivalence ---------------------------------------------------------------------------


def compare(a: np.ndarray, b: np.ndarray, margin: float, confidence: float, paired: bool = False) -> dict:
    """One metric of one hardware (a) against the baseline (b); paired: a[i] and b[i] are the
    same seed."""
    alpha = 1 - confidence
    a, b = np.asarray(a, float), np.asarray(b, float)
    test = PAIRED if paired else WELCH
    if len(a) < 2 or len(b) < 2:
        return {"test": test, "n": len(a), "n_baseline": len(b), "margin": margin, "verdict": "inconclusive",
                "shifted": False, "note": "needs >= 2 seeds on both"}  # fmt: skip
    d, se, df = paired_stats(a, b) if paired else welch_stats(a, b)
    out = {k: v[0] for k, v in decide(d, se, df, margin, alpha).items()}
    sd = float(np.std(a - b, ddof=1)) if paired else math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    n = len(a) if paired else min(len(a), len(b))
    return {
        "test": test, "n": len(a), "n_baseline": len(b), **out, "verdict": str(out["verdict"]),
        "shifted": bool(out["shifted"]), "margin": margin, "power": float(power(n, sd, margin, alpha, paired)[0]),
        "seeds_needed": seeds_needed(sd, margin, alpha, paired), "note": "",
    }  # fmt: skip


def finding(row, scale: float = 1.0) -> str:
    """The verdict in words: 'equivalent, but shifted by +0.26 points (p = 0.003)'."""
    v = row["verdict"]
    if v == "equivalent":
        if row.get("shifted"):
            return f"equivalent, but shifted by {amount(row['difference'], scale, True)} (p = {row['p_difference']:.2g})"
        return "equivalent"
    if v == "different":
        return f"different: {amount(row['difference'], scale, True)}, beyond ±{amount(row['margin'], scale)}"
    needed = row.get("seeds_needed", math.nan)
    if needed is None or not np.isfinite(needed):
        more = f"more than {SEEDS_CAP} seeds would be needed" if needed == math.inf else "more seeds needed"
    else:
        more = f"{int(needed)} seeds would decide"
    return f"inconclusive — {more}"


EQUIVALENCE_COLUMNS = [
    "suite", "variant", "hardware", "baseline", "metric", "primary", "scale", "test", "n", "n_baseline",
    "difference", "ci_low", "ci_high", "tost_ci_low", "tost_ci_high", "p_difference", "p_tost", "margin", "verdict",
    "shifted", "finding", "power", "seeds_needed", "note",
]  # fmt: skip


def _pairing(sub: pd.DataFrame, base: pd.DataFrame) -> tuple[bool, list, str]:
    """Paired when both ran the same seeds (>= 2 shared) and the seed drives the run."""
    shared = sorted(set(sub.seed) & set(base.seed))
    seeded = "seeded" not in sub or bool(sub.seeded.all() and base.seeded.all())
    if len(shared) < 2 or not seeded:
        return False, shared, "" if seeded else "not seeded: seeds are repeats, compared unpaired"
    alone = sorted(set(sub.seed) ^ set(base.seed))
    return True, shared, f"seeds {alone} not on both: left out of the pairing" if alone else ""


def equivalence(runs: pd.DataFrame, baseline: str, settings: Settings = Settings()) -> pd.DataFrame:
    rows = []
    cells = {key: frame for key, frame in runs.groupby(CELL, sort=False)}
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, variant, baseline))
        if hw == baseline or base is None:
            continue
        paired, shared, note = _pairing(sub, base)
        for metric, margin in settings.margins.items():
            if paired:
                x = sub.set_index("seed")[metric].loc[shared]
                y = base.set_index("seed")[metric].loc[shared]
                ok = x.notna().to_numpy() & y.notna().to_numpy()
                result = compare(x.to_numpy()[ok], y.to_numpy()[ok], margin, settings.confidence, paired=True)
            else:
                result = compare(sub[metric].dropna().to_numpy(), base[metric].dropna().to_numpy(), margin,
                                 settings.confidence)  # fmt: skip
            scale = settings.scales.get(metric, 1.0)
            result["note"] = "; ".join(x for x in (result.get("note", ""), note) if x)
            result["finding"] = finding(result, scale)
            rows.append({"suite": suite, "variant": variant, "hardware": hw, "baseline": baseline, "metric": metric,
                         "primary": metric in settings.primary, "scale": scale} | result)  # fmt: skip
    return pd.DataFrame(rows, columns=EQUIVALENCE_COLUMNS)


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
    mean times, a Welch CI on the log of the means (delta method). NaN CI below 2 seeds."""
    base, new = np.atleast_2d(np.asarray(base, float)), np.atleast_2d(np.asarray(new, float))
    if paired:
        logs = np.log(base) - np.log(new)
        est = np.exp(logs.mean(axis=1))
        low, high = mean_ci(logs, confidence)
        return est, np.exp(low), np.exp(high)
    mb, mn = base.mean(axis=1), new.mean(axis=1)
    est = mb / mn
    if base.shape[1] < 2 or new.shape[1] < 2:
        return est, np.full(len(est), np.nan), np.full(len(est), np.nan)
    vb = base.var(axis=1, ddof=1) / base.shape[1] / mb**2  # var of log mean, delta method
    vn = new.var(axis=1, ddof=1) / new.shape[1] / mn**2
    se = np.sqrt(vb + vn)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(se > 0, (vb + vn) ** 2 / (vb**2 / (base.shape[1] - 1) + vn**2 / (new.shape[1] - 1)), np.inf)
    half = sps.t.ppf(0.5 + confidence / 2, df) * se
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
    return {"value": float(est[0]), "low": float(low[0]), "high": float(high[0]), "method": method, "n_pairs": n}


def amdahl(device_ratio: np.ndarray, speedup: np.ndarray) -> float:
    """Serial fraction f of S(N) = 1 / (f + (1 - f) / N), least squares, 0 <= f <= 1."""
    return amdahl_fit(device_ratio, speedup)[0]


def amdahl_fit(device_ratio: np.ndarray, speedup: np.ndarray) -> tuple[float, float]:
    """(f, standard error of f) from the least-squares fit; the error from the residuals."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a perfect fit has no residual variance: se 0
        fit, cov = optimize.curve_fit(lambda n, f: 1 / (f + (1 - f) / n), device_ratio, speedup, p0=[0.1],
                                      bounds=(0, 1))  # fmt: skip
    se = float(np.sqrt(cov[0, 0])) if np.isfinite(cov[0, 0]) else 0.0
    return float(fit[0]), se


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
        hours_base = float((base.world_size * base.train_seconds).mean() / 3600)
        price, price_base = prices.get(hw), prices.get(baseline)
        cost = hours * price if price is not None else math.nan
        cost_base = hours_base * price_base if price_base is not None else math.nan
        rows.append({
            "suite": suite, "variant": variant, "hardware": hw, "gpu_type": gpu, "world_size": ws,
            "n_pairs": r["n_pairs"], "speedup": r["value"], "speedup_ci_low": r["low"], "speedup_ci_high": r["high"],
            "speedup_method": r["method"],
            "throughput_ratio": sub.samples_per_second.mean() / base.samples_per_second.mean(),
            "device_ratio": ws / ws_base,
            "same_device_type": gpu == gpu_base,
            "time_saved_seconds": base.train_seconds.mean() - sub.train_seconds.mean(),
            "device_hours": hours,
            "device_hours_ratio": hours / hours_base if gpu == gpu_base else math.nan,
            "price_per_device_hour": math.nan if price is None else price, "currency": currency,
            "cost_per_run": cost, "cost_per_cell": cost * len(sub) if price is not None else math.nan,
            "cost_ratio": cost / cost_base if cost_base else math.nan,
            # Whose timings measured other work too: this hardware's runs and the baseline's.
            "contention": "; ".join(c for c in (contention(sub), contention(base) if hw != baseline else "") if c),
        } | _means(sub, [c for c in SPEED_COLUMNS if c != "flops_per_step"]))  # fmt: skip
    out = pd.DataFrame(rows)
    if out.empty:
        return out
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
    """Efficiency within one device type: speedup over its smallest device count / device ratio;
    Amdahl's fit where the type has >= 3 device counts."""
    sub = out.loc[idx]
    smallest = sub[sub.world_size == sub.world_size.min()]
    ref = smallest[smallest.hardware == baseline] if (smallest.hardware == baseline).any() else smallest.iloc[:1]
    ref_hw, ref_ws = ref.hardware.iloc[0], int(ref.world_size.iloc[0])
    suite, variant = sub.suite.iloc[0], sub.variant.iloc[0]
    for i in idx:
        r = _ratio(cells[(suite, variant, ref_hw)], cells[(suite, variant, out.at[i, "hardware"])], settings.confidence)
        out.loc[i, ["scaling_speedup", "scaling_ci_low", "scaling_ci_high"]] = r["value"], r["low"], r["high"]
        out.at[i, "scaling_reference"] = ref_hw
        out.at[i, "efficiency"] = r["value"] / (out.at[i, "world_size"] / ref_ws)
    sub = out.loc[idx]
    if sub.world_size.nunique() >= 3 and np.isfinite(sub.scaling_speedup.to_numpy(float)).all():
        x, y = (sub.world_size / ref_ws).to_numpy(float), sub.scaling_speedup.to_numpy(float)
        f, se = amdahl_fit(x, y)
        k = len(sub) - 1  # residual df of a one-parameter fit
        half = sps.t.ppf(0.5 + settings.confidence / 2, k) * se
        n = 2 * int(sub.world_size.max())
        out.loc[idx, AMDAHL_COLUMNS] = [f, se, max(0.0, f - half), min(1.0, f + half), n,
                                        amdahl_speedup(f, n / ref_ws)]  # fmt: skip


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
    keep = ["speedup", "speedup_ci_low", "speedup_ci_high", "speedup_method", "throughput_ratio", "device_ratio",
            "same_device_type", "efficiency", "scaling_reference", "device_hours", "device_hours_ratio",
            "time_saved_seconds", "price_per_device_hour", "currency", "cost_per_run", "cost_per_cell",
            "cost_ratio", "contention"]  # fmt: skip
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
