"""Time to target (issue 23): per run, the steps, time and cost until a quality target is reached; per
hardware against the baseline, statistics that stay valid when some runs never reach it.

Per run (`run_rows`): steps-to-target is the first periodic evaluation at or past the target (resolution:
the evaluation interval, recorded as eval_interval). Time-to-target is measured: every startup that began
before that step plus the measured step times up to it, the periodic evaluations' own time left out (a
command's step times are not measured: its training time pro rata, evaluations included; time_source says
which). Cost-to-target: devices x time-to-target x price per device-hour. A run that never reaches the target
is kept, censored at its last evaluation (reached False; its steps and time are then lower bounds).

Per hardware (`compare`), with the baseline's runs as the reference:
- share reached on both;
- steps: TOST on log steps-to-target at ±log(1 + steps_margin), paired by seed when seeds are shared (Welch
  otherwise); with any censored run no average is formed: "inconclusive: N of M runs did not reach the target";
- RCP-style check (MLPerf's Reference Convergence Points: the baseline's seeds are the reference distribution):
  flagged faster or slower when steps differ at the 1 - confidence level: the t-test on log steps when every run
  reached the target; with censored runs an exact rank test valid under censoring (paired: sign test over the
  seeds whose order is known; unpaired: Gehan's generalised Wilcoxon by permutation), which assumes both
  hardware ran the same steps and evaluation interval (censoring at the same point);
- time-to-target speedup (geometric mean of per-seed ratios, t CI on log ratios; unpaired: ratio of means) and
  the cost-to-target ratio from it, only when every run reached the target.
tests/test_target_simulation.py checks the error rates and coverage by simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from hwsweep.analysis.stats import CELL, decide, paired_stats, speedup_ci, welch_stats
from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.records import KEYS, RunRecord
from hwsweep.contracts.target import STEPS_MARGIN, Target, curve_keys

TARGET = CELL + ["metric", "target"]
MEASURED = "measured step times (startup included, periodic evaluation excluded)"
PRO_RATA = "training time pro rata (step times not measured; periodic evaluation included)"
PAIRED_STEPS, WELCH_STEPS = "paired TOST on log steps", "Welch TOST on log steps"
T_RCP = "t-test on log steps (every run reached the target)"
SIGN_RCP, GEHAN_RCP = "exact sign test by seed (censoring-valid)", "Gehan-Wilcoxon permutation test (censoring-valid)"
EXACT_UP_TO = 20000  # permutations enumerated up to this many; a seeded random sample of them above
RESAMPLES = 9999
COUNTS = ("n_runs", "n_reached", "share_reached", "steps_margin", "eval_interval", "steps_to_target_median")


# -- per run ----------------------------------------------------------------------------------


def seconds_at(record: RunRecord, steps) -> tuple[np.ndarray, str]:
    """Seconds from the start to the end of each of `steps` and how they were found (MEASURED or PRO_RATA).
    Each segment's first step is in its startup, not in step_seconds."""
    steps = np.asarray(steps, float)
    starts = [int(g["start_step"]) for g in record.segments] or [0]
    sizes = [max(b - a - 1, 0) for a, b in zip(starts, starts[1:])]
    sizes.append(len(record.step_seconds) - sum(sizes))
    if not record.step_seconds or sizes[-1] < 0:
        trained = record.stopped_at_step or record.plan.get("steps") or 0  # the steps train_seconds covers
        last = max(float(trained), float(steps.max(initial=0)), 1.0)
        return record.startup_seconds + record.train_seconds * np.minimum(steps, last) / last, PRO_RATA
    timed = np.concatenate([np.arange(a + 2, a + 2 + n) for a, n in zip(starts, sizes)])
    clock = np.concatenate([[0.0], np.cumsum(record.step_seconds)])
    startup = np.array([g["startup_seconds"] for g in record.segments] or [record.startup_seconds], float)
    evals = np.array(record.periodic_eval_seconds or np.zeros((0, 2)), float).reshape(-1, 2)
    before = np.asarray(starts)[:, None] < steps[None, :]
    eval_before = evals[:, :1] <= steps[None, :]
    return (clock[np.searchsorted(timed, steps, side="right")] + startup @ before
            - evals[:, 1] @ eval_before, MEASURED)  # fmt: skip


