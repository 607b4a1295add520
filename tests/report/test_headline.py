"""The report's headline sentences and HTML tables from fixed tables (no runs, no torch)."""

import math

import numpy as np
import pandas as pd
import pytest

from hwsweep.report import headline, landing, tables

MARGINS = {"token_accuracy": (0.005, 100.0), "exact_accuracy": (0.005, 100.0), "final_loss": (0.01, 1.0)}


def eq(hw, metric, verdict, difference=0.0, shifted=False, test="paired TOST", seeds_needed=2.0, primary=True,
       p_difference=0.5, variant="default"):  # fmt: skip
    margin, scale = MARGINS[metric]
    finding = "equivalent" if verdict == "equivalent" else verdict
    return {"suite": "s", "variant": variant, "hardware": hw, "baseline": "cpu1", "metric": metric,
            "primary": primary, "scale": scale, "test": test, "n": 3, "n_baseline": 3, "difference": difference,
            "ci_low": difference - 0.001, "ci_high": difference + 0.001, "tost_ci_low": difference - 0.0008,
            "tost_ci_high": difference + 0.0008, "p_difference": p_difference, "p_tost": 0.01, "margin": margin,
            "goal": "min" if metric == "final_loss" else "max",
            "verdict": verdict, "shifted": shifted, "finding": finding, "power": 0.9, "seeds_needed": seeds_needed,
            "note": "", "diagnosis": ""}  # fmt: skip


def comp(hw, baseline=False, speedup=1.0, hours_ratio=1.0, cost=0.1, world_size=1, gpu_type="cpu", variant="default",
         train_seconds=3600.0):  # fmt: skip
    # Against a baseline costing 0.10 per run; the cost ratio's interval is the speedup's (+-10%) turned over.
    ratio = cost / 0.1
    return {"suite": "s", "variant": variant, "hardware": hw, "baseline": baseline, "n_seeds": 3,
            "world_size": world_size, "gpu_type": gpu_type, "verdict": "baseline" if baseline else "equivalent",
            "speedup": speedup, "speedup_ci_low": speedup * 0.9, "speedup_ci_high": speedup * 1.1,
            "device_hours": 0.1, "device_hours_ratio": hours_ratio, "cost_per_run": cost, "currency": "USD",
            "cost_ratio": ratio, "cost_ratio_ci_low": ratio / 1.1, "cost_ratio_ci_high": ratio / 0.9,
            "train_seconds": train_seconds, "same_device_type": True}  # fmt: skip


def test_equivalent_hardware_share_one_sentence_with_test_and_margin_in_points():
    e = pd.DataFrame([eq(hw, m, "equivalent") for hw in ("cpu2", "cpu4") for m in ("token_accuracy", "final_loss")])
    (sentence,) = headline.equivalence_sentences(e, "cpu1")
    assert sentence.startswith("cpu2 and cpu4 are **equivalent** to cpu1 on token accuracy and final loss")
    assert "paired TOST" in sentence and "±0.5 points for token accuracy" in sentence
    assert "±0.01 for final loss" in sentence
    assert "{" not in sentence and "0.005" not in sentence  # a margin never as a dict or a raw share
    # the intervals the TOST decided on, each hardware's
    assert sentence.endswith("90% intervals: cpu2 token accuracy -0.08 to +0.08 points, final loss -0.0008 to +0.0008; "
                             "cpu4 token accuracy -0.08 to +0.08 points, final loss -0.0008 to +0.0008).")


def test_inconclusive_names_the_seeds_that_would_decide():
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "equivalent"), eq("cpu2", "final_loss", "equivalent"),
                      eq("cpu2", "exact_accuracy", "inconclusive", seeds_needed=7.0)])  # fmt: skip
    (sentence,) = headline.equivalence_sentences(e, "cpu1")
    assert ("exact accuracy **inconclusive** (90% interval: exact accuracy -0.08 to +0.08 points) — 7 seeds per hardware "
            "would show equivalence 80% of the time if there is no true difference") in sentence
    assert "on token accuracy and final loss" in sentence


def test_inconclusive_beyond_the_cap_says_so():
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "inconclusive", seeds_needed=math.inf)])
    (sentence,) = headline.equivalence_sentences(e, "cpu1")
    assert "for cpu2 against cpu1" in sentence and "more than 100 seeds" in sentence


def test_different_gives_the_difference_in_points_beyond_the_margin():
    e = pd.DataFrame([eq("gpu1", "token_accuracy", "different", difference=-0.012)])
    (sentence,) = headline.equivalence_sentences(e, "cpu1")
    # the eq() row's 95% CI is the difference +-0.001: -1.3 to -1.1 points, wholly below 0, so "worse"
    assert ("gpu1 **differs** from cpu1: worse token accuracy: -1.2 points (95% CI -1.3 to -1.1 points), beyond "
            "±0.5 points (paired TOST)") in sentence


