"""Advice from the binding constraint (issue 68): for a verdict the data do not decide, which of the evaluation
grid, the number of seeds or censoring keeps it undecided, and that one fix with its number. None where the data
decide.

- censoring binds where a run never reached the target: more seeds and a finer grid cannot place a step that
  was never observed (CENSORING: a longer run or an easier target);
- the grid binds where every run reached the target at the first evaluation (nothing before it is known: more
  seeds cannot narrow it), or where the runs' own midpoints, as if evaluated every step, would decide: evaluate
  every <= N steps, N the coarsest grid at which they still decide, halved so that fresh seeds decide too
  (tests/analysis/test_advice.py re-runs the simulation at the advised grid);
- the seeds bind elsewhere: the seeds that decide either way at the observed difference 80% of the time
  (stats.seeds_to_decide), the grid's worst case taken off the margin's room.

The words are one vocabulary (GRID, SEEDS, CENSORING), and binds names which."""

from __future__ import annotations

import math

import numpy as np

from hwsweep.analysis import stats
from hwsweep.analysis.stats.metric_advice import CENSORING, SEEDS
from hwsweep.analysis.words import percent

GRID = "grid"
# SEEDS and CENSORING: one vocabulary with a metric's advice (stats.metric_advice)


def none() -> dict:
    return {"binds": "", "advice": "", "advised_eval_interval": math.nan, "advised_seeds": math.nan}


def censored(n_missing: int, n: int, last_step: float) -> dict:
    """Runs that never reached the target: only a longer run or an easier target places them."""
    by = f" by step {last_step:.0f}" if math.isfinite(last_step) else ""
    return {"binds": CENSORING, "advised_eval_interval": math.nan, "advised_seeds": math.nan,
            "advice": f"{n_missing} of {n} runs did not reach the target{by}: more seeds or evaluations cannot place "
                      "them; a longer run or an easier target"}  # fmt: skip


UNKNOWN_SPREAD = 2  # where the boxes hide the seeds' spread (wide, or all at the first evaluation): the grid / this
TRIALS = 200  # fresh experiments simulated per candidate fix
PLAN_SEED = 0  # the simulation's fixed RNG: one advice for one table


def every(steps: int) -> str:
    return "every step" if steps == 1 else f"every ≤ {steps} steps"


class Plan:
    """Fresh experiments like these runs': log steps normal around each side's mean with the seeds' spread (the
    midpoints' variance less the grid's own, w^2 / 12 of a box w wide, planned at its upper SPREAD_BOUND), a shared
    seed effect where paired, seen on an evaluation grid whose phase falls anywhere."""

    def __init__(self, a_low, a_high, b_low, b_high, margin: float, alpha: float, paired: bool):
        la, lb = ((np.log(np.maximum(lo, 1)) + np.log(np.maximum(hi, 1))) / 2 for lo, hi in ((a_low, a_high), (b_low, b_high)))
        wa, wb = (np.log(np.maximum(hi, 1)) - np.log(np.maximum(lo, 1)) for lo, hi in ((a_low, a_high), (b_low, b_high)))
        self.base, self.d = float(lb.mean()), float(la.mean() - lb.mean())
        self.margin, self.alpha, self.paired = margin, alpha, paired

        def spread(values, widths) -> float:
            return math.sqrt(max(float(np.var(values, ddof=1)) - float(np.mean(widths**2)) / 12, 0.0))

        self.observed = (spread(lb, wb), spread(la - lb, np.sqrt(wa**2 + wb**2)) if paired else spread(la, wa))
        df = max(len(lb) - 1, 1)
        self.sd_b, self.sd_diff = (stats.spread_bound(x, df) for x in self.observed)  # planned at the upper bound

    def chance(self, n: int, interval: float) -> float:
        """The share of fresh experiments with n seeds, evaluated every `interval` steps, that decide."""
        rng = np.random.default_rng(PLAN_SEED)
        base = self.base + rng.normal(0, self.sd_b, (TRIALS, n))
        new = (base + self.d if self.paired else self.base + self.d) + rng.normal(0, self.sd_diff, (TRIALS, n))
        phase = rng.uniform(0, interval, (TRIALS, 1))
        boxes = []
        for x in (new, base):
            high = np.ceil((np.exp(x) - phase) / interval) * interval + phase
            boxes += [np.log(np.maximum(high - interval, 1)), np.log(np.maximum(high, 1))]
        verdict = stats.interval_decide(*boxes, math.log1p(self.margin), self.alpha, self.paired)["verdict"]
        return float(np.mean(verdict != "inconclusive"))

    def coarsest(self, n: int, top: float) -> int:
        """The coarsest grid (steps, up to `top`) at which n seeds decide POWER of the time; 0 at none."""
        if self.chance(n, 1.0) < stats.POWER:
            return 0
        low, high = 1, max(int(top), 2)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self.chance(n, mid) >= stats.POWER else (low, mid)
        return low

    def fewest(self, interval: float) -> float:
        """The fewest seeds per hardware (up to stats.SEEDS_CAP) that decide POWER of the time on this grid; inf."""
        if self.chance(stats.SEEDS_CAP, interval) < stats.POWER:
            return math.inf
        low, high = 2, stats.SEEDS_CAP
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if self.chance(mid, interval) >= stats.POWER else (mid + 1, high)
        return float(low)


