"""Time to target (issues 23, 32): per run, the steps, time and cost until a quality target is reached; per
hardware against the baseline, statistics that stay valid when some runs never reach it, at the resolution
the evaluations give.

Per run (`run_rows`): the target was reached after the evaluation before (steps_to_target_low, 0 at the first)
and by the first evaluation at or past it (steps_to_target; with the target's `hold`, the first whose next evaluation
is at or past it too); eval_interval is their spacing. Time-to-target is
measured at both: every startup that began before that step plus the measured step times up to it, the
periodic evaluations' own time left out (a command's step times are not measured: its training time pro rata,
evaluations included; time_source says which). Cost-to-target: devices x time-to-target x price per
device-hour. A run that never reaches the target is kept, censored at its last evaluation (reached False; its
steps and time are then lower bounds). curve_digest fingerprints the curve: seeds with one curve are repeats.

Per hardware (`compare`), with the baseline's runs as the reference:
- share reached on both;
- identical repeats (every seed the same curve on both hardware): stats.REPEATS, nothing compared;
- steps: TOST on log steps-to-target at ±log(1 + steps_margin), paired by seed when seeds are shared (Welch
  with its smallest df otherwise), holding for every placement of the true steps inside the runs' intervals
  (stats.interval_decide): 'the same' at most 1 - confidence of the time at the margin whatever the grid, never
  p = 0; where a verdict is undecided, the note is the advice of the constraint that binds (hwsweep.analysis.advice:
  the grid, the seeds or censoring, with its number; binds, advice, advised_eval_interval, advised_seeds).
  With any censored run no average is formed: "inconclusive: N of M runs did not reach the target";
- RCP-style check (MLPerf's Reference Convergence Points: the baseline's seeds are the reference distribution):
  flagged faster or slower when the steps lie beyond ±steps_margin at the 1 - confidence level, one-sided (the
  t-test on log steps over the intervals as above) when every run reached the target; a shift inside the margin
  is no flag but steps_shifted ('equivalent, but shifted', steps_shift_p the two-sided test of no shift); with censored runs a test valid under censoring: the
  exact sign test over the seeds whose order is known from seeds_to_flag shared seeds, else a log-rank
  permutation test over every run (the statistic lifelines gives), which assume both hardware ran the same
  steps and evaluation interval (censoring at the same point); the note says when the seeds cannot reach p <
  1 - confidence at all (smallest_p);
- time-to-target speedup (geometric mean of per-seed ratios, t CI on log ratios over the runs' intervals;
  unpaired: ratio of geometric means) and the cost-to-target ratio from it, only when every run reached it.
tests/analysis/test_target_simulation.py checks the error rates and coverage by simulation."""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pandas as pd
import scipy  # scipy.stats loads on first use (the Snakefile imports this module through the report)

from hwsweep.analysis import advice, stats
from hwsweep.analysis.advice import finest_interval
from hwsweep.analysis.words import plain
from hwsweep.analysis.stats import CELL
from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.records import KEYS, RunRecord
from hwsweep.contracts.target import STEPS_MARGIN, Target, curve_keys

TARGET = CELL + ["metric", "target"]
MEASURED = "measured step times (startup included, periodic evaluation excluded)"
PRO_RATA = "training time pro rata (step times not measured; periodic evaluation included)"
# The tests' names as the sentences give them; each holds at the evaluations' resolution (interval_decide).
PAIRED_STEPS, WELCH_STEPS = "paired TOST on log steps", "Welch TOST on log steps"
T_RCP = ("one-sided t-test on log steps beyond ±steps_margin at the evaluations' resolution (MLPerf's reference "
         "convergence question; every run reached the target)")  # fmt: skip
