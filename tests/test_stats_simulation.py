"""The shipped intervals and tests keep their promises at the seed counts people run (fixed RNG,
vectorised: each test runs in well under a second). The bound on a rate adds two standard
errors of the simulation to the nominal level, so a test fails only where the method does."""

import math

import numpy as np
import pytest

from hwsweep.analysis import stats

TRIALS = 40_000
ALPHA = 0.05
NOISE = 2 * math.sqrt(ALPHA * (1 - ALPHA) / TRIALS)  # two standard errors of a 5% rate: 0.0022


@pytest.mark.parametrize("n", [3, 5, 10])
def test_seed_mean_ci_covers_95_percent(n):
    rng = np.random.default_rng(n)
    values = rng.normal(0.9, 0.004, (TRIALS, n))
    low, high = stats.mean_ci(values, 0.95)
    coverage = np.mean((low <= 0.9) & (0.9 <= high))
    assert 0.93 <= coverage <= 0.97, coverage


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("paired", [True, False])
def test_speedup_ci_covers_95_percent(n, paired):
    rng = np.random.default_rng(100 + n)
    true = 1.8  # lognormal times; paired seeds share a seed effect
    seed_effect = rng.normal(0, 0.05, (TRIALS, n)) if paired else 0
    base = np.exp(np.log(100.0) + seed_effect + rng.normal(0, 0.03, (TRIALS, n)))
    new = np.exp(np.log(100.0 / true) + seed_effect + rng.normal(0, 0.03, (TRIALS, n)))
    _, low, high = stats.speedup_ci(base, new, 0.95, paired)
    # paired: the geometric mean's target exp(E log ratio); unpaired: the ratio of mean times
    # E base / E new; with equal log-spreads both are `true`
    coverage = np.mean((low <= true) & (true <= high))
    assert 0.93 <= coverage <= 0.97, coverage


def _equivalent(a, b, margin, paired):
    d, se, df = stats.paired_stats(a, b) if paired else stats.welch_stats(a, b)
    return stats.decide(d, se, df, margin, ALPHA)["verdict"] == "equivalent"


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("paired", [True, False])
def test_false_equivalence_at_the_margin_is_at_most_5_percent(n, paired):
    rng = np.random.default_rng(200 + n + paired)
    margin, sd = 0.005, 0.003
    if paired:  # seeds correlated at rho 0.9 across hardware, as shared init and data order make them
        shared = rng.normal(0.9, sd, (TRIALS, n))
        b = shared + rng.normal(0, sd * math.sqrt(0.1), (TRIALS, n))
        a = shared + margin + rng.normal(0, sd * math.sqrt(0.1), (TRIALS, n))
    else:
        a, b = rng.normal(0.9 + margin, sd, (TRIALS, n)), rng.normal(0.9, sd, (TRIALS, n))
    rate = np.mean(_equivalent(a, b, margin, paired))  # (at -margin the same by symmetry)
    assert rate <= ALPHA + NOISE, rate


def test_the_overall_verdict_keeps_the_level_without_correction():
    # Intersection-union: two primary metrics, one truly at the margin, one truly equal.
    rng = np.random.default_rng(7)
    n, margin, sd = 5, 0.005, 0.002
    b = rng.normal(0.9, sd, (2, TRIALS, n))
    a = b + np.array([margin, 0.0])[:, None, None] + rng.normal(0, sd / 3, (2, TRIALS, n))
    both = _equivalent(a[0], b[0], margin, True) & _equivalent(a[1], b[1], margin, True)
    assert np.mean(both) <= ALPHA + NOISE


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("sd", [0.0015, 0.003, 0.005])
def test_the_promised_seeds_give_80_percent_power(paired, sd):
    margin = 0.005
    n = stats.seeds_needed(sd, margin, ALPHA, paired)
    assert 2 <= n <= stats.SEEDS_CAP and n == int(n)
    n = int(n)
    rng = np.random.default_rng(int(sd * 1e4) + paired)
    trials = 20_000
    # the assumed truth: no difference; sd is the spread of the paired differences, or of each hardware
    a = rng.normal(0, sd, (trials, n))
    b = np.zeros((trials, n)) if paired else rng.normal(0, sd, (trials, n))
    achieved = np.mean(_equivalent(a, b, margin, paired))
    assert achieved >= stats.POWER, (n, achieved)
    # and it is the fewest: one seed less falls short (where fewer seeds are allowed)
    if n > 2:
        assert stats.power(n - 1, sd, margin, ALPHA, paired)[0] < stats.POWER