def steps(a_low, a_high, b_low, b_high, margin: float, alpha: float, paired: bool, interval: float) -> dict:
    """The binding constraint of an undecided steps-to-target comparison, every run having reached the target
    (a: this hardware, b: the baseline; steps after the evaluation before, by the one that reached it): the fix
    that decides POWER of the fresh experiments planned from these runs (Plan), the grid tried before the seeds."""
    a_low, a_high, b_low, b_high = (np.asarray(x, float) for x in (a_low, a_high, b_low, b_high))
    n = len(a_high) if paired else min(len(a_high), len(b_high))
    first = (a_low == 0).all() and (b_low == 0).all()  # every run by the first evaluation: nothing known before it
    step = float(max(a_high.max(), b_high.max()))
    if first:  # where it is reached is unknown: planned for half the first evaluation
        plan_at = max(step // 2, 1.0)
        a_low, b_low, a_high, b_high = a_low + plan_at - 0.5, b_low + plan_at - 0.5, a_low + plan_at + 0.5, b_low + plan_at + 0.5
    plan = Plan(a_low, a_high, b_low, b_high, margin, alpha, paired)
    half = float(np.mean(np.log(np.maximum(a_high, 1)) - np.log(np.maximum(a_low, 1)))
                 + np.mean(np.log(np.maximum(b_high, 1)) - np.log(np.maximum(b_low, 1)))) / 2  # fmt: skip
    wide = first or half >= math.log1p(margin) / 2  # boxes this wide hide the difference and the spread: the grid
    if wide:  # binds, planned at no difference with the spread as the midpoints show it (no bound from 2 df of boxes)
        plan.d, plan.sd_b, plan.sd_diff = 0.0, *plan.observed
    finest = plan.coarsest(n, interval)
    if wide and not first and finest < 1:  # not even every step decides at that spread: the grid whose boxes take a quarter of it
        finest = max(int(math.exp(np.median(np.concatenate([np.log(np.maximum(a_high, 1)), np.log(np.maximum(b_high, 1))])))
                          * math.log1p(margin) / 4), 1)  # fmt: skip
    if wide:  # the seeds' spread is hidden too (boxes wider than it): planned with the margin to spare
        finest = max(finest // UNKNOWN_SPREAD, 1) if finest >= 1 else 0
    if first:
        earlier = (f"evaluate earlier ({every(finest)}: enough where it is reached after step {plan_at:.0f}) or set "
                   "a harder target") if finest >= 1 else \
            f"set a harder target (±{percent(margin)} of {step:.0f} steps cannot be resolved)"  # fmt: skip
        return {"binds": GRID, "advised_eval_interval": float(finest) if finest >= 1 else math.nan,
                "advised_seeds": math.nan,
                "advice": f"every run reached the target at the first evaluation (step {step:.0f}): more seeds cannot "
                          f"narrow it; {earlier}"}  # fmt: skip
    if 1 <= finest < interval or wide:
        return {"binds": GRID, "advised_eval_interval": float(finest), "advised_seeds": math.nan,
                "advice": f"evaluations every {interval:.0f} steps are too coarse for ±{percent(margin)} with "
                          f"{n} {'pairs' if paired else 'seeds'}: evaluate {every(finest)}"}  # fmt: skip
    needed = plan.fewest(interval)
    if math.isfinite(needed):
        return {"binds": SEEDS, "advised_eval_interval": math.nan, "advised_seeds": needed,
                "advice": f"the seeds' spread keeps it undecided with {n} {'pairs' if paired else 'seeds'}: "
                          f"{needed:.0f} seeds per hardware would decide it {stats.POWER:.0%} of the time"}  # fmt: skip
    needed = plan.fewest(1.0)
    if not math.isfinite(needed):
        return {"binds": SEEDS, "advised_eval_interval": math.nan, "advised_seeds": math.inf,
                "advice": f"the steps lie at the ±{percent(margin)} margin: more than {stats.SEEDS_CAP} seeds per "
                          "hardware would be needed to decide"}  # fmt: skip
    finest = max(plan.coarsest(int(needed), interval), 1)
    return {"binds": f"{GRID} and {SEEDS}", "advised_eval_interval": float(finest), "advised_seeds": needed,
            "advice": f"both the grid and the seeds keep it undecided: evaluate {every(finest)} and run {needed:.0f} "
                      "seeds per hardware"}  # fmt: skip


def finest_interval(n_a: int, n_b: int, steps: float, margin: float, alpha: float, paired: bool) -> int:
    """The largest evaluation interval at which these seeds could show steps within ±margin at all: were every
    run of both hardware to reach the target at the same evaluation (`steps`), the steps TOST says 'the same'
    up to this interval (0: at none)."""

    def shows(g: int) -> bool:
        lo, hi = math.log(max(steps - g, 1)), math.log(steps)
        box = [np.full((1, n), x) for n in (n_a, n_b) for x in (lo, hi)]
        return stats.interval_decide(*box, math.log1p(margin), alpha, paired)["verdict"][0] == "equivalent"

    low, high = 0, int(steps)  # shows(low) holds (0: vacuously), shows(high) does not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if shows(mid) else (low, mid)
    return low


def speedup(base_times, new_times, low: float, high: float, alpha: float, paired: bool) -> dict:
    """The seeds that would show a direction of a speedup whose interval includes 1 (time is the one constraint:
    no grid, no censoring); none where the interval already excludes 1 or has none (no spread: repeats)."""
    if not (math.isfinite(low) and math.isfinite(high)) or low > 1 or high < 1:
        return none()
    lb, ln = np.log(np.asarray(base_times, float)), np.log(np.asarray(new_times, float))
    d = float((lb - ln).mean()) if paired else float(lb.mean() - ln.mean())
    sd = float(np.std(lb - ln, ddof=1)) if paired else math.sqrt((np.var(lb, ddof=1) + np.var(ln, ddof=1)) / 2)
    df = len(lb) - 1 if paired else len(lb) + len(ln) - 2
    needed = stats.seeds_to_decide(sd, d, 0.0, alpha, paired, df)
    if not math.isfinite(needed):
        return {"binds": SEEDS, "advised_eval_interval": math.nan, "advised_seeds": math.inf,
                "advice": f"the times are this close: more than {stats.SEEDS_CAP} seeds per hardware would be needed "
                          "to show a direction"}  # fmt: skip
    return {"binds": SEEDS, "advised_eval_interval": math.nan, "advised_seeds": needed,
            "advice": f"{needed:.0f} seeds per hardware would show the direction {stats.POWER:.0%} of the time"}