def test_shift_inside_the_margin_is_named_with_the_interval_tested_and_its_p_value():
    """Issue 32: a 95% interval of +0.365 to +0.515 leaves the ±0.5 margin the TOST (90%) was inside: the sentence
    quotes the 90% interval, with digits enough that its end does not print as the margin."""
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "equivalent", difference=0.0044, shifted=True, p_difference=0.003)
                      | {"ci_low": 0.00365, "ci_high": 0.00515, "tost_ci_low": 0.0038, "tost_ci_high": 0.004999}])
    (sentence,) = headline.equivalence_sentences(e, "cpu1")
    assert "**equivalent**" in sentence and ("on cpu2, shifted inside ±0.5 points: better token accuracy by +0.44 "
                                             "points (90% interval +0.38 to +0.4999 points; shift p = 0.003)") in sentence
    assert "0.515" not in sentence


def test_hardware_with_different_outcomes_get_their_own_sentences():
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "equivalent"), eq("cpu4", "token_accuracy", "inconclusive", 0.0,
                                                                         seeds_needed=9.0)])  # fmt: skip
    sentences = headline.equivalence_sentences(e, "cpu1")
    assert len(sentences) == 2 and sentences[0].startswith("cpu2 is **equivalent**") and "cpu4" in sentences[1]


def test_unpaired_comparison_names_welch():
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "equivalent", test="Welch TOST")])
    assert "(Welch TOST; ±0.5 points; 90% interval: token accuracy -0.08 to +0.08 points)" in \
        headline.equivalence_sentences(e, "cpu1")[0]


def test_speed_and_money_in_words():
    c = pd.DataFrame([comp("cpu1", True, cost=0.10, train_seconds=9420), comp("cpu2", speedup=1.5714, hours_ratio=1.28,
                                                                             cost=0.14, world_size=2, train_seconds=6000)])  # fmt: skip
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "equivalent")])
    sentences = headline.suite_headline(c, e)["default"]
    assert sentences[0] == "Overall against cpu1 (every primary metric: token accuracy): cpu2 **equivalent**."
    # speedup CI 1.5714 x 0.9 / 1.1 = 1.41-1.73; device-hours = 2 devices / speedup: 1.28 x 1.5714 / 1.73 = 1.16 and
    # / 1.41 = 1.42; cost 0.14 / 0.10 = 1.4 with the speedup's interval turned over: 1.4 / 1.1 and 1.4 / 0.9
    expected = ("cpu2: 1.57× faster (95% CI 1.41–1.73) at +28% device-hours (95% CI +16% to +42%); more expensive: "
                "1.4× the baseline's cost per run (95% CI 1.27–1.56). Mean per run: training 1 h 40 min and $0.14 "
                "against 2 h 37 min and $0.10 on cpu1.")  # fmt: skip
    assert sentences[-1] == expected


def test_an_interval_that_includes_1_says_no_clear_difference():
    row = comp("cpu2", speedup=1.5, cost=0.1) | {"speedup_ci_low": 0.82, "speedup_ci_high": 2.73,
                                                 "cost_ratio_ci_low": 0.7, "cost_ratio_ci_high": 1.6}  # fmt: skip
    text = headline.cost_sentence(row | {"baseline_cost_per_run": 0.1}, "cpu1")
    assert text.startswith("cpu2: no clear difference in speed (1.5× the baseline's speed, 95% CI 0.82–2.73)")
    assert "no clear difference in cost" in text and "faster" not in text and "cheaper" not in text


def test_slower_and_other_device_type():
    row = comp("cpu8", speedup=0.5, hours_ratio=math.nan, cost=0.2, world_size=8)
    text = headline.cost_sentence(row | {"baseline_cost_per_run": 0.1}, "gpu1")
    assert "2× slower (95% CI 1.82–2.22)" in text and "another device type" in text
    assert "more expensive: 2× the baseline's cost per run (95% CI 1.82–2.22)" in text


def test_money_pairs_in_the_headline_stay_apart():
    c = pd.DataFrame([comp("cpu1", True, cost=0.0200), comp("cpu2", speedup=1.2, cost=0.0175)])
    sentence = headline.suite_headline(c, pd.DataFrame([eq("cpu2", "final_loss", "equivalent")]))["default"][-1]
    assert "$0.018 against 1 h and $0.020 on cpu1" in sentence


