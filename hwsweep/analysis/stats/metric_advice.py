"""Advice from the binding constraint for a metric's equivalence (issue 68), as hwsweep.analysis.advice gives it for
time to target: for a verdict the data do not decide, which of the seeds, a metric at its declared bound or censoring
(runs without the value) keeps it undecided, and only that fix with its number. None where the data decide.

- censoring binds where runs that ran have no value of the metric (a milestone not reached): more seeds cannot
  place them; a longer run or an easier target;
- a bound binds where both sides sit at one declared bound on every seed: more seeds of them give the same value;
  a longer run or a task the model can move on;
- the seeds bind elsewhere: the seeds per hardware that decide either way 80% of the time at the observed
  difference (stats.seeds_to_decide: equivalent inside the margin, different beyond it), not at an assumed true
  difference of 0 (seeds_needed, the planning column); more than SEEDS_CAP where the difference lies at the margin.

binds: SEEDS, BOUND or CENSORING (one vocabulary with advice.GRID and advice.CENSORING); advice: the sentence;
advised_seeds: the number where the seeds bind."""

from __future__ import annotations

import math

import numpy as np

from hwsweep.analysis.stats.power_analysis import POWER, SEEDS_CAP, seeds_to_decide

SEEDS, BOUND, CENSORING = "seeds", "bound", "censoring"


def none() -> dict:
    return {"binds": "", "advice": "", "advised_seeds": math.nan}


def censored(missing: int, runs: int) -> dict:
    """Runs that ran but have no value: only a longer run or an easier target gives them one."""
    return {"binds": CENSORING, "advised_seeds": math.nan,
            "advice": f"{missing} of {runs} runs have no value of it: more seeds cannot place them; a longer run or an "
                      "easier target"}  # fmt: skip


def bounded(said: str) -> dict:
    """Both sides at one declared bound on every seed (said: stats.at_bound's sentence)."""
    return {"binds": BOUND, "advised_seeds": math.nan,
            "advice": f"{said.split(':')[0]}: more seeds give the same value; a longer run or a task it can move on"}


def seeds(a, b, margin: float, alpha: float, paired: bool) -> dict:
    """The seeds per hardware that decide a comparison observed as a - b either way POWER of the time."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = float((a - b).mean()) if paired else float(a.mean() - b.mean())
    sd = float(np.std(a - b, ddof=1)) if paired else math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    df = len(a) - 1 if paired else len(a) + len(b) - 2
    needed = seeds_to_decide(sd, d, margin, alpha, paired, df)
    n = f"{len(a)} {'pairs' if paired else 'seeds'}"
    if not math.isfinite(needed):
        return {"binds": SEEDS, "advised_seeds": math.inf,
                "advice": f"the difference lies at the margin: more than {SEEDS_CAP} seeds per hardware would be "
                          "needed to decide"}  # fmt: skip
    return {"binds": SEEDS, "advised_seeds": needed,
            "advice": f"the seeds' spread keeps it undecided with {n}: {needed:.0f} seeds per hardware would decide it "
                      f"{POWER:.0%} of the time at the difference seen"}  # fmt: skip
