"""Time to target (issue 23): targets in config, steps/time/cost to target per run, the comparison per
hardware with censored runs, and the headline's words."""

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from conftest import launcher, one_thread

from hwsweep.analysis import stats
from hwsweep.analysis import target as tt
from hwsweep.analysis import validation
from hwsweep.analysis.aggregate import fixed_steps
from hwsweep.contracts import io
from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.records import RunRecord
from hwsweep.contracts.spec import RunSpec
from hwsweep.contracts.target import Target
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.report import targets as words

ACC = Metric(name="token_accuracy", goal="max", margin=0.01, primary=True, stage="eval", pattern=None, key=None,
             reduce="last", bounds=[0, 1])  # fmt: skip


def with_targets(cfg, targets, eval_every=10):
    cfg["recipe"]["eval_every"] = eval_every
    cfg["targets"] = targets
    return cfg


def test_targets_resolve_per_suite_with_the_default_margin(small_config):
    cfg = with_targets(small_config, [{"metric": "token_accuracy", "value": 0.5}])
    cfg["suites"]["other"] = {"targets": [{"metric": "exact_accuracy", "value": 0.2, "steps_margin": 0.2}]}
    m = resolve(cfg)
    assert m.targets["tiny"] == (Target("token_accuracy", 0.5, 0.1),)
    assert m.targets["other"] == (Target("exact_accuracy", 0.2, 0.2),)


@pytest.mark.parametrize("target, eval_every, words_", [
    ({"metric": "token_accuracy", "value": 0.5}, 0, "targets[0].metric: token_accuracy has no per-step curve"),
    ({"metric": "nope", "value": 0.5}, 10, "targets[0].metric: 'nope' is not a declared metric"),
    ({"metric": "token_accuracy", "value": 1.5}, 10, "targets[0].value: 1.5 lies outside"),
    ({"metric": "token_accuracy", "value": 0.5, "steps_margin": 0}, 10, "steps_margin"),
])  # fmt: skip
def test_a_bad_target_is_one_line_naming_the_field(small_config, target, eval_every, words_):
    with pytest.raises(ConfigError) as e:
        resolve(with_targets(small_config, [target], eval_every))
    assert words_ in str(e.value) and "\n" not in str(e.value)


def record(**kw) -> RunRecord:
    base = dict(status="complete", suite="s", variant="v", hardware="a", seed=0, trainer="builtin", spec={},
                plan={"steps": 40, "world_size": 2}, metrics={}, provenance={}, data_order={},
                curves={"eval_token_accuracy": {"steps": [10, 20, 30, 40], "values": [0.2, 0.5, 0.8, 0.9]}},
                train_seconds=39.0, startup_seconds=5.0, wall_seconds=50.0, samples_per_second=1.0,
                segments=[{"start_step": 0, "startup_seconds": 5.0}], restarts=0, resumed_from_step=None,
                step_seconds=[1.0] * 39, periodic_eval_seconds=[[10, 0.5], [20, 0.5], [30, 0.5], [40, 0.5]])  # fmt: skip
    return RunRecord(**(base | kw))


def test_time_to_target_includes_startup_and_excludes_periodic_evaluation():
    row = tt.run_rows(record(), (Target("token_accuracy", 0.8),), {"token_accuracy": ACC}, 3.0, "USD")[0]
    # step 1 is in the startup; steps 2..30 are timed (29 s); three evaluations (1.5 s) left out
    assert row["reached"] and row["steps_to_target"] == 30 and row["eval_interval"] == 10
    assert row["time_to_target_seconds"] == pytest.approx(5 + 29 - 1.5)
    assert row["cost_to_target"] == pytest.approx(2 * (5 + 29 - 1.5) / 3600 * 3.0)
    assert row["time_source"] == tt.MEASURED