def test_flagged_seeds_and_their_remedy_close_the_headline():
    c = pd.DataFrame([comp("cpu1", True), comp("cpu2", speedup=1.2)])
    c["seed_spread"] = ["", "seed 2 lies apart in token accuracy (Grubbs p = 0.001, 12 checks): the intervals "
                            "assume roughly normal seeds; add seeds 3, 4, 5 to check"]  # fmt: skip
    sentences = headline.suite_headline(c, pd.DataFrame([eq("cpu2", "final_loss", "equivalent")]))["default"]
    assert sentences[-1].startswith("⚠ cpu2: seed 2 lies apart in token accuracy") and "add seeds 3, 4, 5" in sentences[-1]


def test_the_runs_checks_close_the_headline_also_on_one_hardware():
    unverified = ("unverified: no process of the command ran a torch backward pass or optimizer step hwsweep could "
                  "see, so its device, batch and steps are unverified")  # fmt: skip
    alone = pd.DataFrame([comp("cpu1", True)]).assign(checks=[unverified])
    assert headline.suite_headline(alone, pd.DataFrame())["default"] == [f"⚠ cpu1, runs' checks: {unverified}."]
    c = pd.DataFrame([comp("cpu1", True), comp("cpu2", speedup=1.2)]).assign(checks=["", unverified])
    sentences = headline.suite_headline(c, pd.DataFrame([eq("cpu2", "final_loss", "equivalent")]))["default"]
    assert sentences[-1] == f"⚠ cpu2, runs' checks: {unverified}." and not any("cpu1, runs'" in x for x in sentences)


def test_no_prices_says_cost_unknown():
    c = pd.DataFrame([comp("cpu1", True, cost=math.nan), comp("cpu2", speedup=2.0, cost=math.nan)])
    sentences = headline.suite_headline(c, pd.DataFrame([eq("cpu2", "final_loss", "equivalent")]))["default"]
    assert "cost not known (no price_per_hour for cpu2)" in sentences[-1] and "$" not in sentences[-1]
    assert "Mean per run: training 1 h against 1 h on cpu1." in sentences[-1]


def test_failed_suite_names_counts_and_the_first_reason():
    text = headline.failure_sentence({"done": 1, "failed": 2, "missing": 1}, ["cpu1 seed 0: boom"])
    assert text == "**No results** — of 4 runs 1 done, 2 failed, 1 missing. First failure: cpu1 seed 0: boom"


def test_a_suite_whose_runs_are_all_done_is_never_called_without_results():
    text = headline.failure_sentence({"done": 4, "failed": 0, "missing": 0}, [])
    assert "No results" not in text and "all 4 runs are done" in text and "snakemake all" in text


def test_failure_reason_is_the_cause_not_the_launchers_echo(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1\nTraceback (most recent call last):\n  File \"x\", line 1\n"
                   "FloatingPointError: loss is nan at step 3\n"
                   "E1123 00:47:21.12 24094 torch/distributed/elastic/multiprocessing/api.py:1002] failed\n"
                   "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                   "hwsweep: s/default/cpu1/seed0: the command exited 1; last 5 lines: Error | x\n"
                   "exiting\n")  # fmt: skip
    assert landing.failure_reason(log) == "FloatingPointError: loss is nan at step 3"
    (tmp_path / "quiet.log").write_text("step 1\nkilled by the scheduler\n")
    assert landing.failure_reason(tmp_path / "quiet.log") == \
        "stopped without a failure line (killed?); its last line: killed by the scheduler"  # no error named  # fmt: skip
    assert landing.failure_reason(tmp_path / "none.log") == "no log"


def test_landing_text_is_escaped_but_keeps_the_verdict_marks():
    assert landing._emphasis("a_b is **equivalent** {{x}}") == "a\\_b is **equivalent** \\{\\{x\\}\\}"


def test_verdict_cells_are_marked_by_text_and_colour():
    e = pd.DataFrame([eq("cpu2", "token_accuracy", "equivalent"), eq("cpu4", "token_accuracy", "different", 0.01),
                      eq("cpu8", "token_accuracy", "inconclusive")])  # fmt: skip
    page = tables.equivalence_page(e)
    for verdict, mark in (("equivalent", "✓"), ("different", "✗"), ("inconclusive", "?")):
        cell = page.split(f'data-verdict="{verdict}"')[1].split("</td>")[0]
        assert "background:" in cell and f">{mark} " in cell and verdict in cell
    assert "+1 points" in page and "±0.5 points" in page


