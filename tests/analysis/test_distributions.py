"""stats.distributions against scipy.stats (issue 71): the same answers, edges included, without its import."""

import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from hwsweep.analysis.stats import distributions as dist

XS = np.array([-np.inf, -40, -3.3, -1e-9, 0, 0.5, 2.1, 37, np.inf, np.nan])
DFS = np.array([-1, 0, 0.5, 1, 2.5, 7, 49, 1e6, np.inf, np.nan])
QS = np.array([-0.1, 0, 1e-12, 0.025, 0.5, 0.95, 0.975, 1 - 1e-12, 1, 1.2, np.nan])


@pytest.mark.parametrize("mine, theirs, points", [
    (dist.t_cdf, scipy.stats.t.cdf, XS), (dist.t_sf, scipy.stats.t.sf, XS), (dist.t_ppf, scipy.stats.t.ppf, QS),
    (dist.chi2_ppf, scipy.stats.chi2.ppf, QS),
])  # fmt: skip
def test_the_t_and_chi2_functions_are_scipy_stats_value_for_value(mine, theirs, points):
    x, df = np.meshgrid(points, DFS)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(mine(x, df), theirs(x, df))
    assert isinstance(mine(points[5], 3.0), np.float64)  # a number for numbers, as scipy.stats answers


def test_the_normal_functions_are_scipy_stats_value_for_value():
    np.testing.assert_array_equal(dist.norm_cdf(XS), scipy.stats.norm.cdf(XS))
    np.testing.assert_array_equal(dist.norm_ppf(QS), scipy.stats.norm.ppf(QS))


@pytest.mark.parametrize("n", [8, 9, 30, 500])
def test_the_skewness_test_is_scipy_s_on_normal_skewed_and_constant_seeds(n):
    rng = np.random.default_rng(n)
    for k in range(40):
        values = rng.standard_normal(n) * 10 ** rng.uniform(-3, 3) + rng.uniform(-5, 5)
        values = np.exp(values / np.abs(values).max() * 3) if k % 3 == 0 else values  # skewed
        assert dist.skewtest_p(values) == scipy.stats.skewtest(values).pvalue
    assert np.isnan(dist.skewtest_p(np.full(n, 0.25)))  # no spread: no p-value
    with pytest.raises(ValueError, match="needs 8 values"):
        dist.skewtest_p(np.ones(7))


def test_the_statistics_do_not_load_scipy_stats():
    """The suite's aggregate computes every test without scipy.stats (~1 CPU-s of import)."""
    code = ("import sys, numpy as np; from hwsweep.analysis import stats; "
            "stats.equivalence; r = stats.tost.decide(np.array([0.1]), np.array([0.05]), np.array([4.0]), 0.2, 0.05); "
            "stats.power_analysis.seeds_needed(0.1, 0.2, 0.05, True, 5); stats.normality.grubbs(np.arange(9.0)[None]); "
            "stats.normality.spread_check; print('scipy.stats' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