def test_a_resumed_run_counts_both_startups_and_a_run_that_never_reaches_is_censored():
    rec = record(segments=[{"start_step": 0, "startup_seconds": 5.0}, {"start_step": 25, "startup_seconds": 7.0}],
                 step_seconds=[1.0] * 38, restarts=1)  # steps 2..25 and 27..40 timed  # fmt: skip
    seconds, _ = tt.seconds_at(rec, [20, 30])
    assert seconds[0] == pytest.approx(5 + 19 - 1.0) and seconds[1] == pytest.approx(12 + 24 + 4 - 1.5)
    row = tt.run_rows(rec, (Target("token_accuracy", 0.95),), {"token_accuracy": ACC}, None, "USD")[0]
    assert not row["reached"] and row["steps_to_target"] == 40 and "censored" in row["note"]
    assert math.isnan(row["cost_to_target"])


def test_hold_asks_the_next_evaluation_to_confirm_the_target_and_censors_an_unconfirmed_last_one():
    curves = {"eval_token_accuracy": {"steps": [10, 20, 30, 40], "values": [0.2, 0.85, 0.7, 0.9]}}
    metrics = {"token_accuracy": ACC}
    first = tt.run_rows(record(curves=curves), (Target("token_accuracy", 0.8),), metrics, None, "USD")[0]
    held = tt.run_rows(record(curves=curves), (Target("token_accuracy", 0.8, hold=True),), metrics, None, "USD")[0]
    assert first["reached"] and first["steps_to_target"] == 20  # the default: the first evaluation past it
    # step 20 fell back at step 30; step 40 is past it but nothing after it confirms it: censored at 40
    assert not held["reached"] and held["steps_to_target"] == 40 and "censored" in held["note"]
    confirmed = {"eval_token_accuracy": {"steps": [10, 20, 30, 40], "values": [0.2, 0.85, 0.81, 0.9]}}
    held = tt.run_rows(record(curves=confirmed), (Target("token_accuracy", 0.8, hold=True),), metrics, None, "USD")[0]
    assert held["reached"] and (held["steps_to_target_low"], held["steps_to_target"]) == (10, 20)


def test_hold_resolves_from_config_and_is_refused_with_stop_at_target(small_config):
    cfg = with_targets(small_config, [{"metric": "token_accuracy", "value": 0.5, "hold": True}])
    assert resolve(cfg).targets["tiny"] == (Target("token_accuracy", 0.5, 0.1, True),)
    cfg["recipe"]["schedule"] = {"steps": 60, "warmup_steps": 5, "stop_at": "target"}
    with pytest.raises(ConfigError) as e:
        resolve(cfg)
    assert "targets[0].hold: true needs the evaluation after" in str(e.value) and "\n" not in str(e.value)


def test_a_command_without_step_times_is_timed_pro_rata():
    seconds, source = tt.seconds_at(record(step_seconds=[], periodic_eval_seconds=[]), [20])
    assert seconds[0] == pytest.approx(5 + 39 * 20 / 40) and source == tt.PRO_RATA


def frame(hw, steps, reached, seconds, price=1.0, world=1, interval=1, digests=None):
    """One hardware's runs evaluated every `interval` steps (1: steps to target known exactly); time 1% of a step's."""
    n = len(steps)
    steps, reached, seconds = (np.asarray(x, float) for x in (steps, reached, seconds))
    low = np.where(reached.astype(bool), steps - interval, steps)
    return pd.DataFrame({"suite": "s", "variant": "v", "hardware": hw, "seed": range(n), "metric": "token_accuracy",
                         "target": 0.99, "goal": "max", "steps_to_target": steps, "steps_to_target_low": low,
                         "reached": reached.astype(bool), "eval_interval": interval,
                         "time_to_target_seconds": seconds, "time_to_target_low_seconds": seconds * (1 - 1e-3 * interval),
                         "cost_to_target": 1.0, "price_per_device_hour": price, "world_size": world, "currency": "USD",
                         "curve_digest": [f"{hw}{i}" for i in range(n)] if digests is None else digests})  # fmt: skip


