"""Statistics on fixed data with known answers and against independent computations."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from hwsweep.analysis import diagnose, stats, words
from hwsweep.contracts import catalog

MARGINS = {"token_accuracy": 0.005, "exact_accuracy": 0.005, "final_loss": 0.01}
SETTINGS = stats.Settings(metrics=tuple(MARGINS), margins=MARGINS, primary=("token_accuracy", "final_loss"),
                          scales={"token_accuracy": 100.0, "exact_accuracy": 100.0})  # fmt: skip


def _runs(times=((25, 14, 0.90, 0.91), (26, 13, 0.92, 0.90), (24, 15, 0.91, 0.92)), gpu=("x", "x")):
    rows = []
    for seed, (t1, t2, acc1, acc2) in enumerate(times):
        for hw, t, acc, n, g in (("g1", t1, acc1, 1, gpu[0]), ("g2", t2, acc2, 2, gpu[1])):
            rows.append(dict(suite="s", variant="v", hardware=hw, seed=seed, train_seconds=t * 3600, world_size=n,
                             samples_per_second=1000 / t, token_accuracy=acc, exact_accuracy=acc / 2,
                             final_loss=1 - acc, gpu_type=g, startup_seconds=1.0, eval_seconds=0.5))  # fmt: skip
    return pd.DataFrame(rows)


def test_two_gpu_example_from_seed_003_exactly():
    # 1 GPU 25 h -> 2 GPUs 14 h: 1.79x, 0.89 efficiency, +12% GPU-hours, 11 h saved.
    out = stats.known_speedup(25, 14, 1, 2)
    assert round(out["speedup"], 2) == 1.79 and round(out["efficiency"], 2) == 0.89
    assert round(out["device_hours_ratio"] - 1, 2) == 0.12 and out["time_saved"] == 11
    runs = _runs(times=[(25, 14, 0.9, 0.9)] * 3)
    sp = stats.speedup(runs, "g1", SETTINGS, {"g1": 2.0, "g2": 2.0}).set_index("hardware").loc["g2"]
    assert round(sp.speedup, 2) == 1.79 and round(sp.efficiency, 2) == 0.89
    assert round(sp.device_hours_ratio, 2) == 1.12 and sp.time_saved_seconds == 11 * 3600
    assert sp.device_hours == 28 and sp.cost_per_run == 56 and sp.cost_per_cell == 3 * 56
    assert sp.cost_ratio == pytest.approx(56 / 50) and sp.currency == "USD"


def test_four_gpu_example_from_seed_004_exactly():
    runs = []
    for seed in range(3):
        for hw, n, t in (("g1", 1, 362.45), ("g4", 4, 95.23)):
            runs.append(dict(suite="s", variant="v", hardware=hw, seed=seed, world_size=n, train_seconds=t,
                             samples_per_second=1.0, gpu_type="H100-80GB"))  # fmt: skip
    sp = stats.speedup(pd.DataFrame(runs), "g1", SETTINGS).set_index("hardware").loc["g4"]
    assert f"{sp.speedup:.2f}x" == "3.81x" and f"{sp.efficiency:.1%}" == "95.2%"


def test_speedup_is_the_geometric_mean_of_paired_ratios_with_a_t_ci_on_logs():
    sp = stats.speedup(_runs(), "g1", SETTINGS).set_index("hardware")
    logs = np.log([25 / 14, 26 / 13, 24 / 15])
    low, high = sps.t.interval(0.95, 2, loc=logs.mean(), scale=sps.sem(logs))
    assert sp.loc["g2", "speedup"] == pytest.approx(math.exp(logs.mean()))
    assert sp.loc["g2", "speedup_ci_low"] == pytest.approx(math.exp(low))
    assert sp.loc["g2", "speedup_ci_high"] == pytest.approx(math.exp(high))
    assert sp.loc["g2", "speedup_method"] == stats.GEOMETRIC
    assert sp.loc["g2", "efficiency"] == pytest.approx(math.exp(logs.mean()) / 2)
    assert sp.loc["g2", "time_saved_seconds"] == pytest.approx(3600 * ((25 - 14) + (26 - 13) + (24 - 15)) / 3)
    # device-hours follow the same geometric mean: 2 devices at the speedup's pace, not a ratio of mean hours
    assert sp.loc["g2", "device_hours_ratio"] == pytest.approx(2 / math.exp(logs.mean()))
    assert sp.loc["g2", "device_hours_ratio"] != pytest.approx(2 * (14 + 13 + 15) / (25 + 26 + 24))
    # the baseline has no smaller device count: no efficiency of 1 against itself
    assert sp.loc["g1", "speedup"] == 1.0 and np.isnan(sp.loc["g1", "efficiency"])
    assert sp.loc["g1", "scaling_reference"] == "" and sp.loc["g2", "scaling_reference"] == "g1"


def test_unshared_seeds_give_the_ratio_of_mean_times():
    runs = _runs()
    runs.loc[runs.hardware == "g2", "seed"] += 10
    sp = stats.speedup(runs, "g1", SETTINGS).set_index("hardware").loc["g2"]
    assert sp.speedup == pytest.approx(25 / 14) and sp.speedup_method == stats.RATIO_OF_MEANS and sp.n_pairs == 0
    assert sp.speedup_ci_low < sp.speedup < sp.speedup_ci_high


def test_missing_seed_is_left_out_and_ci_needs_two_seeds():
    runs = _runs()
    runs = runs[~((runs.hardware == "g2") & (runs.seed.isin([1, 2])))]
    sp = stats.speedup(runs, "g1", SETTINGS).set_index("hardware")
    assert sp.loc["g2", "n_pairs"] == 1 and sp.loc["g2", "speedup"] == pytest.approx(25 / 14)
    assert np.isnan(sp.loc["g2", "speedup_ci_low"])
    summary = stats.seed_summary(runs, SETTINGS).set_index("hardware")
    assert summary.loc["g2", "token_accuracy_n"] == 1 and np.isnan(summary.loc["g2", "token_accuracy_ci_low"])
    assert "fewer than 2" in summary.loc["g2", "token_accuracy_ci_note"]


def test_seed_ci_is_students_t_and_named():
    runs = _runs()
    summary = stats.seed_summary(runs, SETTINGS).set_index("hardware")
    acc = [0.90, 0.92, 0.91]
    low, high = sps.t.interval(0.95, 2, loc=np.mean(acc), scale=sps.sem(acc))
    assert summary.loc["g1", "token_accuracy_ci_low"] == pytest.approx(low)
    assert summary.loc["g1", "token_accuracy_ci_high"] == pytest.approx(high)
    assert summary.loc["g1", "ci_method"] == stats.CI_METHOD


def test_welch_and_paired_by_hand():
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0])
    d, se, df = (x[0] for x in stats.welch_stats(a, b))
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    assert d == pytest.approx(-1.5) and se == pytest.approx(np.sqrt(va + vb))
    assert df == pytest.approx((va + vb) ** 2 / (va**2 / 3 + vb**2 / 2))
    res = stats.compare(a, b, margin=0.5, confidence=0.95)
    assert res["p_difference"] == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue) and res["test"] == stats.WELCH
    x, y = np.array([0.91, 0.93, 0.92, 0.95]), np.array([0.90, 0.925, 0.918, 0.94])
    res = stats.compare(x, y, 0.005, 0.95, paired=True)
    assert res["p_difference"] == pytest.approx(sps.ttest_rel(x, y).pvalue) and res["test"] == stats.PAIRED


@pytest.mark.parametrize("shift", [0.0, 0.002, 0.004, -0.003])
def test_tost_equals_two_independent_one_sided_tests(shift):
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.9 + shift, 0.002, 8), rng.normal(0.9, 0.003, 8)
    eps = 0.005
    lower = sps.ttest_ind(a + eps, b, equal_var=False, alternative="greater").pvalue  # H0: d <= -eps
    upper = sps.ttest_ind(a - eps, b, equal_var=False, alternative="less").pvalue  # H0: d >= +eps
    assert stats.compare(a, b, eps, 0.95)["p_tost"] == pytest.approx(max(lower, upper))
    lower = sps.ttest_rel(a + eps, b, alternative="greater").pvalue
    upper = sps.ttest_rel(a - eps, b, alternative="less").pvalue
    assert stats.compare(a, b, eps, 0.95, paired=True)["p_tost"] == pytest.approx(max(lower, upper))


def test_verdicts_and_a_shift_inside_the_margin():
    rng = np.random.default_rng(2)
    base = rng.normal(0.90, 0.001, 10)
    assert stats.compare(rng.normal(0.9, 0.001, 10), base, 0.005, 0.95)["verdict"] == "equivalent"
    assert stats.compare(rng.normal(0.93, 0.001, 10), base, 0.005, 0.95)["verdict"] == "different"
    wide = stats.compare(np.array([0.88, 0.92, 0.905]), np.array([0.90, 0.87, 0.93]), 0.005, 0.95)
    assert wide["verdict"] == "inconclusive" and wide["seeds_needed"] > 3
    assert stats.finding(wide, 100).startswith("inconclusive (90% interval -4.47 to +4.81 points, not inside ±0.5 points) — ")
    # paired seeds, shifted by +0.26 points with little seed-to-seed noise in the difference
    b = np.array([0.900, 0.912, 0.905, 0.897, 0.909])
    a = b + 0.0026 + np.array([0.0002, -0.0001, 0.0, 0.0001, -0.0002])
    res = stats.compare(a, b, 0.005, 0.95, paired=True)
    assert res["verdict"] == "equivalent" and res["shifted"] and res["p_difference"] < 0.001
    # the sentence quotes the interval the TOST used (90%), not the 95% one
    low, high = (f"{x * 100:+.3g}" for x in (res["tost_ci_low"], res["tost_ci_high"]))
    assert stats.finding(res, 100, "token_accuracy") == (
        f"equivalent, but shifted inside ±0.5 points: better token accuracy by +0.26 points (90% interval {low} to "
        f"{high} points; shift p = {words.plain(res['p_difference'], 2)})")
    assert "e-" not in stats.finding(res, 100, "token_accuracy")  # never exponent notation
    plain = stats.compare(b + np.array([0.0002, -0.0001, 0.0, 0.0001, -0.0002]), b, 0.005, 0.95, paired=True)
    assert plain["verdict"] == "equivalent" and not plain["shifted"]
    low, high = (f"{x * 100:+.3g}" for x in (plain["tost_ci_low"], plain["tost_ci_high"]))
    assert stats.finding(plain, 100) == f"equivalent (90% interval {low} to {high} points, inside ±0.5 points)"
    assert "worse final loss" in stats.finding(res, 1, "final_loss", goal="min")


def test_paired_seeds_decide_where_unpaired_cannot():
    # Correlated seeds (same initialisation and data order): the paired test sees through the seed spread.
    b = np.array([0.900, 0.910, 0.890])
    a = b + np.array([0.0005, -0.0004, 0.0002])
    assert stats.compare(a, b, 0.005, 0.95, paired=True)["verdict"] == "equivalent"
    assert stats.compare(a, b, 0.005, 0.95)["verdict"] == "inconclusive"


def test_equivalence_table_pairs_by_seed_and_the_overall_verdict_is_intersection_union():
    runs = _runs(times=((25, 14, 0.900, 0.9003), (26, 13, 0.920, 0.9198), (24, 15, 0.910, 0.9101)))
    eq = stats.equivalence(runs, "g1", SETTINGS).set_index("metric")
    assert set(eq.test) == {stats.PAIRED} and eq.loc["token_accuracy", "verdict"] == "equivalent"
    assert eq.loc["token_accuracy", "primary"] and not eq.loc["exact_accuracy", "primary"]
    ov = stats.overall(eq.reset_index())
    assert ov.verdict.tolist() == ["equivalent"]
    eq2 = eq.reset_index()
    eq2.loc[eq2.metric == "final_loss", "verdict"] = "inconclusive"
    assert stats.overall(eq2).verdict.tolist() == ["inconclusive"]
    eq2.loc[eq2.metric == "exact_accuracy", "verdict"] = "different"  # secondary: reported, not voted
    assert stats.overall(eq2).verdict.tolist() == ["inconclusive"]
    eq2.loc[eq2.metric == "token_accuracy", "verdict"] = "different"
    assert stats.overall(eq2).verdict.tolist() == ["different"]
    unpaired = runs.assign(seed=np.where(runs.hardware == "g2", runs.seed + 10, runs.seed))
    assert set(stats.equivalence(unpaired, "g1", SETTINGS).test) == {stats.WELCH}
    comp = stats.comparison(stats.seed_summary(runs, SETTINGS), eq.reset_index(), stats.speedup(runs, "g1", SETTINGS),
                            "g1", SETTINGS).set_index("hardware")  # fmt: skip
    assert comp.loc["g2", "verdict"] == "equivalent" and comp.loc["g1", "verdict"] == "baseline"


def test_amdahl_within_one_device_type_with_its_uncertainty():
    n = np.array([1.0, 2.0, 4.0, 8.0])
    f = 0.1
    exact = stats.amdahl_fit(n, 100 * (f + (1 - f) / n))
    assert exact["f"][0] == pytest.approx(f, abs=1e-6) and exact["se"][0] == pytest.approx(0, abs=1e-6)
    runs = []
    for seed in range(3):
        for devices in (1, 2, 4, 8):
            runs.append(dict(suite="s", variant="v", hardware=f"g{devices}", seed=seed, world_size=devices,
                             train_seconds=100 * (f + (1 - f) / devices), samples_per_second=1.0, gpu_type="x"))  # fmt: skip
        # another device type, 4x faster per device: never efficiency against x, never in x's fit
        runs.append(dict(suite="s", variant="v", hardware="h1", seed=seed, world_size=1, train_seconds=25.0,
                         samples_per_second=4.0, gpu_type="y"))  # fmt: skip
    sp = stats.speedup(pd.DataFrame(runs), "g1", SETTINGS).set_index("hardware")
    assert sp.loc["g8", "amdahl_serial_fraction"] == pytest.approx(f, abs=1e-6)
    assert sp.loc["g8", "amdahl_serial_fraction_se"] == pytest.approx(0, abs=1e-6)
    assert sp.loc["g8", "amdahl_extrapolated_devices"] == 16
    assert sp.loc["g8", "amdahl_extrapolated_speedup"] == pytest.approx(1 / (f + (1 - f) / 16), rel=1e-6)
    assert sp.loc["g8", "efficiency"] == pytest.approx(1 / (f + (1 - f) / 8) / 8)
    # h1 is the only count of its type: a speedup against the baseline, but nothing to scale against
    assert sp.loc["h1", "speedup"] == pytest.approx(4) and np.isnan(sp.loc["h1", "efficiency"])
    assert sp.loc["h1", "scaling_reference"] == "" and np.isnan(sp.loc["h1", "device_hours_ratio"])
    assert np.isnan(sp.loc["h1", "amdahl_serial_fraction"])
    # noisy measurements: the serial fraction comes with a standard error and a CI around it
    noisy = pd.DataFrame(runs)
    noisy.loc[noisy.hardware == "g4", "train_seconds"] *= 1.05
    fit = stats.speedup(noisy, "g1", SETTINGS).set_index("hardware").loc["g2"]
    assert fit.amdahl_serial_fraction_se > 0
    assert fit.amdahl_serial_fraction_ci_low < fit.amdahl_serial_fraction < fit.amdahl_serial_fraction_ci_high


def test_amdahl_standard_error_comes_from_every_run_with_the_reference_time_fitted():
    n = np.repeat([1.0, 2.0, 4.0], 3)
    t = 100 * (0.1 + 0.9 / n) * np.exp(np.array([0.05, -0.04, 0.0, 0.01, -0.01, 0.0, 0.0, 0.01, -0.01]))
    fit = stats.amdahl_fit(n, t)
    f = fit["f"][0]
    assert f == pytest.approx(0.1, abs=0.03)
    # by hand: least squares on log times (the reference count's too), two parameters, 9 - 2 df
    r = np.log(t) - np.log(f + (1 - f) / n)
    j = (1 - 1 / n) / (f + (1 - f) / n)
    se = np.sqrt(((r - r.mean()) ** 2).sum() / 7 / ((j - j.mean()) ** 2).sum())
    assert fit["se"][0] == pytest.approx(se)
    assert fit["high"][0] == pytest.approx(f + sps.t.ppf(0.975, 7) * se)
    # f is the least-squares minimum: nudging it either way fits worse
    for g in (f - 0.002, f + 0.002):
        rg = np.log(t) - np.log(g + (1 - g) / n)
        assert ((rg - rg.mean()) ** 2).sum() > ((r - r.mean()) ** 2).sum()


def test_cost_across_device_types_uses_each_types_price():
    runs = _runs(times=[(10, 40 / 8, 0.9, 0.9)] * 3, gpu=("A100-80GB", "cpu"))
    runs.loc[runs.hardware == "g2", "world_size"] = 8
    prices = {"g1": catalog.price_per_hour("A100-80GB"), "g2": catalog.price_per_hour("cpu")}
    sp = stats.speedup(runs, "g1", SETTINGS, prices).set_index("hardware").loc["g2"]
    assert sp.cost_per_run == pytest.approx(8 * 5 * 0.05) and sp.cost_ratio == pytest.approx(2.0 / (10 * 5.12))
    assert np.isnan(sp.device_hours_ratio) and not sp.same_device_type


def test_seeds_needed_is_t_based_capped_and_assumes_no_true_difference():
    assert stats.seeds_needed(0.003, 0.005, 0.05, paired=True) == 5  # a known spread
    assert stats.seeds_needed(0.003, 0.005, 0.05, paired=False) == 8
    assert stats.seeds_needed(0.1, 0.005, 0.05, paired=False) == math.inf
    assert stats.seeds_needed(0.0, 0.005, 0.05, paired=True) == 2
    # an estimated spread plans with its upper 70% confidence bound: sd * sqrt(df / chi2_0.3(df))
    bound = 0.003 * math.sqrt(2 / sps.chi2.ppf(0.3, 2))
    assert stats.spread_bound(0.003, 2) == pytest.approx(bound) and bound > 0.003
    assert stats.seeds_needed(0.003, 0.005, 0.05, True, df=2) == stats.seeds_needed(bound, 0.005, 0.05, True)
    assert stats.seeds_needed(0.003, 0.005, 0.05, True, df=2) > 5


def test_amounts_are_written_in_points_for_shares():
    assert words.amount(0.005, 100) == "0.5 points" and words.amount(0.0026, 100, True) == "+0.26 points"
    assert words.amount(0.01) == "0.01"


def test_diagnosis_names_the_cause_in_checklist_order():
    base = pd.DataFrame([dict(hardware="a", global_batch=64, comparable=True, steps=10, warmup_steps=1, lr=0.1,
                              precision="fp32", tf32=False, reproducibility="deterministic", data_order="x",
                              torch="2.13", cuda=None, nccl=None, gpu_type="cpu")])  # fmt: skip
    other = base.assign(hardware="b", precision="bf16-mixed", torch="2.14")
    found = diagnose.differences(other, base)
    assert found[0] == "precision/TF32: precision bf16-mixed vs fp32"
    assert found[1].startswith("software versions: torch 2.14 vs 2.13")
    assert diagnose.differences(base, base) == []


def test_a_shift_inside_the_margin_is_diagnosed_too():
    runs = pd.concat([_runs().assign(suite="s", variant="v")] * 1)
    runs["precision"] = np.where(runs.hardware == "g2", "bf16-mixed", "fp32")
    eq = pd.DataFrame([dict(suite="s", variant="v", hardware="g2", metric="token_accuracy", verdict="equivalent",
                            shifted=True)])  # fmt: skip
    out = diagnose.diagnose(runs, eq, "g1")
    assert out.metrics.tolist() == ["token_accuracy shifted"] and "precision bf16-mixed vs fp32" in out.diagnosis[0]
    assert diagnose.diagnose(runs, eq.assign(shifted=False), "g1").empty


def test_a_seed_far_from_the_others_is_named_with_seeds_to_add():
    runs = _runs(times=((25, 14, 0.900, 0.9003), (26, 13, 0.901, 0.9011), (24, 15, 0.902, 0.9002),
                        (25, 14, 0.901, 0.9504)))  # fmt: skip
    out = stats.spread_check(runs, SETTINGS).set_index("hardware").seed_spread
    assert out["g1"] == ""
    # g2's token accuracy at seed 3 is ~170 of its other seeds' SDs away: Grubbs' p with n - 2 = 2 df is about 0.002
    assert out["g2"].startswith("seed 3 lies apart in token accuracy (Grubbs p = ")
    assert out["g2"].endswith("the intervals assume roughly normal seeds; add seeds 4, 5, 6, 7 to check")
    assert "exact accuracy" in out["g2"] and "final loss" in out["g2"]  # the same seed in each derived metric


def test_identical_repeats_are_not_evidence_of_equivalence_but_identical_pairs_are():
    """A script without a seed flag gives one value per hardware whatever the seed: that is no spread to test
    against (TOST would say p = 0). Bitwise equal hardware with a spread across seeds (strict mode) stays
    equivalent."""
    from hwsweep.report import headline

    repeats = _runs(times=((25, 14, 0.90, 0.91), (26, 13, 0.90, 0.91), (24, 15, 0.90, 0.91)))
    eq = stats.equivalence(repeats, "g1", SETTINGS).set_index("metric")
    row = eq.loc["token_accuracy"]
    assert row.verdict == "inconclusive" and row.finding == stats.REPEATS and not np.isfinite(row.p_tost)
    assert stats.overall(eq.reset_index()).verdict.tolist() == ["inconclusive"]
    said = " ".join(headline.equivalence_sentences(eq.reset_index(), "g1"))
    assert stats.REPEATS in said and "p = 0" not in said
    strict = _runs(times=((25, 14, 0.90, 0.90), (26, 13, 0.92, 0.92), (24, 15, 0.91, 0.91)))
    assert stats.equivalence(strict, "g1", SETTINGS).set_index("metric").loc["token_accuracy", "verdict"] == "equivalent"


def test_a_metric_at_its_floor_on_every_seed_is_named_so_and_diagnosed_by_it_not_by_seed_noise():
    """The built-in trainer (seeded) with exact accuracy 0 on every seed of both hardware: a floor reached, not a
    script that ignores its seed; identical repeats of a script are diagnosed as repeats. Neither gets 'seed or
    reduction-order noise; try more seeds' beside its verdict."""
    from hwsweep.report import headline

    settings = stats.Settings(**{**SETTINGS.__dict__, "bounds": {"exact_accuracy": (0.0, 1.0)}})
    runs = _runs().assign(exact_accuracy=0.0, seeded=True)
    eq = stats.equivalence(runs, "g1", settings).set_index("metric")
    floor = eq.loc["exact_accuracy"]
    assert floor.verdict == "inconclusive" and floor.finding.startswith("exact accuracy is 0 points on every seed (its floor)")
    assert stats.REPEATS not in floor.finding and "seed flag" not in floor.finding
    said = " ".join(headline.equivalence_sentences(eq.reset_index(), "g1"))
    assert "its floor" in said and "seed flag" not in said and "seeds per hardware would" not in said.split("floor")[1]
    diagnosis = diagnose.diagnose(runs, eq.reset_index(), "g1").set_index("hardware").diagnosis["g2"]
    assert "its floor" in diagnosis and "try" not in diagnosis.split("its floor")[1]
    repeats = _runs(times=((25, 14, 0.90, 0.91), (26, 13, 0.90, 0.91), (24, 15, 0.90, 0.91)))
    eq = stats.equivalence(repeats, "g1", SETTINGS)
    diagnosis = diagnose.diagnose(repeats, eq, "g1").diagnosis.tolist()
    assert diagnosis == [stats.REPEATS] and diagnose.NOTHING not in diagnosis[0]