def first_reached(steps: list, values: list, target: Target, goal: str) -> tuple[int | None, int]:
    """(index of the first evaluation at or past the target or None, the evaluation interval)."""
    interval = int(np.median(np.diff(steps))) if len(steps) > 1 else int(steps[0]) if steps else 0
    hit = next((i for i, v in enumerate(values) if target.reached(v, goal)), None)
    return hit, interval


def run_rows(record: RunRecord, targets: tuple, metrics: dict, price: float | None, currency: str) -> list[dict]:
    """One row per target: steps, time and cost to it, or where the run was censored (reached False)."""
    base = {k: getattr(record, k) for k in KEYS}
    world = int(record.plan.get("world_size") or 1)
    rows = []
    for target in targets:
        metric: Metric = metrics[target.metric]
        key = next((k for k in curve_keys(metric) if k in record.curves), None)
        row = base | {"metric": target.metric, "target": target.value, "goal": metric.goal, "curve": key,
                      "world_size": world, "price_per_device_hour": math.nan if price is None else price,
                      "currency": currency}  # fmt: skip
        curve = record.curve(key) if key else None
        if curve is None or not curve.steps:
            rows.append(row | {"reached": False, "steps_to_target": math.nan, "note": "no per-step curve logged"})
            continue
        hit, interval = first_reached(curve.steps, curve.values, target, metric.goal)
        step = curve.steps[hit if hit is not None else -1]
        seconds, source = seconds_at(record, [step])
        hours = world * float(seconds[0]) / 3600
        rows.append(row | {
            "reached": hit is not None, "steps_to_target": step, "eval_interval": interval,
            "last_evaluated_step": curve.steps[-1], "time_to_target_seconds": float(seconds[0]),
            "device_hours_to_target": hours, "cost_to_target": hours * price if price is not None else math.nan,
            "time_source": source, "note": "" if hit is not None else f"censored: not reached by step {step}",
        })  # fmt: skip
    return rows


def curve_rows(record: RunRecord, targets: tuple, metrics: dict) -> list[dict]:
    """Each target metric's curve against steps and seconds (the figure's data)."""
    base = {k: getattr(record, k) for k in KEYS}
    rows = []
    for name in dict.fromkeys(t.metric for t in targets):
        key = next((k for k in curve_keys(metrics[name]) if k in record.curves), None)
        if key:
            curve = record.curve(key)
            seconds, _ = seconds_at(record, curve.steps)
            rows += [base | {"metric": name, "step": s, "seconds": float(t), "value": v}
                     for s, t, v in zip(curve.steps, seconds, curve.values)]  # fmt: skip
    return rows


# -- censoring-valid rank tests (vectorised) ------------------------------------------------


def later(x, x_reached, y, y_reached) -> np.ndarray:
    """Whether run x is known to reach the target later than run y: y reached it at y, and x reached it
    after y or had not reached it by step x >= y (censored at x)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    xr, yr = np.asarray(x_reached, bool), np.asarray(y_reached, bool)
    return yr & np.where(xr, x > y, x >= y)


def sign_test(a, a_reached, b, b_reached) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided sign test over pairs (a[..., i], b[..., i]) whose order is known (rows: cases):
    (p, later minus earlier pairs of a)."""
    up = later(a, a_reached, b, b_reached).sum(axis=-1)
    down = later(b, b_reached, a, a_reached).sum(axis=-1)
    n, k = up + down, np.minimum(up, down)
    with np.errstate(invalid="ignore"):
        p = np.where(n > 0, np.minimum(1.0, 2 * sps.binom.cdf(k, n, 0.5)), 1.0)
    return p, up - down


def _label_sets(n: int, k: int, seed: int) -> np.ndarray:
    """Every way to pick k of n runs as one hardware's (rows of 0/1), or RESAMPLES random ones above EXACT_UP_TO."""
    if math.comb(n, k) <= EXACT_UP_TO:
        groups = np.zeros((math.comb(n, k), n))
        for i, chosen in enumerate(itertools.combinations(range(n), k)):
            groups[i, list(chosen)] = 1
        return groups
    rng = np.random.default_rng(seed)
    return (np.argsort(rng.random((RESAMPLES, n)), axis=1) < k).astype(float)