def test_censored_runs_make_the_comparison_inconclusive_never_an_average_of_the_runs_that_got_there():
    runs = pd.concat([frame("a", [100, 110, 90], [True] * 3, [10, 11, 9]),
                      frame("b", [100, 120, 130], [True, True, False], [5, 6, 7])])  # fmt: skip
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"]
    assert row.steps_verdict == "inconclusive" and row.binds == "censoring"
    assert row.note == ("inconclusive: 1 of 6 runs did not reach the target by step 130: more seeds or evaluations cannot place them; "
                        "a longer run or an easier target")
    assert math.isnan(row.get("speedup", math.nan)) and row.share_reached == pytest.approx(2 / 3)
    # 3 pairs are too few for the sign test by seed (6 needed): the log-rank test over all 6 runs, which says
    # that 3 and 3 seeds cannot reach p < 0.05 either (and what would)
    assert row.rcp_method == tt.LOGRANK_RCP and row.rcp_smallest_p == pytest.approx(0.1)
    text = words.sentence(row.to_dict() | {"hardware": "b"}, "a")
    assert "in 2 of 3 runs against 3 of 3 on a" in text and "1 of 6 runs did not reach the target" in text
    assert ("the log-rank permutation test cannot reach p < 0.05 with 3 and 3 seeds (smallest p 0.1): it needs ≥ 4 "
            "seeds per hardware, or ≥ 6 shared seeds for the sign test by seed") in text


def test_the_headline_answers_time_cost_and_steps_through_in_words():
    runs = pd.concat([frame("cpu1", [100, 110, 90], [True] * 3, [10, 11, 9]),
                      frame("cpu2", [100, 110, 90], [True] * 3, [5, 5.6, 4.4], world=2)])  # fmt: skip
    table = tt.compare(runs, "cpu1", {("token_accuracy", 0.99): 0.1})
    row = table.set_index("hardware").loc["cpu2"]
    assert row.steps_verdict == "equivalent" and row.speedup == pytest.approx(2.0, rel=0.05)
    text = words.sentences(table)["v"][0]
    assert text.startswith("cpu2 reaches 0.99 token accuracy 2") and "× sooner (95% CI" in text
    assert "no clear difference in cost (0.999× the baseline's to reach the target" in text  # 2 devices, 2× sooner
    assert ("steps to target: the same within ±10% (90% interval 0.977–1.02×, paired TOST on log steps at the "
            "evaluations' resolution)") in text


def test_rcp_flags_a_hardware_converging_slower_with_the_numbers():
    runs = pd.concat([frame("a", [100, 105, 95, 100], [True] * 4, [10] * 4),
                      frame("b", [200, 210, 190, 205], [True] * 4, [10] * 4)])  # fmt: skip
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"]
    assert row.rcp_flag == "slower" and row.steps_verdict == "different"
    text = words.sentence(row.to_dict() | {"hardware": "b"}, "a")
    assert "more steps: 2" in text and "Converges slower** than a's seeds" in text and "median 202 against 100" in text


def test_stop_at_target_gives_the_runs_their_suites_targets_and_needs_one(small_config):
    cfg = with_targets(small_config, [{"metric": "token_accuracy", "value": 0.5}])
    assert resolve(cfg).spec("tiny", "default", "cpu1", 0).targets == []  # measuring alone changes no run
    cfg["recipe"]["schedule"] = {"steps": 60, "warmup_steps": 5, "stop_at": "target"}
    assert resolve(cfg).spec("tiny", "default", "cpu1", 0).targets == [Target("token_accuracy", 0.5)]
    del cfg["targets"]
    with pytest.raises(ConfigError) as e:
        resolve(cfg)
    assert str(e.value).startswith("recipe.schedule.stop_at: target has no target to stop at") and "\n" not in str(e.value)