def test_zero_spread_gives_no_p_value_anywhere():
    """Constant per-seed differences (not bitwise equal): no p = 0, no zero-width interval, inconclusive; bitwise
    equal pairs stay equivalent without a p-value."""
    b = np.array([0.5, 0.25, 0.75])  # binary fractions: the differences are exactly 0.125
    a = b + 0.125
    out = stats.compare(a, b, 0.2, 0.95, paired=True)
    assert out["verdict"] == "inconclusive" and np.isnan(out["p_tost"]) and np.isnan(out["p_difference"])
    assert np.isnan(out["ci_low"]) and out["note"] == stats.NO_SPREAD and "no spread" in stats.finding(out)
    same = stats.compare(a, a.copy(), 0.2, 0.95, paired=True)
    assert same["verdict"] == "equivalent" and np.isnan(same["p_tost"]) and same["note"] == stats.BITWISE


def test_paired_sides_take_each_shared_seed_once_in_order_and_drop_a_seed_missing_on_either_side():
    """seed_pairing.sides by a seed -> value mapping gives what indexing the metric by seed gives: the shared seeds in
    the order asked, a seed with a missing value on either side left out."""
    from hwsweep.analysis.stats.seed_pairing import sides

    sub = pd.DataFrame({"seed": [3, 1, 2, 5], "m": [0.3, 0.1, np.nan, 0.5]})
    base = pd.DataFrame({"seed": [1, 2, 3, 4], "m": [1.1, 1.2, 1.3, np.nan]})
    x, y = sides(sub, base, "m", True, [1, 2, 3])
    assert x.tolist() == [0.1, 0.3] and y.tolist() == [1.1, 1.3]
