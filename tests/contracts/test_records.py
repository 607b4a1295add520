"""Records are checked when read: damaged, incomplete or implausible ones are named, never aggregated."""

import json

import pytest

from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.records import EvalRecord, RecordError, read

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