def gehan_test(a, a_reached, b, b_reached, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gehan's generalised Wilcoxon of a against b (rows: cases) by permutation of the group labels:
    (two-sided p, the statistic: pairs where a is known later minus known earlier). Exact up to EXACT_UP_TO
    label sets; valid under censoring when both groups are censored alike (the same steps and evaluations)."""
    x = np.atleast_2d(np.concatenate([np.atleast_2d(a), np.atleast_2d(b)], axis=-1).astype(float))
    r = np.atleast_2d(np.concatenate([np.atleast_2d(a_reached), np.atleast_2d(b_reached)], axis=-1).astype(bool))
    n, k = x.shape[1], np.atleast_2d(a).shape[1]
    score = (later(x[:, :, None], r[:, :, None], x[:, None, :], r[:, None, :]).astype(float)
             - later(x[:, None, :], r[:, None, :], x[:, :, None], r[:, :, None]))  # fmt: skip
    groups = _label_sets(n, k, seed)
    mine = np.r_[np.ones(k), np.zeros(n - k)]
    observed = np.einsum("i,cij,j->c", mine, score, 1 - mine)
    null = np.einsum("pi,cij,pj->cp", groups, score, 1 - groups, optimize=True)
    extreme = np.sum(np.abs(null) >= np.abs(observed)[:, None] - 1e-9, axis=1)
    exact = len(groups) == math.comb(n, k)
    return (extreme / len(groups) if exact else (extreme + 1) / (len(groups) + 1)), observed


# -- per hardware against the baseline ----------------------------------------------------


def not_reached(n_missing: int, n: int) -> str:
    return f"inconclusive: {n_missing} of {n} runs did not reach the target"


def cost_ratio(speedup: tuple, price: float, price_base: float, devices: int, devices_base: int) -> list[float]:
    """Cost-to-target ratio (estimate, low, high) from the time speedup and its CI: price and device ratios
    over the speedup, so the cost follows the speedup's own mean."""
    per_hour = price / price_base if finite_positive(price) and finite_positive(price_base) else math.nan
    return [per_hour * devices / devices_base / s for s in (speedup[0], speedup[2], speedup[1])]


def finite_positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def compare_one(base: pd.DataFrame, sub: pd.DataFrame, margin: float, confidence: float) -> dict:
    """One hardware's runs (sub) against the baseline's (base) for one target."""
    alpha = 1 - confidence
    shared = sorted(set(base.seed) & set(sub.seed))
    paired = len(shared) >= 2
    b = base.set_index("seed").loc[shared] if paired else base
    s = sub.set_index("seed").loc[shared] if paired else sub
    n, missing = len(b) + len(s), int((~b.reached).sum() + (~s.reached).sum())
    out = {"n_runs": len(sub), "n_reached": int(sub.reached.sum()), "share_reached": float(sub.reached.mean()),
           "baseline_n_runs": len(base), "baseline_n_reached": int(base.reached.sum()),
           "n_pairs": len(shared) if paired else 0, "steps_margin": margin,
           "eval_interval": float(pd.concat([base, sub]).eval_interval.max()),
           "steps_to_target_median": float(sub.steps_to_target.median()),
           "baseline_steps_to_target_median": float(base.steps_to_target.median())}  # fmt: skip
    if len(b) < 2 or len(s) < 2:
        return out | {"steps_verdict": "inconclusive", "steps_test": "", "rcp_flag": "",
                      "note": "needs >= 2 seeds on both"}  # fmt: skip
    if missing:
        args = [np.asarray(x)[None] for x in (s.steps_to_target, s.reached, b.steps_to_target, b.reached)]
        p, way = (float(v[0]) for v in (sign_test if paired else gehan_test)(*args))
        flag = ("slower" if way > 0 else "faster") if p < alpha else ""
        out |= {"steps_verdict": "inconclusive", "steps_test": "", "steps_finding": not_reached(missing, n),
                "rcp_method": SIGN_RCP if paired else GEHAN_RCP, "rcp_p": p, "rcp_flag": flag,
                "time_finding": not_reached(missing, n), "note": not_reached(missing, n)}  # fmt: skip
        return out
    ls, lb = np.log(s.steps_to_target.to_numpy(float)), np.log(b.steps_to_target.to_numpy(float))
    d, se, df = paired_stats(ls, lb) if paired else welch_stats(ls, lb)
    tested = {k: v[0] for k, v in decide(d, se, df, math.log1p(margin), alpha).items()}
    ratio = [math.exp(tested[k]) for k in ("difference", "ci_low", "ci_high")]
    flag = ("slower" if ratio[1] > 1 else "faster") if ratio[1] > 1 or ratio[2] < 1 else ""
    out |= {"steps_ratio": ratio[0], "steps_ci_low": ratio[1], "steps_ci_high": ratio[2],
            "steps_test": PAIRED_STEPS if paired else WELCH_STEPS, "steps_verdict": str(tested["verdict"]),
            "steps_p_tost": tested["p_tost"], "rcp_method": T_RCP, "rcp_p": tested["p_difference"], "rcp_flag": flag,
            "note": ""}  # fmt: skip
    tb, ts = b.time_to_target_seconds.to_numpy(float), s.time_to_target_seconds.to_numpy(float)
    speed = [float(x[0]) for x in speedup_ci(tb, ts, confidence, paired)]
    cost = cost_ratio(speed, sub.price_per_device_hour.iloc[0], base.price_per_device_hour.iloc[0],
                      int(sub.world_size.iloc[0]), int(base.world_size.iloc[0]))  # fmt: skip
    return out | {"speedup": speed[0], "speedup_ci_low": speed[1], "speedup_ci_high": speed[2],
                  "speedup_method": "geometric mean of per-seed ratios, t CI on log ratios" if paired
                  else "ratio of mean times, Welch CI on log means",
                  "time_to_target_seconds": float(ts.mean()), "cost_to_target": float(s.cost_to_target.mean()),
                  "cost_ratio": cost[0], "cost_ratio_ci_low": cost[1], "cost_ratio_ci_high": cost[2]}  # fmt: skip


def compare(runs: pd.DataFrame, baseline: str, margins: dict, confidence: float = 0.95) -> pd.DataFrame:
    """Per suite x variant x hardware x target: compare_one against the baseline's runs (the baseline's
    own row: its share reached). `margins`: (metric, target value) -> steps_margin."""
    rows = []
    runs = runs[runs.steps_to_target.notna()]
    for (suite, variant, metric, value), group in runs.groupby(["suite", "variant", "metric", "target"], sort=False):
        base = group[group.hardware == baseline]
        if base.empty:
            continue
        for hw, sub in group.groupby("hardware", sort=False):
            key = {"suite": suite, "variant": variant, "hardware": hw, "metric": metric, "target": value,
                   "goal": sub.goal.iloc[0], "baseline": hw == baseline, "currency": sub.currency.iloc[0]}  # fmt: skip
            result = compare_one(base, sub, margins.get((metric, value), STEPS_MARGIN), confidence)
            if hw == baseline:  # the reference itself: its share reached and steps, nothing compared
                result = {k: v for k, v in result.items() if k in COUNTS} | {"steps_verdict": "baseline"}
            rows.append(key | result)
    return pd.DataFrame(rows)


def load(train_paths, targets: tuple, metrics: list[Metric], prices: dict, currency: str):
    """(time_to_target rows, one per run and target; target curves) from the suite's train records."""
    from hwsweep.contracts import records

    by_name = {m.name: m for m in metrics}
    rows, curves = [], []
    for path in train_paths:
        record = records.read(RunRecord, path, metrics)
        rows += run_rows(record, targets, by_name, prices.get(record.hardware), currency)
        curves += curve_rows(record, targets, by_name)
    return pd.DataFrame(rows), pd.DataFrame(curves, columns=KEYS + ["metric", "step", "seconds", "value"])
