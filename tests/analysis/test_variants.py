"""Variants against each other (issue 21): the per-metric verdicts, the overall intersection-union, one seed, identical
repeats, training FLOPs, the config's reference and compare, the sentences, the page, and (slow) the workflow."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
from conftest import SMALL, snakemake

from hwsweep.analysis import stats, variants
from hwsweep.contracts.metrics import Metric
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.report import headline, landing, tables


def _metric(name, goal="max", margin=None, primary=True, bounds=(0, 1)):
    return Metric(name=name, goal=goal, margin=margin, primary=primary, stage="eval", pattern=None, key=None,
                  reduce="last", bounds=list(bounds) if bounds else None)  # fmt: skip


SETTINGS = stats.Settings.of({}, [_metric("exact_accuracy", margin=0.02), _metric("final_loss", "min", bounds=None)])


def _runs(shifts: dict, seeds=(0, 1, 2), sd=0.01, flops=None, hardware=("cpu1",), rng=0):
    """Runs of suite aug: per variant a shift of exact accuracy (up) and final loss (down), a shared seed effect."""
    rng = np.random.default_rng(rng)
    effect = {s: rng.normal(0, 0.05) for s in seeds}  # what a seed does to every variant: pairing removes it
    rows = []
    for variant, shift in shifts.items():
        for hw in hardware:
            for seed in seeds:
                rows.append(dict(suite="aug", variant=variant, hardware=hw, seed=seed,
                                 exact_accuracy=0.7 + shift + effect[seed] + rng.normal(0, sd),
                                 final_loss=1.0 - shift - effect[seed] + rng.normal(0, sd),
                                 flops_per_step=(flops or {}).get(variant, 1e9), steps=100))  # fmt: skip
    return pd.DataFrame(rows)


def test_a_clear_gain_is_better_on_every_primary_metric_paired_by_seed():
    frame = variants.variants(_runs({"views-0": 0, "views-8": 0.12}), "views-0", SETTINGS).set_index("metric")
    acc, loss = frame.loc["exact_accuracy"], frame.loc["final_loss"]
    assert acc.test == variants.PAIRED_T and acc.n == 3 and acc.reference == "views-0" and acc.seeds == "0 1 2"
    assert acc.verdict == "better" and acc.ci_low > 0 and acc.difference == pytest.approx(acc["mean"] - acc.reference_mean)
    assert loss.verdict == "better" and loss.ci_high < 0  # lower is better: a negative difference
    assert acc.overall == loss.overall == "better"
    assert acc.equivalence == "different" and loss.equivalence == ""  # TOST only where a margin is declared
    assert acc.finding.startswith("better exact accuracy: +") and "points" in acc.finding


def test_a_loss_is_worse_and_no_shift_is_no_clear_difference():
    frame = variants.variants(_runs({"a": 0, "worse": -0.1, "same": 0}), "a", SETTINGS)
    by = frame.groupby("variant").overall.first()
    assert by["worse"] == "worse" and by["same"] == "no clear difference"
    assert "a" not in set(frame.variant)  # the reference is not compared with itself


def test_the_overall_verdict_is_an_intersection_union():
    assert variants.overall(["better", "better"]) == "better"
    assert variants.overall(["better", "no clear difference"]) == "mixed"
    assert variants.overall(["better", "worse"]) == "mixed"
    assert variants.overall(["worse", "worse"]) == "worse"
    assert variants.overall(["no clear difference", "inconclusive"]) == "inconclusive"
    assert variants.overall(["not tested", "not tested"]) == "not tested"
    assert variants.overall([]) == "not compared"


def test_secondary_metrics_do_not_vote():
    settings = stats.Settings.of({}, [_metric("exact_accuracy"), _metric("final_loss", "min", primary=False,
                                                                          bounds=None)])  # fmt: skip
    runs = _runs({"a": 0, "b": 0.1})
    runs.loc[runs.variant == "b", "final_loss"] += 0.5  # worse loss, but secondary
    frame = variants.variants(runs, "a", settings).set_index("metric")
    assert frame.loc["final_loss", "verdict"] == "worse" and frame.loc["exact_accuracy", "overall"] == "better"


def test_one_seed_gives_the_numbers_side_by_side_and_the_seeds_for_a_test():
    frame = variants.variants(_runs({"a": 0, "b": 0.1}, seeds=(4,)), "a", SETTINGS).set_index("metric")
    acc = frame.loc["exact_accuracy"]
    assert acc.verdict == acc.overall == "not tested" and math.isnan(acc.ci_low)
    assert acc.finding.startswith(f"exact accuracy {acc['mean'] * 100:.3g} points against ")
    assert acc.finding.endswith("(one seed: no test; seeds: [4, 5, 6] would allow a test)")
    sentence = headline.variant_sentences(frame.reset_index())[0]
    assert sentence.startswith("b against a on cpu1 (one seed): exact accuracy ")
    assert sentence.endswith("**no test** — seeds: [4, 5, 6] would allow a test.")


def test_identical_repeats_stay_inconclusive():
    runs = _runs({"a": 0, "b": 0.1}, sd=0)
    runs["exact_accuracy"] = np.where(runs.variant == "a", 0.5, 0.6)  # every seed one value: repeats, not seeds
    frame = variants.variants(runs, "a", SETTINGS).set_index("metric")
    assert frame.loc["exact_accuracy", "verdict"] == "inconclusive"
    assert frame.loc["exact_accuracy", "finding"] == stats.REPEATS and frame.loc["exact_accuracy", "overall"] != "better"


def _hrm_settings():
    return stats.Settings.of({}, [_metric("exact_accuracy", margin=0.02), _metric("final_loss", "min", bounds=None),
                                  _metric("steps_to_exact_accuracy_90", "min", primary=False, bounds=(0, 1e12)),
                                  _metric("eval_segments_per_sample", "min", primary=False, bounds=(0, 1e6))])


def test_a_metric_no_run_reached_says_so_never_asks_for_seeds_that_ran():
    runs = _runs({"a": 0, "b": 0.1}).assign(steps_to_exact_accuracy_90=math.nan, eval_segments_per_sample=4.0,
                                             seeded=True)  # fmt: skip
    frame = variants.variants(runs, "a", _hrm_settings()).set_index("metric")
    empty = frame.loc["steps_to_exact_accuracy_90"]
    assert empty.verdict == "not tested"
    assert empty.finding == "steps to exact accuracy 90: no run reached it (0 of 3 runs of b, 0 of 3 of a): nothing to test"
    runs.loc[(runs.variant == "a") & (runs.seed == 0), "steps_to_exact_accuracy_90"] = 400.0
    some = variants.variants(runs, "a", _hrm_settings()).set_index("metric").loc["steps_to_exact_accuracy_90"]
    assert some.finding == "steps to exact accuracy 90: 0 of 3 runs of b and 1 of 3 of a reached it: too few values for a test"
    sentences = " ".join(headline.variant_sentences(frame.reset_index().assign(primary=False)))
    assert "would allow a test" not in sentences and "one seed" not in sentences and "no run reached it" in sentences


def test_a_metric_constant_by_design_is_not_tested_and_not_blamed_on_seeds():
    """HRM's eval_segments_per_sample is 4 on every seed of every variant (evaluation runs every segment)."""
    runs = _runs({"a": 0, "b": 0.12}).assign(steps_to_exact_accuracy_90=300.0, eval_segments_per_sample=4.0,
                                              seeded=True)  # fmt: skip
    runs["steps_to_exact_accuracy_90"] += np.arange(len(runs))  # the milestone varies: tested
    settings = stats.Settings.of({}, [_metric("exact_accuracy", margin=0.02),
                                      _metric("eval_segments_per_sample", "min", bounds=(0, 1e6))])  # primary too
    frame = variants.variants(runs, "a", settings).set_index("metric")
    segments = frame.loc["eval_segments_per_sample"]
    assert segments.verdict == variants.NOTHING and segments.finding == (
        f"eval segments per sample 4 on every run: {stats.SAME_EVERYWHERE}")
    assert "seed" not in segments.finding and stats.untestable(segments.note)
    assert segments.overall == "better"  # a constant metric has no vote: the gain in exact accuracy decides
    # constant on each side but different (seeded runs, not repeats): no spread, and not blamed on seeds either
    runs["eval_segments_per_sample"] = np.where(runs.variant == "a", 4.0, 8.0)
    row = variants.variants(runs, "a", settings).set_index("metric").loc["eval_segments_per_sample"]
    assert row.finding == f"eval segments per sample 8 against 4: {stats.CONSTANT_SIDES}" and "seed flag" not in row.finding


