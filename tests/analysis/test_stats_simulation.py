"""The shipped intervals and tests keep their promises at the seed counts people run (fixed RNG,
vectorised: each test runs in well under a second). The bound on a rate adds two standard
errors of the simulation to the nominal level, so a test fails only where the method does."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from hwsweep.analysis import stats, variants

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


@pytest.mark.parametrize("counts, seeds, sd", [((1, 2, 4), 3, 0.03), ((1, 2, 4, 8), 3, 0.05), ((1, 2, 4), 5, 0.01)])
def test_amdahl_serial_fraction_ci_covers_95_percent(counts, seeds, sd):
    # True fraction 0.1; every run's time, the smallest count's included, has lognormal noise. Fitted
    # with the reference pinned at speedup 1, this covered about 60% (issue 20).
    rng = np.random.default_rng(300 + seeds)
    devices = np.repeat(np.array(counts, float), seeds)
    trials = 20_000
    times = 100 * (0.1 + 0.9 / devices) * np.exp(rng.normal(0, sd, (trials, devices.size)))
    fit = stats.amdahl_fit(devices, times, 0.95)
    coverage = np.mean((fit["low"] <= 0.1) & (0.1 <= fit["high"]))
    assert 0.93 <= coverage <= 0.97, coverage


STRATA = 40  # pilot spreads at equal-probability quantiles of their sampling distribution
POWER_TOLERANCE = (0.02, 0.10)  # the achieved power lies within 80% - 2 points and 80% + 10 points


@pytest.mark.parametrize("pilot, paired, rel", [(3, True, 0.6), (3, True, 1.0), (5, True, 1.0), (3, False, 0.6)])
def test_seeds_needed_from_an_estimated_spread_keep_80_percent_power(pilot, paired, rel):
    # A pilot of `pilot` seeds estimates the spread; seeds_needed plans from it; a fresh experiment
    # with that many seeds (true difference 0, true spread rel x margin) shows equivalence this often.
    # Planned with the pilot's spread as it is, this came out at 65-75% (issue 20).
    margin = 0.005
    sd = rel * margin
    df = pilot - 1 if paired else 2 * pilot - 2
    ratio = np.sqrt(sps.chi2.ppf((np.arange(STRATA) + 0.5) / STRATA, df) / df)  # s / sd of the pilot
    rng = np.random.default_rng(400 + pilot + 10 * paired)
    per = 500
    success, promised = [], 0
    for r in ratio:
        n = stats.seeds_needed(sd * r, margin, ALPHA, paired, df)
        if not np.isfinite(n):  # "more than 100 seeds would be needed": nothing promised
            continue
        promised += 1
        n = int(n)
        a = rng.normal(0, sd, (per, n))
        b = np.zeros((per, n)) if paired else rng.normal(0, sd, (per, n))
        success.append(np.mean(_equivalent(a, b, margin, paired)))
    achieved = float(np.mean(success))
    noise = 2 * math.sqrt(0.8 * 0.2 / (per * promised))
    assert promised >= 0.9 * STRATA
    low, high = POWER_TOLERANCE
    assert stats.POWER - low - noise <= achieved <= stats.POWER + high + noise, achieved


def test_a_suites_normal_seeds_are_flagged_anywhere_at_most_5_percent_of_the_time():
    """The method text's promise, through spread_check itself: 300 suites of 2 variants x 2 hardware, 3 normal
    seeds, 3 metrics and the log time each (16 checks share the 5%). Shared per cell, as before issue 32,
    about 18% of such suites had a false flag somewhere."""
    rng = np.random.default_rng(501)
    suites, n, size = 300, 3, 300 * 4 * 3
    runs = pd.DataFrame({"suite": np.repeat(np.arange(suites), 4 * n), "variant": np.tile(np.repeat([0, 0, 1, 1], n), suites),
                         "hardware": np.tile(np.repeat([0, 1, 0, 1], n), suites), "seed": np.tile(np.arange(n), 4 * suites),
                         "acc": rng.normal(0, 1, size), "loss": rng.normal(0, 1, size), "exact": rng.normal(0, 1, size),
                         "train_seconds": np.exp(rng.normal(3, 0.1, size))})  # fmt: skip
    out = stats.spread_check(runs, stats.Settings(metrics=("acc", "loss", "exact")))
    flagged = out.groupby("suite").seed_spread.apply(lambda x: (x != "").any()).mean()
    assert flagged <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / suites), flagged


def test_a_suites_normal_seeds_share_the_level_over_all_its_checks():
    # 4 cells x 4 quantities (3 metrics and the log time) of 3 and of 5 seeds: their Grubbs tests share the 5%.
    rng = np.random.default_rng(500)
    checks = 16
    for n in (3, 5):
        _, p = stats.grubbs(rng.normal(0, 1, (TRIALS * checks, n)))
        flagged = np.mean((p.reshape(TRIALS, checks) * checks < stats.SPREAD_LEVEL).any(axis=1))
        assert flagged <= ALPHA + NOISE, (n, flagged)
        # and one check alone holds its level exactly (normal data: the p-value is uniform in its tail)
        assert abs(np.mean(p < 0.05) - 0.05) <= 2 * NOISE, (n, np.mean(p < 0.05))


def test_with_the_skewness_test_from_8_seeds_the_level_still_holds():
    # 10 seeds: 4 Grubbs and 4 D'Agostino skewness tests share the 5%.
    rng = np.random.default_rng(502)
    trials, quantities, n = 10_000, 4, 10
    values = rng.normal(0, 1, (trials * quantities, n))
    _, p = stats.grubbs(values)
    skew = sps.skewtest(values, axis=1).pvalue
    checks = 2 * quantities
    flagged = (np.minimum(p, skew).reshape(trials, quantities) * checks < stats.SPREAD_LEVEL).any(axis=1)
    assert np.mean(flagged) <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / trials), np.mean(flagged)


def test_a_seed_beside_tied_seeds_is_not_flagged():
    """Accuracy on 256 samples moves in steps of 1/256: three seeds often give two equal values, where Grubbs'
    statistic sits at its bound and p would read ~0 for a one-sample difference. No spread, no test."""
    column, p = stats.grubbs(np.array([[45, 45, 46], [45, 45, 90], [1, 2, 10], [5, 5, 5]]) / 256)
    assert p.tolist()[:2] == [1.0, 1.0] and p[3] == 1.0 and column[1] == 2
    assert 0 < p[2] < 1  # untied: tested as before
    spread = stats.grubbs(np.array([[0.1758, 0.1758, 0.1836, 0.18]]))[1]
    assert spread[0] < 1  # three seeds, two of them tied: the others still have a spread


def test_an_outlier_seed_is_named():
    rng = np.random.default_rng(501)
    values = rng.normal(0, 1, (2000, 10))
    values[:, 4] += 10  # one seed 10 SD away
    column, p = stats.grubbs(values)
    assert np.mean((column == 4) & (p * 4 < stats.SPREAD_LEVEL)) > 0.9


def _variant_verdicts(a, b, paired, goal="max"):
    """The variant verdicts (hwsweep.analysis.variants.contrast: stats.compare without a margin, then direction),
    vectorised over trials through the same core (stats.decide); a few trials checked against stats.compare itself."""
    d, se, df = stats.paired_stats(a, b) if paired else stats.welch_stats(a, b)
    out = stats.decide(d, se, df, math.nan, ALPHA)
    for i in range(5):
        one = stats.compare(a[i], b[i], None, 1 - ALPHA, paired)
        assert (one["ci_low"], one["ci_high"]) == pytest.approx((out["ci_low"][i], out["ci_high"][i]))
    verdicts = np.array([variants.direction(lo, hi, goal) for lo, hi in zip(out["ci_low"], out["ci_high"])])
    return verdicts, out


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("paired", [True, False])
def test_a_variant_is_falsely_better_at_most_5_percent_of_the_time_and_its_ci_covers_95(n, paired):
    rng = np.random.default_rng(300 + n + paired)
    sd, shift = 0.01, 0.02
    effect = rng.normal(0, 0.05, (TRIALS, n)) if paired else 0  # a seed's effect shared by both variants
    ref = 0.8 + effect + rng.normal(0, sd, (TRIALS, n))
    same = 0.8 + effect + rng.normal(0, sd, (TRIALS, n))
    verdicts, _ = _variant_verdicts(same, ref, paired)
    better, either = np.mean(verdicts == "better"), np.mean(verdicts != "no clear difference")
    assert better <= ALPHA / 2 + NOISE and either <= ALPHA + NOISE, (better, either)
    assert np.mean(_variant_verdicts(same, ref, paired, goal="min")[0] == "better") <= ALPHA / 2 + NOISE
    _, out = _variant_verdicts(same + shift, ref, paired)
    coverage = np.mean((out["ci_low"] <= shift) & (shift <= out["ci_high"]))
    assert 0.93 <= coverage <= 0.97, coverage  # Welch at few seeds is a little conservative (~0.957)


def test_a_variant_is_falsely_better_overall_at_most_5_percent_of_the_time():
    # Intersection-union over two primary metrics: one truly equal, one truly better; better overall needs both.
    rng = np.random.default_rng(11)
    n, sd = 5, 0.01
    ref = rng.normal(0.8, sd, (2, TRIALS, n))
    mine = ref + np.array([0.0, 0.05])[:, None, None] + rng.normal(0, sd, (2, TRIALS, n))
    first, second = (_variant_verdicts(mine[i], ref[i], True)[0] for i in range(2))
    overall = np.array([variants.overall([x, y]) for x, y in zip(first, second)])
    assert np.mean(second == "better") > 0.9  # the truly better metric is found: the level is not kept by silence
    assert np.mean(overall == "better") <= ALPHA / 2 + NOISE