SIGN_RCP, LOGRANK_RCP = "exact sign test by seed (censoring-valid)", "log-rank permutation test (censoring-valid)"
SAME_STEP = "every run reached the target at one known step: no spread to test from"
GEOMETRIC_TARGET = "geometric mean of per-seed ratios, t CI on log ratios"
RATIO_TARGET = "ratio of geometric means, Welch CI (smallest df) on log times"
EXACT_UP_TO = 20000  # permutations enumerated up to this many; a seeded random sample of them above
RESAMPLES = 9999
COUNTS = (
    "n_runs",
    "n_reached",
    "share_reached",
    "steps_margin",
    "eval_interval",
    "steps_to_target_median",
    "censored_at_step",
)


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
        startup = record.startup_seconds or 0.0  # unknown: train_seconds holds it
        return startup + record.train_seconds * np.minimum(steps, last) / last, PRO_RATA
    timed = np.concatenate([np.arange(a + 2, a + 2 + n) for a, n in zip(starts, sizes)])
    clock = np.concatenate([[0.0], np.cumsum(record.step_seconds)])
    startup = np.array([g["startup_seconds"] for g in record.segments] or [record.startup_seconds], float)
    evals = np.array(record.periodic_eval_seconds or np.zeros((0, 2)), float).reshape(-1, 2)
    before = np.asarray(starts)[:, None] < steps[None, :]
    eval_before = evals[:, :1] <= steps[None, :]
    return (clock[np.searchsorted(timed, steps, side="right")] + startup @ before
            - evals[:, 1] @ eval_before, MEASURED)  # fmt: skip


def first_reached(steps: list, values: list, target: Target, goal: str) -> tuple[int | None, int]:
    """(index of the first evaluation at or past the target or None, the evaluation interval). With target.hold, the
    first such evaluation whose next one is at or past it too (the last evaluation has none to confirm it)."""
    interval = int(np.median(np.diff(steps))) if len(steps) > 1 else int(steps[0]) if steps else 0
    at = [target.reached(v, goal) for v in values]
    held = [a and (not target.hold or (i + 1 < len(at) and at[i + 1])) for i, a in enumerate(at)]
    hit = next((i for i, h in enumerate(held) if h), None)
    return hit, interval


def digest(steps: list, values: list) -> str:
    """A curve's fingerprint: runs whose seeds give the same curve are repeats, not seeds."""
    return hashlib.sha256(json.dumps([list(steps), list(values)]).encode()).hexdigest()[:16]