def test_a_side_at_its_floor_on_every_seed_is_named_beside_the_test():
    """The fixed variant solved nothing on every seed, the reference a little with spread: 'solved nothing' is said,
    not only 'no clear difference'."""
    runs = _runs({"a": -0.69, "fixed": 0}, sd=0.004).assign(seeded=True)
    runs.loc[runs.variant == "fixed", "exact_accuracy"] = 0.0
    row = variants.variants(runs, "a", SETTINGS).set_index("metric").loc["exact_accuracy"]
    assert row.finding.startswith("exact accuracy 0 points on every seed of fixed: solved nothing; against a: ")
    sentence = headline.variant_sentences(variants.variants(runs, "a", SETTINGS))[0]
    assert "solved nothing" in sentence
    both = runs.assign(exact_accuracy=0.0)  # both at the floor: the constant's words, not one side's
    row = variants.variants(both, "a", SETTINGS).set_index("metric").loc["exact_accuracy"]
    assert "its floor" in row.finding and "solved nothing" not in row.finding


def test_unshared_seeds_are_compared_unpaired():
    runs = _runs({"a": 0, "b": 0.1}, seeds=(0, 1, 2, 3, 4, 5))
    runs = runs[(runs.variant == "a") & (runs.seed < 3) | (runs.variant == "b") & (runs.seed >= 3)]
    row = variants.variants(runs, "a", SETTINGS).iloc[0]
    assert row.test == variants.WELCH_T and headline.pairing_words(pd.DataFrame([row])) == "unpaired (Welch), 3 and 3 seeds"


