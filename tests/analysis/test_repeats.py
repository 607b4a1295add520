"""Identical repeats (issue 68): seeds whose runs came out the same are marked unseeded with the reason; one stance
on every page: no metric is tested from them, a speedup's interval stands as timing noise and says so, and a
suite's landing page says "identical repeats" in full once."""

import numpy as np
import pandas as pd
import pytest

from hwsweep.analysis import repeats, stats
from hwsweep.contracts.metrics import Metric
from hwsweep.report import headline

ACC = Metric(name="token_accuracy", goal="max", margin=0.01, primary=True, stage="eval", pattern=None, key=None,
             reduce="last", bounds=[0, 1])  # fmt: skip


def suite(same: dict, seeds=(0, 1, 2)):
    """runs and curves of hardware cpu1 and cpu2; same[hw]: every seed logs one curve and one final value."""
    runs, curves = [], []
    for hw, identical in same.items():
        for seed in seeds:
            shift = 0.0 if identical else 0.01 * seed
            runs.append(dict(suite="s", variant="v", hardware=hw, seed=seed, seeded=True, token_accuracy=0.9 + shift,
                             train_seconds=10.0 + seed * 0.3 + (hw == "cpu2") * 5, world_size=1, gpu_type="cpu",
                             samples_per_second=1.0))  # fmt: skip
            for step in (10, 20):
                curves += [dict(suite="s", variant="v", hardware=hw, seed=seed, metric=m, step=step, value=v)
                           for m, v in (("loss", 2.0 / step + shift), ("eval_token_accuracy", 0.45 + step / 50 + shift),
                                        ("seconds_per_step", 0.1 + 0.01 * seed))]  # a timing curve: differs  # fmt: skip
    return pd.DataFrame(runs), pd.DataFrame(curves)


def test_seeds_with_identical_curves_are_marked_unseeded_with_the_reason():
    runs, curves = suite({"cpu1": True, "cpu2": False})
    marked = repeats.mark(runs, curves, [ACC]).set_index("hardware")
    assert not marked.loc["cpu1"].seeded.any() and (marked.loc["cpu1"].seeded_note == repeats.IDENTICAL).all()
    assert marked.loc["cpu2"].seeded.all() and (marked.loc["cpu2"].seeded_note == "").all()


def test_one_differing_value_one_seed_or_no_curves_are_not_repeats():
    runs, curves = suite({"cpu1": True})
    curves.loc[(curves.seed == 2) & (curves.metric == "loss") & (curves.step == 20), "value"] += 1e-12
    assert repeats.identical_cells(runs, curves, [ACC]) == set()  # one value in the last digit: seeds
    runs, curves = suite({"cpu1": True})
    runs.loc[runs.seed == 1, "token_accuracy"] = 0.5  # same curves, another final value: seeds
    assert repeats.identical_cells(runs, curves, [ACC]) == set()
    runs, curves = suite({"cpu1": True}, seeds=(0,))
    assert repeats.identical_cells(runs, curves, [ACC]) == set()
    runs, curves = suite({"cpu1": True})
    assert repeats.identical_cells(runs, curves.iloc[:0], [ACC]) == set()


def test_a_speedup_of_repeats_keeps_its_interval_and_says_it_is_timing_noise():
    runs, curves = suite({"cpu1": True, "cpu2": True})
    speed = stats.speedup(repeats.mark(runs, curves, [ACC]), "cpu1").set_index("hardware")
    assert np.isfinite(speed.speedup_ci_low["cpu2"]) and speed.speedup_note["cpu2"] == stats.TIMING_ONLY
    text = headline.cost_sentence(speed.loc["cpu2"].to_dict() | {"hardware": "cpu2"}, "cpu1")
    assert text.startswith("cpu2: ") and "slower (95% CI " in text
    assert f"; {stats.TIMING_ONLY}) at " in text  # the same sentence, inside the interval's parentheses
    seeded = stats.speedup(runs, "cpu1").set_index("hardware")  # the same times, seeds that are seeds
    assert seeded.speedup_note["cpu2"] == "" and stats.TIMING_ONLY not in headline.cost_sentence(
        seeded.loc["cpu2"].to_dict() | {"hardware": "cpu2"}, "cpu1")