def test_runs_stopped_at_the_target_are_left_out_of_the_fixed_steps_comparisons_and_said():
    runs = pd.DataFrame({"variant": "v", "hardware": ["a", "a", "b"], "seed": [0, 1, 0],
                         "stopped_at_step": [math.nan, 20.0, 30.0]})  # fmt: skip
    assert list(fixed_steps(runs).seed) == [0] and list(fixed_steps(runs).hardware) == ["a"]
    said = words.stopped_sentences(runs)["v"][0]
    assert said.startswith("2 of 3 runs stopped at the target") and "steps 20–30" in said and "not available" in said
    assert words.stopped_sentences(runs.assign(stopped_at_step=math.nan)) == {}


def stop_spec(tmp_path, small_config, name: str) -> tuple[list[str], object]:
    """cpu2 (2 processes) stopping at 0.15 token accuracy, evaluated every 10 of 60 steps: its torchrun and spec."""
    cfg = with_targets(small_config, [{"metric": "token_accuracy", "value": 0.15}])
    cfg["recipe"]["schedule"] = {"steps": 60, "warmup_steps": 5, "stop_at": "target"}
    spec = resolve(cfg).spec("tiny", "default", "cpu2", 0)
    spec = RunSpec.from_dict(spec.to_dict() | {"run_dir": str(tmp_path / name)})
    io.write_json(tmp_path / f"{name}.json", spec.to_dict())
    return [*launcher(2), "-m", "hwsweep.run.train", str(tmp_path / f"{name}.json")], spec


@pytest.mark.slow
def test_a_run_stops_at_its_target_and_its_rerun_after_a_kill_stops_there_too(tmp_path, small_config):
    cmd, spec = stop_spec(tmp_path, small_config, "run")
    env = one_thread()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    first = RunRecord.from_dict(json.loads((tmp_path / "run" / "train.json").read_text()))
    stopped, curve = first.stopped_at_step, first.curve("eval_token_accuracy")
    assert stopped is not None and 0 < stopped < 60 and stopped % 10 == 0  # at the first loss read after reaching
    assert curve.values[-1] >= 0.15 and all(v < 0.15 for v in curve.values[:-1]) and curve.steps[-1] <= stopped
    assert len(first.curves["loss"]["values"]) == stopped and validation.train_problems(first, spec) == []
    row = tt.run_rows(first, spec.targets, {"token_accuracy": ACC}, 1.0, "USD")[0]
    assert row["reached"] and row["steps_to_target"] == curve.steps[-1]  # observed, never the schedule's 60
    # Killed after the stopping checkpoint, before its record: the rerun resumes there and trains nothing more.
    (tmp_path / "run" / "train.json").unlink()
    (tmp_path / "run" / "final.pt").unlink()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    again = RunRecord.from_dict(json.loads((tmp_path / "run" / "train.json").read_text()))
    assert again.stopped_at_step == stopped and again.resumed_from_step == stopped and again.restarts == 1
    assert again.curves == first.curves and again.status == "complete"


@pytest.mark.slow
def test_time_to_target_through_the_workflow(tmp_path, small_config):
    """SMALL with eval_every and two targets: one every run reaches, one none does (censored, kept)."""
    from conftest import snakemake

    cfg = with_targets(small_config, [{"metric": "token_accuracy", "value": 0.15},
                                      {"metric": "token_accuracy", "value": 0.99}])  # fmt: skip
    cfg["recipe"]["schedule"] = {"steps": 30, "warmup_steps": 5}
    proc = snakemake(tmp_path, cfg, "--cores", "2", "results/tiny/tables/time_to_target.html")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(tmp_path / "results/tiny/time_to_target.csv")
    assert len(runs) == 8 and set(runs.time_source) == {tt.MEASURED}
    easy, hard = runs[runs.target == 0.15], runs[runs.target == 0.99]
    assert easy.reached.all() and (easy.steps_to_target % 10 == 0).all() and (easy.time_to_target_seconds > 0).all()
    assert not hard.reached.any() and (hard.steps_to_target == 30).all()
    table = pd.read_csv(tmp_path / "results/tiny/target_comparison.csv")
    said = " ".join(words.sentences(table)["default"])
    assert "cpu2 reaches 0.15 token accuracy" in said and "inconclusive: 4 of 4 runs did not reach the target" in said
    assert (tmp_path / "results/tiny/plots/time_to_target.png").stat().st_size > 0
    page = (tmp_path / "results/tiny/tables/time_to_target.html").read_text()
    assert "censored" in page  # the page says how runs that never reached the target count