def test_one_hardware_order_baseline_first_then_type_and_count():
    c = pd.DataFrame({"suite": "s", "variant": ["a", "a", "a", "b", "b"],
                      "hardware": ["gpu2", "cpu4", "cpu1", "gpu2", "cpu1"],
                      "baseline": [False, False, True, False, True], "world_size": [2, 4, 1, 2, 1],
                      "gpu_type": ["H100-80GB", "cpu", "cpu", "H100-80GB", "cpu"]})  # fmt: skip
    assert tables.hardware_order(c, "cpu1") == ["cpu1", "cpu4", "gpu2"]
    (rows,) = tables.ordered(c)
    assert list(zip(rows.variant, rows.hardware)) == [("a", "cpu1"), ("a", "cpu4"), ("a", "gpu2"), ("b", "cpu1"),
                                                       ("b", "gpu2")]  # fmt: skip


def test_device_hours_near_the_baseline_never_read_minus_0_percent():
    row = comp("cpu2", speedup=1.0, hours_ratio=0.997) | {"speedup_ci_low": 0.9, "speedup_ci_high": 1.2}
    text = headline.cost_sentence(row | {"baseline_cost_per_run": 0.1}, "cpu1")
    assert "at -0.3% device-hours" in text and "-0%" not in text


def test_a_suite_on_one_hardware_says_so_once_and_gives_its_variants(tmp_path):
    """The HRM CPU study's single-hardware suites: no "only the baseline ran" line per variant (issue 21), one
    line for the suite, then its variants against each other."""
    c = pd.DataFrame([comp("cpu1", True, variant="a"), comp("cpu1", True, variant="b")])
    assert headline.suite_headline(c, pd.DataFrame()) == {"a": [], "b": []}
    suite = tmp_path / "s"
    suite.mkdir()
    c.to_csv(suite / "comparison.csv", index=False)
    pd.DataFrame(columns=list(eq("cpu2", "final_loss", "equivalent"))).to_csv(suite / "equivalence.csv", index=False)
    matrix = type("M", (), {"statistics": {}})()
    text = "\n".join(landing.suite_section(matrix, "s", True, results=tmp_path))
    assert text.count("Every run on cpu1: no hardware comparison in this suite; its variants against each other") == 1
    assert "nothing to compare" not in text and "*a*" not in text


def test_numbers_round_so_they_cannot_be_read_the_other_way():
    """Issue 32: '1.45× the baseline's cost' beside '$0.02 against $0.01' (reads as 2×); a device-hours bound of
    -99.5% printed as '-100%' (no device-hours at all)."""
    row = comp("cpu2", speedup=1.0, cost=0.0196) | {"baseline_cost_per_run": 0.0135, "baseline_train_seconds": 3600.0}
    text = headline.cost_sentence(row, "cpu1")
    assert "$0.0196 against 1 h and $0.0135 on cpu1" in text and "$0.02 " not in text
    assert headline.percent(0.005) == "-99.5%" and headline.percent(0.0) == "-100%" and headline.percent(1.28) == "+28%"
    row = comp("cpu2", speedup=100.0, hours_ratio=0.02) | {"speedup_ci_low": 40.0, "speedup_ci_high": 400.0}
    assert "(95% CI -99.5% to -95%)" in headline.cost_sentence(row | {"baseline_cost_per_run": 0.1}, "cpu1")


def test_the_baselines_own_row_is_the_baseline_not_no_clear_difference():
    c = pd.DataFrame([comp("cpu1", True), comp("cpu2", speedup=1.5)])
    c.loc[0, ["speedup_ci_low", "speedup_ci_high"]] = 1.0
    for page in (tables.comparison_page(c, [], {}), tables.speedup_page(c.assign(speedup_method="x"))):
        assert "1–1" not in page and "no clear difference in speed (1×" not in page
        assert page.count(">baseline<") >= 1


def test_identical_timings_give_no_interval_and_say_why():
    """Every seed the same time on both hardware (a synthetic suite of identical repeats): no 'CI 2–2'."""
    from hwsweep.analysis import stats

    rows = [dict(suite="s", variant="v", hardware=hw, seed=seed, train_seconds=t, world_size=1, gpu_type="cpu",
                 samples_per_second=1.0 / t) for hw, t in (("cpu1", 20.0), ("cpu2", 10.0)) for seed in range(3)]  # fmt: skip
    speed = stats.speedup(pd.DataFrame(rows), "cpu1").set_index("hardware")
    assert speed.speedup["cpu2"] == pytest.approx(2) and np.isnan(speed.speedup_ci_low["cpu2"])
    assert speed.speedup_note["cpu2"] == stats.REPEATS and bool(speed.baseline["cpu1"])
    text = headline.cost_sentence(speed.loc["cpu2"].to_dict() | {"hardware": "cpu2"}, "cpu1")
    assert f"no CI: {stats.REPEATS}" in text and "faster" not in text
