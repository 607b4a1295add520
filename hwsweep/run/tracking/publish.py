"""What a job hands the trackers at its end: the record beside a run's close, the evaluation, a suite's tables."""

from __future__ import annotations

from hwsweep.contracts import io
from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.target import aggregate_target
from hwsweep.run.tracking.tracker import Tracker

FINAL_PREFIX = "final/"  # the held-out evaluation's metrics, apart from the periodic evaluations' curves


def close_recorded(tracker: Tracker, record, status: dict) -> dict:
    """Close `tracker` with `record` (train.json or eval.json, written with `status`, what drain() said) as an
    artifact, and bring the record's tracking up to date where the close changed it (a backend that failed or
    was given up at the end): the record says what each tracker finally holds."""
    closed = tracker.close(artifacts=[record])
    if closed != status:
        io.write_json(record, io.read_json(record) | {"tracking": closed})
    return closed


def publish_evaluation(spec, run_dir, step: int, metrics: dict, record) -> dict | None:
    """The evaluate job's metrics to the run's tracked run (the same id: after its training, at its last step,
    under final/<metric>) with eval.json (`record`) as an artifact; eval.json's tracking says what each backend
    took. Waits as Tracker.drain does; failures are warnings. None when the run is not tracked."""
    tracker = Tracker.start(spec, run_dir, TrackingConfig.of_run(run_dir), start_step=step, system=False)
    if tracker is None:
        return None
    tracker.final(step, {f"{FINAL_PREFIX}{k}": v for k, v in metrics.items()})
    status = tracker.drain()
    io.write_json(record, io.read_json(record) | {"tracking": status})
    return close_recorded(tracker, record, status)


def publish_tables(suite: str, suite_dir, config: TrackingConfig, tables: dict) -> dict | None:
    """A suite's tables (name -> CSV path) to every tracker: MLflow artifacts, a W&B table each, TensorBoard
    text. Waits as Tracker.close does; a backend that did not take them is one warning line in the job's log.
    None when tracking is off."""
    if not config.on:
        return None
    tracker = Tracker(aggregate_target(suite, suite_dir), config, system=False)
    return tracker.close(texts=tables)