def test_metrics_of_repeats_are_not_tested_and_the_page_says_so_once():
    runs, curves = suite({"cpu1": True, "cpu2": True})
    settings = stats.Settings.of({}, [ACC])
    equivalence = stats.equivalence(repeats.mark(runs, curves, [ACC]), "cpu1", settings)
    assert equivalence.finding.iloc[0] == stats.REPEATS
    lines = [f"- equivalence — {stats.REPEATS}", f"- time to target **{stats.REPEATS}**", "- speed",
             f"- variants: {stats.REPEATS}; {stats.REPEATS}"]
    said = headline.once(lines)
    assert "\n".join(said).count(stats.REPEATS) == 1 and said[0] == lines[0] and said[2] == "- speed"
    assert said[1] == f"- time to target **{headline.AS_ABOVE}**" and said[3].count(headline.AS_ABOVE) == 2
    assert headline.once(["- nothing of it"]) == ["- nothing of it"]


@pytest.mark.parametrize("column", ["seeded", None])
def test_runs_without_a_seeded_column_get_one(column):
    runs, curves = suite({"cpu1": True})
    runs = runs if column else runs.drop(columns="seeded")
    assert not repeats.mark(runs, curves, [ACC]).seeded.any()


def by_row(runs, curves, metrics) -> set:
    """identical_cells as issue 68 wrote it (each cell's rows filtered from the whole frame, each seed's curve a
    tuple of tuples): the reference the one-pass version must agree with."""
    learned = curves[curves.metric.isin(repeats.learning_curves(metrics))]
    out = set()
    for cell, frame in runs.groupby(["suite", "variant", "hardware"], sort=False):
        mine = learned[(learned.suite == cell[0]) & (learned.variant == cell[1]) & (learned.hardware == cell[2])]
        if frame.seed.nunique() < 2 or mine.empty:
            continue
        series = {s: tuple(map(tuple, c.sort_values(["metric", "step"])[["metric", "step", "value"]].to_numpy()))
                  for s, c in mine.groupby("seed")}  # fmt: skip
        finals = {tuple(r) for r in frame[[ACC.name]].fillna(-1e308).to_numpy().tolist()}
        if len(series) == frame.seed.nunique() and len(set(series.values())) == 1 and len(finals) == 1:
            out.add(cell)
    return out


def many_cells(seed: int):
    """Six cells of five seeds, some identical, some one value apart (a curve's or a final's), rows shuffled."""
    frames = [suite({f"hw{i}": i % 2 == 0}, seeds=range(5)) for i in range(6)]
    runs = pd.concat([f[0] for f in frames], ignore_index=True)
    curves = pd.concat([f[1] for f in frames], ignore_index=True)
    last = (curves.hardware == "hw2") & (curves.seed == 4) & (curves.metric == "loss") & (curves.step == 20)
    curves.loc[last, "value"] = np.nextafter(curves.loc[last, "value"], 9.0)  # the last step, the last bit
    runs.loc[(runs.hardware == "hw4") & (runs.seed == 3), ACC.name] = np.nan  # a missing final: another value
    return runs.sample(frac=1, random_state=seed), curves.sample(frac=1, random_state=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_identical_cells_agree_with_the_per_row_reference_whatever_the_row_order(seed):
    runs, curves = many_cells(seed)
    found = repeats.identical_cells(runs, curves, [ACC])
    assert found == {("s", "v", "hw0")} and found == by_row(runs, curves, [ACC])


def test_a_seed_missing_a_point_or_logging_nan_is_not_a_repeat():
    runs, curves = suite({"cpu1": True})
    last = (curves.seed == 1) & (curves.metric == "loss") & (curves.step == 20)
    assert repeats.identical_cells(runs, curves[~last], [ACC]) == set()  # one point fewer
    doubled = pd.concat([curves, curves[last]], ignore_index=True)
    assert repeats.identical_cells(runs, doubled, [ACC]) == set()  # one point twice
    runs, curves = suite({"cpu1": True})
    curves.loc[curves.metric == "loss", "value"] = np.nan  # NaN equals nothing, as before: no evidence of repeats
    assert repeats.identical_cells(runs, curves, [ACC]) == set() == by_row(runs, curves, [ACC])
    runs, curves = suite({"cpu1": True})
    assert repeats.identical_cells(runs, curves[curves.seed != 2], [ACC]) == set()  # a seed logged nothing