def test_training_flops_apart_by_more_than_ten_percent_are_said():
    frame = variants.variants(_runs({"a": 0, "b": 0.1, "c": 0.1}, flops={"b": 2.2e9, "c": 1.05e9}), "a", SETTINGS)
    notes = frame.groupby("variant").flops_note.first()
    assert notes["b"].startswith("2.2× the reference's training FLOPs: more than 10% apart") and notes["c"] == ""
    assert frame[frame.variant == "b"].training_flops.iloc[0] == pytest.approx(2.2e11)


def test_cross_suite_comparison_pairs_by_seed_and_puts_the_flops_side_by_side():
    hrm = _runs({"h_cycles-2": 0.1}, flops={"h_cycles-2": 3e9}).assign(suite="hierarchical")
    deep = _runs({"default": 0}, rng=1).assign(suite="deep_transformer")  # its own noise: a spread to test
    pair = {"variant": "hierarchical/h_cycles-2", "reference": "deep_transformer/default", "metrics": ["exact_accuracy"]}
    frame = variants.cross(pd.concat([hrm, deep]), {"hrm_vs_transformer": pair}, SETTINGS)
    assert list(frame.metric) == ["exact_accuracy"] and frame.comparison.iloc[0] == "hrm_vs_transformer"
    assert frame.test.iloc[0] == variants.PAIRED_T and frame.overall.iloc[0] == "better"
    (sentence,) = headline.variant_sentences(frame, side_by_side=True)
    assert sentence.startswith("hrm_vs_transformer: hierarchical/h_cycles-2 against deep_transformer/default on cpu1 "
                               "(paired by seed, 3 seeds): **better** — better exact accuracy: +")  # fmt: skip
    assert "Training FLOPs 300 GFLOP against 100 GFLOP (3× the reference's training FLOPs: more than 10% apart" in sentence


def test_the_sentence_says_the_verdict_with_its_interval():
    frame = variants.variants(_runs({"views-0": 0, "views-8": 0.12}), "views-0", SETTINGS)
    (sentence,) = headline.variant_sentences(frame)
    acc = frame.set_index("metric").loc["exact_accuracy"]
    assert sentence.startswith("views-8 against views-0 on cpu1 (paired by seed, 3 seeds): **better** — ")
    assert f"better exact accuracy: +{acc.difference * 100:.3g} points (95% CI +{acc.ci_low * 100:.3g} to " in sentence


def test_the_page_marks_verdicts_and_lists_every_metric():
    frame = variants.variants(_runs({"a": 0, "b": 0.1, "c": -0.1}), "a", SETTINGS)
    page = tables.variants_page(frame, "Variants against the reference")
    # per metric row: its verdict and the cell's overall verdict
    assert page.count('data-verdict="better"') == 4 and page.count('data-verdict="worse"') == 4
    assert "different (±2 points)" in page