def run_rows(record: RunRecord, targets: tuple, metrics: dict, price: float | None, currency: str) -> list[dict]:
    """One row per target: steps, time and cost to it, or where the run was censored (reached False). The target
    was reached after the evaluation before (steps_to_target_low, 0 at the first) and by steps_to_target."""
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
        low = (curve.steps[hit - 1] if hit else 0) if hit is not None else step
        seconds, source = seconds_at(record, [step, max(low, 1)])
        hours = world * float(seconds[0]) / 3600
        rows.append(row | {
            "reached": hit is not None, "steps_to_target": step, "steps_to_target_low": low, "eval_interval": interval,
            "last_evaluated_step": curve.steps[-1], "time_to_target_seconds": float(seconds[0]),
            "time_to_target_low_seconds": float(seconds[1]), "device_hours_to_target": hours,
            "cost_to_target": hours * price if price is not None else math.nan, "time_source": source,
            "curve_digest": digest(curve.steps, curve.values),
            "note": "" if hit is not None else f"censored: not reached by step {step}",
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
# A run is known only to an interval of steps: reached after steps_to_target_low and by steps_to_target, or
# (censored) not reached by its last evaluation. One run is known to reach the target later than another only
# when the other reached it and its own interval starts after the other's ends.


def later(x_low, y_high, y_reached) -> np.ndarray:
    """Whether run x is known to reach the target later than run y: y reached it by y_high, and x had not
    reached it at x_low >= y_high (x_low: the evaluation before x's, or a censored run's last evaluation)."""
    return np.asarray(y_reached, bool) & (np.asarray(x_low, float) >= np.asarray(y_high, float))


def sign_test(a_low, a_high, a_reached, b_low, b_high, b_reached) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided sign test over pairs (a[..., i], b[..., i]) whose order is known (rows: cases):
    (p, later minus earlier pairs of a)."""
    up = later(a_low, b_high, b_reached).sum(axis=-1)
    down = later(b_low, a_high, a_reached).sum(axis=-1)
    n, k = up + down, np.minimum(up, down)
    with np.errstate(invalid="ignore"):
        p = np.where(n > 0, np.minimum(1.0, 2 * scipy.stats.binom.cdf(k, n, 0.5)), 1.0)
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


def logrank_scores(high, reached) -> np.ndarray:
    """Each run's log-rank score (rows: cases): reached (1 or 0) minus the events it was expected to have,
    sum of d / n over the evaluations at which the target was reached while it was at risk (a run is at risk
    at an evaluation up to its own: a censored run at its last evaluation too). The runs' evaluations are
    the same steps, so runs reaching the target at one evaluation are tied, as the evaluations resolve them."""
    x, r = np.atleast_2d(np.asarray(high, float)), np.atleast_2d(np.asarray(reached, bool))
    event = r[:, :, None] & (x[:, :, None] == x[:, None, :])  # [c, i, j]: run i reached it at run j's step
    at_risk = x[:, :, None] >= x[:, None, :]  # [c, i, j]: run i had not reached it before run j's step
    d = event.sum(axis=1)  # events at run j's step
    n = at_risk.sum(axis=1)
    # A run j that reached the target stands for its step once: weight 1 / (events at that step).
    hazard = np.where(r, d / np.maximum(n, 1) / np.maximum(d, 1), 0.0)  # [c, j]
    return r - np.einsum("cij,cj->ci", at_risk.astype(float), hazard)


def logrank_test(a_high, a_reached, b_high, b_reached, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two-sample log-rank test of a against b (rows: cases) by permutation of the group labels, exact up to
    EXACT_UP_TO label sets: (two-sided p, observed minus expected runs of a reaching the target: negative when
    a reaches it later). Valid at any number of seeds when both are censored alike (the same steps and
    evaluations); its chi-square form (O - E)^2 / V is the one lifelines.statistics.logrank_test gives."""
    high = np.concatenate([np.atleast_2d(a_high), np.atleast_2d(b_high)], axis=-1)
    reached = np.concatenate([np.atleast_2d(a_reached), np.atleast_2d(b_reached)], axis=-1)
    scores = logrank_scores(high, reached)
    n, k = scores.shape[1], np.atleast_2d(a_high).shape[1]
    groups = _label_sets(n, k, seed)
    observed = scores[:, :k].sum(axis=1)
    null = scores @ groups.T
    extreme = np.sum(np.abs(null) >= np.abs(observed)[:, None] - 1e-9, axis=1)
    exact = len(groups) == math.comb(n, k)
    return (extreme / len(groups) if exact else (extreme + 1) / (len(groups) + 1)), observed


def smallest_p(n: int, k: int | None = None) -> float:
    """The smallest two-sided p the censoring-valid test can give: the sign test over n pairs (k None), or the
    permutation test of k of n runs (exact)."""
    if k is None:
        return min(1.0, 2 * 0.5**n) if n else 1.0
    return min(1.0, 2 / math.comb(n, k)) if 0 < k < n else 1.0


def seeds_to_flag(alpha: float, paired: bool) -> int:
    """The fewest seeds (pairs; or per hardware, unpaired) with which the censoring-valid test can flag at alpha."""
    n = 1
    while (smallest_p(n) if paired else smallest_p(2 * n, n)) >= alpha:
        n += 1
    return n


# -- per hardware against the baseline ----------------------------------------------------


def cost_ratio(speedup: tuple, price: float, price_base: float, devices: int, devices_base: int) -> list[float]:
    """Cost-to-target ratio (estimate, low, high) from the time speedup and its CI: price and device ratios
    over the speedup, so the cost follows the speedup's own mean."""
    per_hour = price / price_base if finite_positive(price) and finite_positive(price_base) else math.nan
    return [per_hour * devices / devices_base / s for s in (speedup[0], speedup[2], speedup[1])]


def finite_positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def steps_box(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Log steps-to-target as intervals: after the evaluation before (at least step 1) and by the one that
    reached the target."""
    return tuple(np.log(np.maximum(x, 1)) for x in steps_box_steps(frame))


def steps_box_steps(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Steps-to-target as intervals in steps (after the evaluation before, by the one that reached it)."""
    return frame.steps_to_target_low.to_numpy(float), frame.steps_to_target.to_numpy(float)


def time_box(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Log time-to-target as intervals: the time at the evaluation before (or at step 1) and at the one that
    reached the target."""
    return (np.log(frame.time_to_target_low_seconds.to_numpy(float)),
            np.log(frame.time_to_target_seconds.to_numpy(float)))  # fmt: skip


def censored_check(base: pd.DataFrame, sub: pd.DataFrame, shared: list, alpha: float) -> dict:
    """The RCP-style check with censored runs: the exact sign test over the shared seeds from seeds_to_flag of
    them, else (unpaired seeds, or too few pairs for it) the log-rank permutation test over every run, valid
    when both hardware are censored alike; where a seed shares its effect on both hardware the unpaired test is
    conservative."""
    if len(shared) >= seeds_to_flag(alpha, True):
        b, s = (f.set_index("seed").loc[shared] for f in (base, sub))
        columns = ("steps_to_target_low", "steps_to_target", "reached")
        p, way = sign_test(*(f[c].to_numpy()[None] for f in (s, b) for c in columns))
        p, slower, method, least = float(p[0]), float(way[0]) > 0, SIGN_RCP, smallest_p(len(s))
    else:
        b, s = base, sub
        p, excess = logrank_test(*(f[c].to_numpy()[None] for f in (s, b) for c in ("steps_to_target", "reached")))
        p, slower, method, least = float(p[0]), float(excess[0]) < 0, LOGRANK_RCP, smallest_p(len(s) + len(b), len(s))
    cannot = least >= alpha
    note = (f"the {method.split(' (')[0]} cannot reach p < {plain(alpha, 3)} with {len(s)} and {len(b)} seeds (smallest p "
            f"{plain(least, 2)}): it needs ≥ {seeds_to_flag(alpha, False)} seeds per hardware, or ≥ "
            f"{seeds_to_flag(alpha, True)} shared seeds for the sign test by seed") if cannot else ""  # fmt: skip
    return {"rcp_method": method, "rcp_p": p, "rcp_smallest_p": least, "rcp_note": note,
            "rcp_flag": ("slower" if slower else "faster") if p < alpha else ""}  # fmt: skip


def median(frame: pd.DataFrame) -> dict:
    """The median steps-to-target (NaN where half the runs or more never reached the target: it lies past their
    budget) and the last step a censored run was evaluated at (NaN when every run reached it)."""
    steps = np.where(frame.reached, frame.steps_to_target.to_numpy(float), np.inf)
    middle = float(np.median(steps)) if len(steps) else math.nan
    censored = frame.steps_to_target[~frame.reached.astype(bool)]
    return {"steps_to_target_median": middle if math.isfinite(middle) else math.nan,
            "censored_at_step": float(censored.max()) if len(censored) else math.nan}  # fmt: skip


def compare_one(base: pd.DataFrame, sub: pd.DataFrame, margin: float, confidence: float) -> dict:
    """One hardware's runs (sub) against the baseline's (base) for one target. Each run's steps and time are
    known to the interval between two evaluations: the tests hold for every placement inside them
    (stats.interval_decide)."""
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
           } | median(sub) | {f"baseline_{k}": v for k, v in median(base).items()}  # fmt: skip
    out |= advice.none() | {"speedup_advice": ""}
    if len(b) < 2 or len(s) < 2:
        return out | {"steps_verdict": "inconclusive", "steps_test": "", "rcp_flag": "",
                      "note": "needs >= 2 seeds on both"}  # fmt: skip
    if stats.repeats(s.curve_digest.to_numpy(), b.curve_digest.to_numpy()):
        return out | {"steps_verdict": "inconclusive", "steps_test": "", "rcp_flag": "", "note": stats.REPEATS}
    if missing:
        last = float(pd.concat([b, s]).steps_to_target[~pd.concat([b, s]).reached.astype(bool)].max())
        said = advice.censored(missing, n, last)
        return out | said | {"steps_verdict": "inconclusive", "steps_test": "", "note": f"inconclusive: {said['advice']}"} | \
            censored_check(base, sub, shared, alpha)  # fmt: skip
    tested = {k: v[0] for k, v in stats.interval_decide(*steps_box(s), *steps_box(b), math.log1p(margin), alpha,
                                                         paired).items()}  # fmt: skip
    if not tested["spread"]:  # every run exactly at one step on both: no spread, nothing to test from
        return out | {"steps_verdict": "inconclusive", "steps_test": "", "rcp_flag": "", "note": SAME_STEP}
    ratio = {k: math.exp(tested[k]) for k in ("difference", "ci_low", "ci_high", "tost_ci_low", "tost_ci_high")}
    # The RCP-style flag asks MLPerf's question, one-sided: beyond the margin the reference's spread allows. A
    # shift inside it is 'equivalent, but shifted' (steps_shifted), never a flag beside 'the same'.
    flag = ("slower" if tested["beyond_above"] else "faster") if tested["p_beyond"] < alpha else ""
    finest = finest_interval(len(s), len(b), float(b.steps_to_target.median()), margin, alpha, paired)
    out |= {"steps_ratio": ratio["difference"], "steps_ci_low": ratio["ci_low"], "steps_ci_high": ratio["ci_high"],
            "steps_tost_ci_low": ratio["tost_ci_low"], "steps_tost_ci_high": ratio["tost_ci_high"],
            "steps_test": PAIRED_STEPS if paired else WELCH_STEPS, "steps_verdict": str(tested["verdict"]),
            "steps_p_tost": tested["p_tost"], "finest_eval_interval": finest, "rcp_method": T_RCP,
            "rcp_p": tested["p_beyond"], "rcp_flag": flag, "note": "", "steps_shift_p": tested["p_difference"],
            "steps_shifted": tested["verdict"] == "equivalent" and tested["p_difference"] < alpha}  # fmt: skip
    if out["steps_verdict"] == "inconclusive":
        out |= advice.steps(*steps_box_steps(s), *steps_box_steps(b), margin, alpha, paired, out["eval_interval"])
        out["note"] = out["advice"]
    times = stats.interval_decide(*time_box(b), *time_box(s), math.nan, alpha, paired)
    speed = [math.exp(times[k][0]) for k in ("difference", "ci_low", "ci_high")]
    mids = [np.exp(sum(time_box(f)) / 2) for f in (b, s)]  # each run's time at the middle of its interval
    out["speedup_advice"] = advice.speedup(*mids, speed[1], speed[2], alpha, paired)["advice"]
    cost = cost_ratio(speed, sub.price_per_device_hour.iloc[0], base.price_per_device_hour.iloc[0],
                      int(sub.world_size.iloc[0]), int(base.world_size.iloc[0]))  # fmt: skip
    return out | {"speedup": speed[0], "speedup_ci_low": speed[1], "speedup_ci_high": speed[2],
                  "speedup_method": GEOMETRIC_TARGET if paired else RATIO_TARGET,
                  "time_to_target_seconds": float(sub.time_to_target_seconds.mean()),
                  "cost_to_target": float(sub.cost_to_target.mean()),
                  "cost_ratio": cost[0], "cost_ratio_ci_low": cost[1], "cost_ratio_ci_high": cost[2]}  # fmt: skip


def with_intervals(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows written before the intervals were recorded (issue 32) get them from what they have, never narrower:
    the evaluation before is eval_interval steps back, the time there pro rata to the steps (below the measured
    one, which adds the startup); a run's fingerprint is its steps and time."""
    runs = runs.copy()
    reached = runs.reached.astype(bool)
    if "steps_to_target_low" not in runs:
        runs["steps_to_target_low"] = np.where(reached, np.maximum(runs.steps_to_target - runs.eval_interval, 0),
                                               runs.steps_to_target)  # fmt: skip
    if "time_to_target_low_seconds" not in runs:
        share = np.maximum(runs.steps_to_target_low, 1) / np.maximum(runs.steps_to_target, 1)
        runs["time_to_target_low_seconds"] = np.where(reached, runs.time_to_target_seconds * share,
                                                      runs.time_to_target_seconds)  # fmt: skip
    if "curve_digest" not in runs:
        runs["curve_digest"] = [f"{a}/{b}" for a, b in zip(runs.steps_to_target, runs.time_to_target_seconds)]
    return runs


def compare(runs: pd.DataFrame, baseline: str, margins: dict, confidence: float = 0.95) -> pd.DataFrame:
    """Per suite x variant x hardware x target: compare_one against the baseline's runs (the baseline's
    own row: its share reached). `margins`: (metric, target value) -> steps_margin."""
    rows = []
    runs = with_intervals(runs[runs.steps_to_target.notna()])
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
