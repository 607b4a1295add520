"""Advice from the binding constraint for a metric's equivalence (issue 68): seeds at the observed difference, a
bound, censoring, none where the data decide; the advised seeds checked by re-running the experiment with them."""

import math

import numpy as np
import pandas as pd

from hwsweep.analysis import stats
from hwsweep.contracts.metrics import Metric

ACC = Metric(name="token_accuracy", goal="max", margin=0.005, primary=True, stage="eval", pattern=None, key=None,
             reduce="last", bounds=[0, 1])  # fmt: skip
SETTINGS = stats.Settings.of({}, [ACC])


def runs(differences, base=0.9, spread=0.01):
    """Two hardware, paired seeds: cpu2 - cpu1 = differences[i] on seed i; a shared seed effect."""
    seeds = range(len(differences))
    effect = np.linspace(-spread, spread, len(differences))
    rows = [dict(suite="s", variant="v", hardware="cpu1", seed=s, seeded=True, token_accuracy=base + effect[s])
            for s in seeds]  # fmt: skip
    rows += [dict(suite="s", variant="v", hardware="cpu2", seed=s, seeded=True,
                  token_accuracy=base + effect[s] + differences[s]) for s in seeds]  # fmt: skip
    return pd.DataFrame(rows)


def standard(n, mean, sd):
    z = np.arange(n) - (n - 1) / 2
    return mean + sd * z / np.std(z, ddof=1)


def row(frame):
    return stats.equivalence(frame, "cpu1", SETTINGS).iloc[0]


def test_the_seeds_bind_at_the_observed_difference_and_deliver_a_decision():
    """3 pairs, a difference of 0.1 points with a spread of 0.4: undecided; the advised seeds, run afresh from the
    same truth, decide (either way) at least 70% of the time."""
    r = row(runs(standard(3, 0.001, 0.004)))
    assert r.verdict == "inconclusive" and r.binds == stats.SEEDS and math.isfinite(r.advised_seeds)
    assert r.advice.startswith("the seeds' spread keeps it undecided with 3 pairs: ") and r.advice in r.finding
    assert "no true difference" not in r.finding  # not planned at an assumed difference of 0
    n, rng, decided = int(r.advised_seeds), np.random.default_rng(1), 0
    for _ in range(200):
        d = rng.normal(0.001, 0.004, n)
        decided += stats.compare(0.9 + d, np.full(n, 0.9), 0.005, 0.95, paired=True)["verdict"] != "inconclusive"
    assert decided / 200 >= 0.7, (n, decided)
    fewer = 0
    for _ in range(200):  # a third of them decide far less often: the number is not padding
        d = rng.normal(0.001, 0.004, max(n // 3, 2))
        fewer += stats.compare(0.9 + d, np.full(len(d), 0.9), 0.005, 0.95, paired=True)["verdict"] != "inconclusive"
    assert fewer < decided


def test_no_advice_where_the_data_decide():
    for differences in (standard(6, 0.0, 0.0005), standard(6, 0.03, 0.001)):  # equivalent; different
        r = row(runs(differences))
        assert r.verdict in ("equivalent", "different") and r.binds == "" and r.advice == ""
        assert math.isnan(r.advised_seeds)


def test_a_difference_at_the_margin_needs_more_than_the_cap():
    r = row(runs(standard(3, 0.005, 0.002)))
    assert r.verdict == "inconclusive" and r.advised_seeds == math.inf and "lies at the margin" in r.advice


def test_runs_without_a_value_bind_as_censoring_and_a_shared_floor_as_a_bound():
    frame = runs(standard(4, 0.001, 0.004))
    frame.loc[(frame.hardware == "cpu2") & (frame.seed == 3), "token_accuracy"] = math.nan
    r = row(frame)
    assert r.binds == "censoring" and r.advice.startswith("1 of 8 runs have no value of it: more seeds cannot")
    floor = row(runs(np.zeros(3), base=0.0, spread=0.0))
    assert floor.binds == stats.BOUND and "more seeds give the same value" in floor.advice
    assert floor.advice.startswith("token accuracy is 0 points on every seed (its floor)")


def test_seeds_to_decide_is_the_first_count_that_decides_as_one_count_at_a_time_finds_it():
    """All counts at once (one t quantile call): the same count as trying 2, 3, ... in turn, inside and beyond
    the margin, paired or not, and inf where no count up to the cap decides."""
    from hwsweep.analysis.stats import power_analysis as pa
    from hwsweep.analysis.stats.distributions import norm_ppf, t_ppf

    def one_at_a_time(sd, d, margin, alpha, paired, df):
        inside = abs(d) < margin
        room = margin - abs(d) if inside else abs(d) - margin
        sd, k = pa.spread_bound(sd, df), 1.0 if paired else 2.0
        for n in range(2, pa.SEEDS_CAP + 1):
            t = t_ppf(1 - alpha if inside else 1 - alpha / 2, n - 1 if paired else 2 * n - 2)
            if (t + norm_ppf(pa.POWER)) * sd * math.sqrt(k / n) <= room:
                return float(n)
        return math.inf

    found = set()
    for sd in (0.001, 0.01, 0.05):
        for d in (0.0, 0.004, 0.02, 0.2):
            for paired in (True, False):
                want = one_at_a_time(sd, d, 0.01, 0.05, paired, 4)
                assert pa.seeds_to_decide(sd, d, 0.01, 0.05, paired, 4) == want
                found.add(want)
    assert math.inf in found and 2.0 in found and len(found) > 4  # the cap, the floor and counts between