def test_landing_answers_with_the_variants_and_says_nothing_new_for_one_variant(tmp_path):
    cfg = copy.deepcopy(SMALL) | {"seeds": [0, 1, 2]}
    cfg["suites"] = {"aug": {"sweep": {"model.width": [32, 64]}}, "solo": {}}
    matrix = resolve(cfg)
    results = tmp_path / "results"
    for suite in ("aug", "solo"):
        (results / suite).mkdir(parents=True)
        runs = _runs({"width-32": 0, "width-64": 0.1} if suite == "aug" else {"default": 0}).assign(suite=suite)
        frame = variants.variants(runs, matrix.references[suite], SETTINGS)
        frame.to_csv(results / suite / "variants.csv", index=False)
        pd.DataFrame(columns=["variant", "hardware", "baseline"]).to_csv(results / suite / "comparison.csv", index=False)
        pd.DataFrame(columns=["variant", "hardware"]).to_csv(results / suite / "equivalence.csv", index=False)
    aug = landing.suite_section(matrix, "aug", True, results=results)
    solo = landing.suite_section(matrix, "solo", True, results=results)
    assert "*Variants against width-32*:" in aug
    assert any(line.startswith("- width-64 against width-32 on cpu1 (paired by seed, 3 seeds): **better**") for line in aug)
    assert not any("Variants" in line for line in solo)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["suites"]["aug"].update(reference="width-99"),
         "suites.aug.reference: 'width-99' is not a variant of suite aug; use one of width-32, width-64"),
        (lambda c: c["compare"]["x"].update(variant="aug/width-33"),
         "compare.x.variant: 'aug/width-33' is not a suite/variant of this config; did you mean aug/width-32?"),
        (lambda c: c["compare"]["x"].update(reference="aug/width-32"),
         "compare.x.reference: the same as its variant; name another suite/variant"),
        (lambda c: c["compare"]["x"].update(metrics=["accuracy"]),
         "compare.x.metrics: 'accuracy' is not a declared metric; use one of token_accuracy, exact_accuracy, final_loss"),
        (lambda c: c["compare"]["x"].pop("reference"), "compare.x.reference: missing; add it"),
    ],
)  # fmt: skip
def test_bad_variant_config_is_one_line_naming_the_field(change, message):
    cfg = copy.deepcopy(SMALL)
    cfg["suites"] = {"aug": {"sweep": {"model.width": [32, 64]}}, "deep": {"overrides": {"model": {"depth": 2}}}}
    cfg["compare"] = {"x": {"variant": "aug/width-32", "reference": "deep/default"}}
    assert resolve(cfg).references == {"aug": "width-32", "deep": "default"}  # the first variant by default
    change(cfg)
    with pytest.raises(ConfigError) as err:
        resolve(cfg)
    assert str(err.value) == message


def test_a_declared_reference_and_comparison_resolve():
    cfg = copy.deepcopy(SMALL)
    cfg["suites"] = {"aug": {"sweep": {"model.width": [32, 64]}, "reference": "width-64"}}
    cfg["compare"] = {"x": {"variant": "aug/width-32", "reference": "aug/width-64", "metrics": ["final_loss"]}}
    matrix = resolve(cfg)
    assert matrix.references == {"aug": "width-64"}
    assert matrix.compare == {"x": {"variant": "aug/width-32", "reference": "aug/width-64", "metrics": ["final_loss"]}}


@pytest.mark.slow
def test_a_two_variant_suite_through_the_workflow(tmp_path):
    cfg = copy.deepcopy(SMALL)
    cfg["recipe"]["schedule"] = {"steps": 8, "warmup_steps": 2}
    cfg["hardware"] = {"cpu1": SMALL["hardware"]["cpu1"]}
    cfg["suites"] = {"tiny": {"sweep": {"model.width": [16, 32]}, "reference": "width-32"}}
    cfg["compare"] = {"narrow": {"variant": "tiny/width-16", "reference": "tiny/width-32", "metrics": ["final_loss"]}}
    # the trainer's own loss only: no evaluation jobs, one metric plot (the test stays near a minute)
    cfg["evaluation"] = "none"
    cfg["metrics"] = {"final_loss": {"goal": "min", "stage": "train", "key": "loss", "reduce": "last"}}
    proc = snakemake(tmp_path, cfg, "--cores", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = pd.read_csv(tmp_path / "results/tiny/runs.csv")
    frame = pd.read_csv(tmp_path / "results/tiny/variants.csv").set_index("metric")
    assert set(frame.variant) == {"width-16"} and set(frame.reference) == {"width-32"}
    loss = frame.loc["final_loss"]
    mine = runs[runs.variant == "width-16"].set_index("seed").final_loss
    theirs = runs[runs.variant == "width-32"].set_index("seed").final_loss
    assert loss.test == variants.PAIRED_T and loss.n == 2
    assert loss.difference == pytest.approx((mine - theirs).mean())
    assert loss.training_flops < loss.reference_training_flops  # narrower: fewer FLOPs, and said so
    assert "the reference's training FLOPs: more than 10% apart" in loss.flops_note
    assert len(pd.read_csv(tmp_path / "results/variants.csv")) == len(frame)
    compare = pd.read_csv(tmp_path / "results/compare.csv")
    assert list(compare.metric) == ["final_loss"] and compare.difference.iloc[0] == pytest.approx(loss.difference)
    assert (tmp_path / "results/tiny/tables/variants.html").exists() and (tmp_path / "results/compare.html").exists()

    proc = snakemake(tmp_path, cfg, "--report", str(tmp_path / "report.html"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / ".snakemake/hwsweep/landing.rst").read_text()
    assert "*Variants against width-32*:" in page
    sentence = next(line for line in page.splitlines() if line.startswith("- width-16 against width-32 on cpu1"))
    assert sentence.startswith(f"- width-16 against width-32 on cpu1 (paired by seed, 2 seeds): **{loss.overall}** — ")
    assert "**Comparisons across suites**" in page and "- narrow: tiny/width-16 against tiny/width-32" in page
