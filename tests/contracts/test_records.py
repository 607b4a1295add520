"""Records are checked when read: damaged, incomplete or implausible ones are named, never aggregated."""

import json

import pytest

from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.records import KEYS, EvalRecord, RecordError, RunRecord, add_curve_points, read

ACCURACY = Metric.from_dict({"name": "acc", "goal": "max", "margin": 0.01, "primary": True, "stage": "eval",
                             "pattern": None, "key": None, "reduce": "last", "bounds": [0, 1]})  # fmt: skip


def write(tmp_path, text: str):
    path = tmp_path / "eval.json"
    path.write_text(text)
    return path


def record(**metrics) -> str:
    return json.dumps({"suite": "s", "variant": "v", "hardware": "h", "seed": 0, "evaluator": "builtin",
                       "metrics": metrics, "eval_seconds": 1.0})  # fmt: skip


def test_a_plausible_record_reads(tmp_path):
    assert read(EvalRecord, write(tmp_path, record(acc=0.9)), [ACCURACY]).metrics == {"acc": 0.9}


def test_a_value_that_does_not_exist_reads_as_none(tmp_path):
    # e.g. training_efficiency's step of a milestone never reached: recorded as such, not as damage
    assert read(EvalRecord, write(tmp_path, record(acc=None)), [ACCURACY]).metrics == {"acc": None}


@pytest.mark.parametrize(
    "text, message",
    [
        (record(acc=1.7), "metric acc is 1.7, outside its bounds [0, 1]"),
        (record(acc=-3), "metric acc is -3, outside its bounds"),
        (record(acc="high"), "metric acc is 'high', not a finite number"),
        (record(acc=True), "metric acc is True, not a finite number"),
        ('{"suite": "s", "metrics": {', "Expecting"),
        (json.dumps({"suite": "s"}), "variant: missing"),
    ],
)
def test_damaged_or_implausible_records_are_named(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(RecordError) as err:
        read(EvalRecord, path, [ACCURACY])
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_status_works_before_any_run_has_finished(tmp_path, monkeypatch, small_config):
    from hwsweep.analysis.status import write_status
    from hwsweep.plan.config import resolve

    monkeypatch.chdir(tmp_path)
    status = write_status(resolve(small_config))
    assert set(status.state) == {"missing"} and len(status) == 4
    assert (tmp_path / "results/partial/comparison.csv").exists()


def train(seed: int, curves: dict) -> RunRecord:
    return RunRecord(status="complete", suite="s", variant="v", hardware="h", seed=seed, trainer="builtin", spec={},
                     plan={}, metrics={}, provenance={}, data_order={}, curves=curves, train_seconds=1.0,
                     startup_seconds=1.0, wall_seconds=2.0, samples_per_second=1.0, segments=[], restarts=0,
                     resumed_from_step=None, step_seconds=[], periodic_eval_seconds=[])  # fmt: skip


def test_curve_points_are_one_row_a_logged_point_with_the_runs_keys():
    first = {"loss": {"steps": [1, 2, 3], "values": [3.0, 2.0, 1.5]}, "acc": {"steps": [3], "values": [0.5]}}
    records = [train(0, first), train(7, {"loss": {"steps": [1, 2, 3], "values": [3.0, 2.5]}})]  # a value short
    points = {c: [] for c in KEYS + ["metric", "step", "value"]}
    for r in records:
        add_curve_points(r, points)
    rows = [row[3:] for row in zip(*points.values())]
    assert {row[:3] for row in zip(*points.values())} == {("s", "v", "h")}
    assert rows == [(0, "loss", 1, 3.0), (0, "loss", 2, 2.0), (0, "loss", 3, 1.5), (0, "acc", 3, 0.5),
                    (7, "loss", 1, 3.0), (7, "loss", 2, 2.5)]  # zip's length: a point has a step and a value  # fmt: skip
    assert {len(v) for v in points.values()} == {6}
