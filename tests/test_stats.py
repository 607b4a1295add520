"""Statistics on fixed data with known answers and against independent computations."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from hwsweep import diagnose, stats

SETTINGS = stats.Settings(resamples=1999, metrics=("token_accuracy", "exact_accuracy", "final_loss"),
                          margins={"token_accuracy": 0.005, "exact_accuracy": 0.005, "final_loss": 0.01})


def test_two_gpu_example_from_seed_003():
    # 1 GPU 25 h -> 2 GPUs 14 h: 1.79x, 0.89 efficiency, +12% GPU-hours.
    out = stats.known_speedup(25, 14, 1, 2)
    assert out["speedup"] == pytest.approx(1.786, abs=1e-3)
    assert out["efficiency"] == pytest.approx(0.893, abs=1e-3)
    assert out["relative_cost"] == pytest.approx(1.12, abs=1e-3)


def _runs(times=((25, 14, 0.90, 0.91), (26, 13, 0.92, 0.90), (24, 15, 0.91, 0.92))):
    rows = []
    for seed, (t1, t2, acc1, acc2) in enumerate(times):
        for hw, t, acc, n in (("g1", t1, acc1, 1), ("g2", t2, acc2, 2)):
            rows.append(dict(suite="s", variant="v", hardware=hw, seed=seed, train_seconds=t * 3600, world_size=n,
                             samples_per_second=1000 / t, token_accuracy=acc, exact_accuracy=acc / 2,
                             final_loss=1 - acc, gpu_type="x", startup_seconds=1.0, eval_seconds=0.5))  # fmt: skip
    return pd.DataFrame(rows)


def test_speedup_is_paired_by_seed_with_cost():
    sp = stats.speedup(_runs(), "g1", SETTINGS).set_index("hardware")
    expected = (25 / 14 + 26 / 13 + 24 / 15) / 3
    assert sp.loc["g2", "speedup"] == pytest.approx(expected)
    assert sp.loc["g2", "efficiency"] == pytest.approx(expected / 2)
    assert sp.loc["g2", "relative_cost"] == pytest.approx(2 / expected)
    assert sp.loc["g2", "device_hours"] == pytest.approx(2 * (14 + 13 + 15) / 3)
    assert sp.loc["g2", "time_saved_seconds"] == pytest.approx(3600 * ((25 - 14) + (26 - 13) + (24 - 15)) / 3)
    assert sp.loc["g2", "speedup_ci_low"] < expected < sp.loc["g2", "speedup_ci_high"]
    assert sp.loc["g1", "speedup"] == 1.0


def test_missing_seed_is_left_out_and_ci_needs_three_seeds():
    runs = _runs()
    runs = runs[~((runs.hardware == "g2") & (runs.seed == 1))]
    sp = stats.speedup(runs, "g1", SETTINGS).set_index("hardware")
    assert sp.loc["g2", "n_pairs"] == 2
    assert sp.loc["g2", "speedup"] == pytest.approx((25 / 14 + 24 / 15) / 2)
    assert np.isnan(sp.loc["g2", "speedup_ci_low"]) and "fewer than 3" in sp.loc["g2", "speedup_ci_note"]
    summary = stats.seed_summary(runs, SETTINGS).set_index("hardware")
    assert summary.loc["g2", "token_accuracy_n"] == 2 and np.isnan(summary.loc["g2", "token_accuracy_ci_low"])
    assert summary.loc["g1", "token_accuracy_n"] == 3 and summary.loc["g1", "token_accuracy_ci_low"] < 0.91


def test_bootstrap_matches_scipy_and_is_reproducible():
    values = np.array([[0.91, 0.93, 0.92, 0.95, 0.90, 0.94], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])
    settings = stats.Settings(resamples=9999, seed=3)
    low, high, notes = stats.bootstrap_ci(values, settings)
    ref = sps.bootstrap((values[0],), np.mean, method="BCa", n_resamples=9999, random_state=3)
    assert low[0] == pytest.approx(ref.confidence_interval.low, abs=2e-3)
    assert high[0] == pytest.approx(ref.confidence_interval.high, abs=2e-3)
    assert (low[1], high[1], notes[1]) == (0.5, 0.5, "all seeds equal")
    again = stats.bootstrap_ci(values, settings)
    assert again[0][0] == low[0] and again[1][0] == high[0]


def test_welch_by_hand():
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0])
    d, se, df = stats.welch(a, b)
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3  # 1.6667/4, 4/3
    assert d == pytest.approx(2.5 - 4.0)
    assert se == pytest.approx(np.sqrt(va + vb))
    assert df == pytest.approx((va + vb) ** 2 / (va**2 / 3 + vb**2 / 2))
    res = stats.compare(a, b, margin=0.5, confidence=0.95)
    assert res["p_welch"] == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)


@pytest.mark.parametrize("shift", [0.0, 0.002, 0.004, -0.003])
def test_tost_equals_two_independent_one_sided_welch_tests(shift):
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.9 + shift, 0.002, 8), rng.normal(0.9, 0.003, 7)
    eps = 0.005
    lower = sps.ttest_ind(a + eps, b, equal_var=False, alternative="greater").pvalue  # H0: d <= -eps
    upper = sps.ttest_ind(a - eps, b, equal_var=False, alternative="less").pvalue  # H0: d >= +eps
    assert stats.tost(a, b, eps) == pytest.approx(max(lower, upper))


def test_verdicts():
    rng = np.random.default_rng(2)
    base = rng.normal(0.90, 0.001, 10)
    assert stats.compare(rng.normal(0.9, 0.001, 10), base, 0.005, 0.95)["verdict"] == "equivalent"
    assert stats.compare(rng.normal(0.93, 0.001, 10), base, 0.005, 0.95)["verdict"] == "different"
    wide = stats.compare(np.array([0.88, 0.92, 0.905]), np.array([0.90, 0.87, 0.93]), 0.005, 0.95)
    assert wide["verdict"] == "inconclusive" and wide["seeds_needed"] > 3 and wide["min_detectable_difference"] > 0.005


def test_false_equivalence_rate_at_the_margin_is_at_most_5_percent():
    rng = np.random.default_rng(123)
    eps, trials, n = 0.005, 2000, 5
    a = rng.normal(0.9 + eps, 0.004, (trials, n))  # the true difference is exactly the margin
    b = rng.normal(0.9, 0.004, (trials, n))
    equivalent = sum(stats.compare(x, y, eps, 0.95)["verdict"] == "equivalent" for x, y in zip(a, b))
    assert equivalent / trials <= 0.05 + 0.01  # 0.05 plus two standard errors of the simulation


def test_amdahl_recovers_a_known_serial_fraction():
    n = np.array([1.0, 2.0, 4.0, 8.0])
    f = 0.1
    assert stats.amdahl(n, 1 / (f + (1 - f) / n)) == pytest.approx(f, abs=1e-6)
    runs = []
    for seed in range(3):
        for devices in (1, 2, 4, 8):
            runs.append(dict(suite="s", variant="v", hardware=f"g{devices}", seed=seed, world_size=devices,
                             train_seconds=100 * (f + (1 - f) / devices), samples_per_second=1.0, gpu_type="x"))  # fmt: skip
    sp = stats.speedup(pd.DataFrame(runs), "g1", SETTINGS)
    assert sp.amdahl_serial_fraction.iloc[0] == pytest.approx(f, abs=1e-6)
    assert sp.amdahl_extrapolated_devices.iloc[0] == 16
    assert sp.amdahl_extrapolated_speedup.iloc[0] == pytest.approx(1 / (f + (1 - f) / 16), rel=1e-6)


def test_diagnosis_names_the_cause_in_checklist_order():
    base = pd.DataFrame([dict(hardware="a", global_batch=64, comparable=True, steps=10, warmup_steps=1, lr=0.1,
                              precision="fp32", tf32=False, reproducibility="deterministic", data_order="x",
                              torch="2.13", cuda=None, nccl=None, gpu_type="cpu")])  # fmt: skip
    other = base.assign(hardware="b", precision="bf16-mixed", torch="2.14")
    found = diagnose.differences(other, base)
    assert found[0] == "precision/TF32: precision bf16-mixed vs fp32"
    assert found[1].startswith("software versions: torch 2.14 vs 2.13")
    assert diagnose.differences(base, base) == []
