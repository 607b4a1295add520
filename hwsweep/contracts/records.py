"""The two records a run leaves (train.json: RunRecord, eval.json: EvalRecord) and their
flattening into table rows. Every trainer writes the same RunRecord: the built-in one through
hwsweep.runtime, a user's command through hwsweep.contracts.command. Statistics read the rows only."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from hwsweep.contracts import host, io
from hwsweep.contracts.command import Trainer
from hwsweep.contracts.metrics import problems
from hwsweep.contracts.typed import SpecError, Typed

KEYS = ["suite", "variant", "hardware", "seed"]
PLAN_COLUMNS = [
    "accelerator", "nodes", "devices_per_node", "world_size", "global_batch", "micro_batch",
    "accumulation", "steps", "warmup_steps", "epochs", "precision", "tf32", "reproducibility",
    "lr", "comparable", "strategy",
]  # fmt: skip
TIMING_COLUMNS = ["train_seconds", "startup_seconds", "wall_seconds", "samples_per_second"]
# The parts of a training process's startup, in the order they happen (hwsweep.run.startup measures them).
PARTS = ("imports", "process_group", "data", "model", "first_step")
STARTUP_COLUMNS = [f"startup_{part}_seconds" for part in PARTS]  # startup_seconds in parts (hwsweep.run.startup)
SPEED_COLUMNS = ["samples_per_second_per_device", "flops_per_step", "tflops_per_device", "mfu"]


class RecordError(ValueError):
    pass


@dataclass(frozen=True)
class Curve(Typed):
    """One logged series: values[i] was logged at optimizer step steps[i] (1-based)."""

    steps: list
    values: list


@dataclass(frozen=True)
class RunRecord(Typed):
    """train.json: what one training run did."""

    status: str  # "complete"
    suite: str
    variant: str
    hardware: str
    seed: int
    trainer: str  # "builtin" | "command"
    spec: dict  # the resolved RunSpec it ran
    plan: dict  # the plan as executed (the spec's plan + what the trainer chose, e.g. threads)
    metrics: dict  # final value of every train-stage metric, by name
    curves: dict  # name -> Curve (as a dict), every series logged per step
    train_seconds: float
    startup_seconds: float | None  # None: unknown (a command that printed no step); train_seconds then holds it
    wall_seconds: float
    samples_per_second: float
    data_order: dict  # sampler, dataset size, num_workers
    segments: list  # one entry per start: {start_step, startup_seconds, startup_parts (hwsweep.run.startup)}
    restarts: int
    resumed_from_step: int | None
    provenance: dict
    checkpoint: str | None = None  # the final checkpoint's file name in the run directory
    step_seconds: list = field(default_factory=list)
    # [step, seconds] of each periodic evaluation (runtime.evaluate), inside step_seconds: time-to-target leaves it out.
    periodic_eval_seconds: list = field(default_factory=list)
    # The step a run stopped at once its logged values (periodic evaluation, loss) reached every target
    # (schedule.stop_at: target);
    # None: it ran its schedule. Its final metrics and time are then not those of the schedule's steps.
    stopped_at_step: int | None = None
    checks: list = field(default_factory=list)  # where the run did not follow its plan (flagged, not fatal)
    # Memory per device: the plan's estimate (plan.est_memory_gb; None where it has none, e.g. a user's model) and
    # the measured peak, max over ranks. peak_memory_source says what was measured: cuda_max_memory_allocated
    # (the estimate adds the CUDA context) or host_rss (the process's whole resident set, the interpreter and torch
    # included: its growth above rank_memory's baseline is what compares with the estimate).
    planned_memory_gb: float | None = None
    peak_memory_gb: float | None = None
    peak_memory_source: str | None = None
    # The memory the hardware entry declares per device (plan.memory_gb; None: none known), and each rank's
    # {peak_gb, baseline_gb} in rank order (baseline: what it held before the model was built, which the plan does
    # not count); a rank whose growth above it is over the plan beyond its tolerance puts a "memory: ..." line in
    # checks (hwsweep.contracts.memory_check). [] where not measured per rank (a command's run).
    memory_budget_gb: float | None = None
    rank_memory: list = field(default_factory=list)
    # Throughput per device in the steady state; FLOPs from torch's counter on a real micro-batch
    # (runtime-API trainers that count them); mfu against the catalog's peak (None: no peak known).
    samples_per_second_per_device: float | None = None
    flops_per_step: float | None = None
    tflops_per_device: float | None = None
    mfu: float | None = None
    # The trainer seeded every rank from the run's seed itself (hwsweep.runtime does, whatever flags the
    # script takes); None: judged from the trainer's flags (a command without a seed flag repeats one run).
    seeded: bool | None = None
    # startup_seconds in parts (PARTS), summed over segments; None: not broken down (a command).
    startup_parts: dict | None = None
    # A command's run: what its processes were seen to train (hwsweep.run.observe: processes, process group,
    # devices, samples per step, global batch, optimizer steps); None where nothing was observed.
    observed: dict | None = None
    # Recipe settings that reached no flag of the command (recipe.optimizer.weight_decay, ...): the script used
    # its own values, so the recorded recipe does not say what it applied for these.
    not_passed: list = field(default_factory=list)
    # The trackers that saw the run live (config tracking): {id, backends: name -> {state (ok, late, failed), why,
    # dropped, undelivered}} (hwsweep.run.tracking.Tracker.status); None: tracking off.
    tracking: dict | None = None

    def curve(self, name: str) -> Curve:
        return Curve.from_dict(self.curves[name], f"curves.{name}")


@dataclass(frozen=True)
class EvalRecord(Typed):
    """eval.json: metrics of a finished run on its held-out data."""

    suite: str
    variant: str
    hardware: str
    seed: int
    evaluator: str  # "builtin" | "command"
    metrics: dict
    eval_seconds: float
    checks: list = field(default_factory=list)
    # The device the built-in evaluator ran on (torch's device type: cuda, cpu); None: a command's evaluation.
    device: str | None = None
    # What the trackers took of these metrics (final/*), as RunRecord.tracking says it; None: tracking off.
    tracking: dict | None = None
    # The built-in evaluator's peak memory per process (the largest over its processes: a sharded run's evaluation
    # runs one per device, hwsweep.run.sharded_eval), what it measured, how many processes, and the training's plan
    # per device beside it; None: a command's evaluation.
    peak_memory_gb: float | None = None
    peak_memory_source: str | None = None
    processes: int | None = None
    planned_memory_gb: float | None = None
    # Each process's {peak_gb, baseline_gb}, as RunRecord.rank_memory; one over the training's plan puts a
    # "memory: ..." line in checks. [] for a command's evaluation.
    rank_memory: list = field(default_factory=list)


def read(cls, path, metrics: list | None = None, data: dict | None = None):
    """A record from its file; a damaged, incomplete or implausible one (a metric not a finite
    number, or outside its declared bounds) raises RecordError naming the file. `data`: the file's JSON, where the
    caller has read it (it is not read again)."""
    try:
        record = cls.from_dict(io.read_json(path) if data is None else data, cls.__name__)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, SpecError, TypeError) as e:
        raise RecordError(f"{path}: {e}") from None
    if getattr(record, "status", "complete") != "complete":
        raise RecordError(f"{path}: status {record.status!r}, not complete")
    for name, value in record.metrics.items():
        if value is None:
            continue  # a value that does not exist, e.g. a milestone never reached: empty in runs.csv
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise RecordError(f"{path}: metric {name} is {value!r}, not a finite number")
    bad = problems(record.metrics, metrics or [])
    if bad:
        raise RecordError(f"{path}: {bad[0]}")
    return record


def run_row(train: RunRecord, evaluation: EvalRecord | None, metric_names: list[str]) -> dict:
    prov = train.provenance
    row = {"suite": train.suite, "variant": train.variant, "hardware": train.hardware, "seed": train.seed}
    row["gpu_type"] = train.spec["hardware"]["gpu_type"]
    row |= {k: train.plan.get(k) for k in PLAN_COLUMNS}
    row["threads_per_process"] = train.plan.get("threads_per_process")
    # What the observer saw beside it (None: not observed, or the ranks ran different counts: the checks say)
    row["observed_threads"] = (train.observed or {}).get("threads_per_process")
    values = train.metrics | (evaluation.metrics if evaluation else {})
    row |= {name: math.nan if values.get(name) is None else values[name] for name in metric_names}
    row |= {k: getattr(train, k) for k in TIMING_COLUMNS}
    parts = train.startup_parts or {}  # a command's startup is not broken down: empty
    row |= {column: parts.get(part) for column, part in zip(STARTUP_COLUMNS, PARTS)}
    # Steady-state throughput and model FLOPs utilisation per device (empty where FLOPs or the peak are unknown).
    row |= {k: getattr(train, k) for k in SPEED_COLUMNS}
    row["eval_seconds"] = evaluation.eval_seconds if evaluation else 0.0
    row["restarts"] = train.restarts
    row["stopped_at_step"] = train.stopped_at_step
    # Planned vs measured memory per device (peak_memory_source: what the peak is).
    row["planned_memory_gb"] = train.planned_memory_gb
    row["peak_memory_gb"] = train.peak_memory_gb
    row["peak_memory_source"] = train.peak_memory_source
    order = train.data_order
    row["data_order"] = f"{order['sampler']}/size{order.get('dataset_size')}/workers{order.get('num_workers')}"
    row["trainer"] = train.trainer
    flags = Trainer.from_dict(train.spec["trainer"]).seeded
    row["seeded"] = flags if train.seeded is None else train.seeded  # False: every seed repeats one run
    row |= {k: prov.get(k) for k in ("torch", "cuda", "nccl", "git_commit", "host")}
    row["script_sha256"] = (prov.get("script") or {}).get("sha256")
    row["devices"] = ";".join(sorted(set(prov.get("devices", []))))
    # Other hwsweep runs on the node while this one trained: its timing measures contention too.
    contention = prov.get("contention") or {}
    row["contended_by"] = contention.get("other_runs")
    row |= {k: contention.get(k) for k in ("load_1m", "cpus_allowed")}
    row["contended"] = host.contended(contention)  # why the timing is not clean ('' when nothing says so)
    row["checks"] = "; ".join(train.checks + (evaluation.checks if evaluation else []))
    return row


def add_curve_points(train: RunRecord, points: dict) -> None:
    """Append the run's logged points to `points` (KEYS, metric, step, value: a list each, one entry a point):
    columns, not a dict per point, so that a sweep of many runs and long curves makes its frame in one go."""
    key = [getattr(train, k) for k in KEYS]
    for name in train.curves:
        curve = train.curve(name)
        n = min(len(curve.steps), len(curve.values))  # zip's length: a point has both
        for column, value in zip(KEYS + ["metric"], key + [name]):
            points[column].extend([value] * n)
        points["step"].extend(curve.steps[:n])
        points["value"].extend(curve.values[:n])


def load(train_paths, eval_paths, metrics: list):
    """runs (one row per run) and curves (one row per run, metric and logged step).
    `eval_paths` is empty when the config has no evaluation stage."""
    import pandas as pd  # here, so the launcher that writes records starts fast

    columns = KEYS + ["metric", "step", "value"]
    runs, points = [], {c: [] for c in columns}
    evals = list(eval_paths) or [None] * len(train_paths)
    for tp, ep in zip(train_paths, evals, strict=True):
        train = read(RunRecord, tp, metrics)
        evaluation = read(EvalRecord, ep, metrics) if ep else None
        runs.append(run_row(train, evaluation, [m.name for m in metrics]))
        add_curve_points(train, points)
    curves = pd.DataFrame(points, columns=columns) if points["step"] else pd.DataFrame([], columns=columns)
    return pd.DataFrame(runs), curves