@pytest.mark.slow
def test_runs_stopped_at_the_target_through_the_workflow_and_report(tmp_path, small_config):
    """Every run stops at the target: time to target is reported; the fixed-steps tables, figures and headline say
    they are not available instead of failing or comparing what ran fewer steps."""
    from conftest import snakemake

    cfg = with_targets(small_config, [{"metric": "token_accuracy", "value": 0.15}])
    cfg["recipe"]["schedule"] = {"steps": 60, "warmup_steps": 5, "stop_at": "target"}
    cfg["hardware"] = {"cpu1": small_config["hardware"]["cpu1"]}  # one hardware: the test stays near a minute
    proc = snakemake(tmp_path, cfg, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(tmp_path / "results/tiny/runs.csv")
    assert len(runs) == 2 and ((runs.stopped_at_step > 0) & (runs.stopped_at_step < 60)).all()
    assert pd.read_csv(tmp_path / "results/tiny/comparison.csv").empty
    reached = pd.read_csv(tmp_path / "results/tiny/time_to_target.csv")
    assert reached.reached.all() and (reached.steps_to_target <= runs.stopped_at_step.max()).all()
    proc = snakemake(tmp_path, cfg, "--report", str(tmp_path / "report.html"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / ".snakemake/hwsweep/landing.rst").read_text()
    assert "2 of 2 runs stopped at the target" in page and "**not available**" in page


def test_seeds_on_one_coarse_evaluation_are_not_the_same_steps_and_the_note_says_how_often_to_evaluate():
    """Issue 32: three seeds at step 75 on both hardware, evaluations every 25 steps (±33%): no 'same number of
    steps (±10%)' from zero spread, no p = 0, no flag; the sentence says the grid is too coarse and how fine it
    must be for these seeds."""
    runs = pd.concat([frame("a", [75] * 3, [True] * 3, [10, 11, 9], interval=25),
                      frame("b", [75] * 3, [True] * 3, [5, 6, 4], interval=25)])  # fmt: skip
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"].to_dict()
    assert row["steps_verdict"] == "inconclusive" and row["rcp_flag"] == "" and row["rcp_p"] > 0.5
    assert 0 < row["steps_p_tost"] <= 1 and row["steps_tost_ci_low"] < 1 / 1.1 and row["steps_tost_ci_high"] > 1.1
    finest = tt.finest_interval(3, 3, 75, 0.1, 0.05, True)
    assert 0 < finest < 25 and row["finest_eval_interval"] == finest
    text = words.sentence(row | {"hardware": "b"}, "a")
    assert "the same" not in text and "p = 0" not in text and "Converges" not in text
    assert row["binds"] == "grid" and 1 <= row["advised_eval_interval"] < 25 and "seeds per hardware" not in row["note"]
    advised = int(row["advised_eval_interval"])
    assert (f"evaluations every 25 steps are too coarse for ±10% with 3 pairs: evaluate "
            f"{'every step' if advised == 1 else f'every ≤ {advised} steps'}") in text


def test_identical_repeats_are_inconclusive_with_the_fixed_step_sentence_and_no_flag():
    """A script that ignores the seed: every seed the same curve on both hardware (b's differs from a's). No
    'same number of steps', no 'converges slower (p = 0)', no speedup: the one sentence of stats.REPEATS."""
    runs = pd.concat([frame("a", [75] * 3, [True] * 3, [10] * 3, digests=["x"] * 3),
                      frame("b", [80] * 3, [True] * 3, [5] * 3, digests=["y"] * 3)])  # fmt: skip
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"].to_dict()
    assert row["steps_verdict"] == "inconclusive" and row["note"] == stats.REPEATS and row["rcp_flag"] == ""
    assert not np.isfinite(row.get("speedup", math.nan)) and not np.isfinite(row.get("rcp_p", math.nan))
    text = words.sentence(row | {"hardware": "b"}, "a")
    assert stats.REPEATS in text and "same" not in text and "Converges" not in text and "sooner" not in text


def test_a_target_no_run_reached_has_no_median_but_the_step_it_was_not_reached_by():
    runs = pd.concat([frame("a", [100, 90, 110], [True] * 3, [10, 9, 11]),
                      frame("b", [30, 30, 30], [False] * 3, [5, 5, 5])])  # fmt: skip
    table = tt.compare(runs, "a", {})
    row = table.set_index("hardware").loc["b"].to_dict()
    assert math.isnan(row["steps_to_target_median"]) and row["censored_at_step"] == 30
    assert words.median_words(row) == "not reached by step 30" and words.median_words(row, "baseline_") == "100"
    page = words.page_html(table)
    assert "not reached by step 30" in page and ">30<" not in page


def test_logrank_scores_by_hand():
    """Two hardware, one evaluation grid: a reaches the target at 20 and 40, b at 20 and is censored at 30.
    At 20: 4 at risk, 2 events (expected 1/2 each); at 40: a's run alone at risk (expected 1). O - E of a =
    2 - (1/2 + 1/2 + 1) = 0. lifelines.statistics.logrank_test's chi-square (O - E)^2 / V agrees to 4e-15
    over 300 random censored suites (checked once, lifelines not a dependency)."""
    scores = tt.logrank_scores(np.array([[20, 40, 20, 30]]), np.array([[True, True, True, False]]))
    assert scores[0] == pytest.approx([1 - 0.5, 1 - 0.5 - 1.0, 1 - 0.5, 0 - 0.5])
    p, excess = tt.logrank_test([[20, 40]], [[True, True]], [[20, 30]], [[True, False]])
    assert excess[0] == pytest.approx(0.0) and p[0] == 1.0


def test_six_shared_seeds_with_censored_runs_use_the_sign_test_by_seed():
    """From 6 pairs the sign test by seed can reach p < 0.05: b is known later on every seed (2 censored)."""
    runs = pd.concat([frame("a", [100, 110, 90, 100, 120, 95], [True] * 6, [10] * 6, interval=10),
                      frame("b", [200, 210, 190, 300, 300, 205], [True, True, True, False, False, True], [9] * 6,
                            interval=10)])  # fmt: skip
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"]
    assert row.rcp_method == tt.SIGN_RCP and row.rcp_p == pytest.approx(2 * 0.5**6) and row.rcp_flag == "slower"
    assert row.rcp_note == "" and "Converges slower" in words.sentence(row.to_dict() | {"hardware": "b"}, "a")


def test_rows_without_the_intervals_get_them_never_narrower():
    """A time_to_target.csv written before issue 32 (no lower ends, no fingerprint) still compares at its grid:
    three seeds at step 75, evaluations every 25, are not 'the same steps'; identical numbers are repeats."""
    old = ["steps_to_target_low", "time_to_target_low_seconds", "curve_digest"]
    runs = pd.concat([frame("a", [75] * 3, [True] * 3, [10, 11, 9], interval=25),
                      frame("b", [75] * 3, [True] * 3, [5, 6, 4], interval=25)]).drop(columns=old)  # fmt: skip
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"]
    assert row.steps_verdict == "inconclusive" and "too coarse" in row.note and row.speedup_ci_low < 2 < row.speedup_ci_high
    filled = tt.with_intervals(runs)
    assert (filled.steps_to_target_low == 50).all() and (filled.time_to_target_low_seconds < filled.time_to_target_seconds).all()
    same = pd.concat([frame("a", [75] * 3, [True] * 3, [10] * 3), frame("b", [80] * 3, [True] * 3, [5] * 3)])
    assert tt.compare(same.drop(columns=old), "a", {}).set_index("hardware").loc["b"].note == stats.REPEATS


def test_the_page_shows_the_steps_tost_interval_beside_the_margin():
    runs = pd.concat([frame("a", [100, 110, 90], [True] * 3, [10, 11, 9]),
                      frame("b", [101, 110, 91], [True] * 3, [5, 6, 4])])  # fmt: skip
    table = tt.compare(runs, "a", {("token_accuracy", 0.99): 0.1})
    row = table.set_index("hardware").loc["b"]
    shown = words.tost_interval(row.to_dict())
    assert shown.endswith(" in [0.909, 1.1]") and row.steps_verdict == "equivalent"
    assert "steps TOST interval (90%) and margin" in words.page_html(table) and shown in words.page_html(table)


def test_a_shift_inside_the_margin_is_equivalent_but_shifted_never_a_warning():
    """Issue 68: 3% more steps with 1% spread: one verdict, 'equivalent, but shifted: 1.03× the steps', no ⚠."""
    rng = np.random.default_rng(3)
    base = np.round(1000 * np.exp(rng.normal(0, 0.01, 8)))
    runs = pd.concat([frame("a", base, [True] * 8, [10] * 8), frame("b", np.round(base * 1.03), [True] * 8, [9] * 8)])
    row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"].to_dict()
    assert row["steps_verdict"] == "equivalent" and row["steps_shifted"] and row["rcp_flag"] == ""
    text = words.sentence(row | {"hardware": "b"}, "a")
    assert "equivalent, but shifted: 1.03× the steps, inside ±10%" in text and "⚠" not in text


@pytest.mark.slow  # ~45 s: each undecided suite plans its advice by simulation
def test_no_sentence_says_the_same_and_warns_for_one_comparison():
    """Over 120 synthetic suites (true ratios 0.8 to 1.25, spreads 0.5% to 20%, grids 1 to 20% of the steps, 3 to 8
    seeds): a sentence with 'the same' or 'equivalent' never carries '⚠'; a flag comes only beyond the margin."""
    rng = np.random.default_rng(68)
    flagged = 0
    for _ in range(120):
        n, ratio, spread = int(rng.integers(3, 9)), float(rng.uniform(0.8, 1.25)), float(rng.uniform(0.005, 0.2))
        interval = max(int(1000 * rng.uniform(0.001, 0.2)), 1)
        base = 1000 * np.exp(rng.normal(0, spread, n))
        new = base * ratio * np.exp(rng.normal(0, spread / 2, n))
        runs = pd.concat([frame(hw, np.ceil(x / interval) * interval, [True] * n, x / 100, interval=interval)
                          for hw, x in (("a", base), ("b", new))])  # fmt: skip
        row = tt.compare(runs, "a", {}).set_index("hardware").loc["b"].to_dict()
        text = words.sentence(row | {"hardware": "b"}, "a")
        assert not (("the same" in text or "equivalent" in text) and "⚠" in text), text
        if row["rcp_flag"]:
            flagged += 1
            assert row["steps_ci_low"] > 1 or row["steps_ci_high"] < 1  # a direction the interval shows
    assert flagged > 8  # the flag still fires where the steps lie beyond the margin


@pytest.mark.parametrize("paired", [True, False])
def test_the_rcp_flag_is_one_sided_at_alpha_at_the_margin(paired):
    """MLPerf's question, one-sided: at a true shift of exactly +10% (the margin) 'converges slower' is said at most
    5% of the time; at +30% most of the time."""
    rng = np.random.default_rng(11 + paired)
    trials, n = 4000, 5
    effect = rng.normal(0, 0.05, (trials, n)) if paired else 0.0
    rates = []
    for shift in (1.1, 1.3):
        base = np.log(1000) + effect + rng.normal(0, 0.03, (trials, n))
        new = np.log(1000 * shift) + effect + rng.normal(0, 0.03, (trials, n))
        out = stats.interval_decide(new, new, base, base, math.log1p(0.1), 0.05, paired)
        rates.append(np.mean((out["p_beyond"] < 0.05) & out["beyond_above"]))
    assert rates[0] <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / trials) and rates[1] > 0.8, rates
