"""What a sweep will cost before it runs: per run, cell, suite and in total, the wall clock, the
device-hours and the money (`hwsweep plan --estimate`).

    seconds per step = FLOPs per step / (world_size x peak FLOP/s per device x MFU)
    wall clock of a run = job start + startup + steps x seconds per step;  device-hours = wall clock x world_size

The job start (snakemake reading the workflow in the job, the launcher, torchrun) is not measured by
the trainer: estimate.job_start_seconds is assumed for every run, measured or not.

FLOPs per step are counted by torch's FLOP counter over one micro-batch forward + backward of the
real model on the meta device (shapes only: no memory and no arithmetic, so GPU-sized models count
in a moment), times the micro-batches of one optimizer step on all devices; each count is kept for the
next process (hwsweep.plan.counted). Peak FLOP/s per device
type and arithmetic come from the catalog. The MFU, in order of preference:

    measured      earlier runs of this suite, variant and hardware (their train.json, same model,
                  task and batch plan): their own seconds per step and startup, no model needed
    measured_mfu  the median MFU (and startup) of the measured runs of the same device type and arithmetic
    assumed_mfu   hardware.<name>.mfu, else estimate.mfu.<gpu_type>, else the catalog's mfu; startup
                  estimate.startup_seconds
    unknown       no FLOP count (a user's script) or no peak for the device: no estimate

A cell's, suite's and the total's wall clock is the sum of their runs': the runs one after another
(timing: exclusive runs timed jobs one at a time).

Evaluation (eval_seconds, in the wall clock and, on one device, in the device-hours) runs on the
device type that trained at the same MFU, in fp32 (the built-in evaluator's arithmetic): the forward FLOPs of one held-out prediction (the model's
`predict`, counted on meta; else a third of a training step's FLOPs) times the samples predicted,
i.e. every view voted (task.voted_views) of the held-out set, the unseen puzzles' split, and the original
view of the periodic evaluations (eval_subset every eval_every steps).
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hwsweep.contracts import catalog, io
from hwsweep.contracts.catalog import device_peak
from hwsweep.contracts.spec import TRAIN_RECORD, RunSpec
from hwsweep.models.families import model_and_batch
from hwsweep.plan import counted
from hwsweep.plan.matrix import Run

RUN_COLUMNS = [
    "level", "suite", "variant", "hardware", "seed", "gpu_type", "world_size", "precision", "steps",
    "flops_per_step", "peak_tflops", "mfu", "source", "seconds_per_step", "startup_seconds", "eval_seconds",
    "wall_hours", "device_hours", "cost", "currency",
]  # fmt: skip
VS_ACTUAL_COLUMNS = [
    "suite", "variant", "hardware", "seed", "source", "estimated_seconds", "actual_seconds", "ratio",
]  # fmt: skip


@dataclass(frozen=True)
class Measured:
    """One finished run as the estimator uses it."""

    seconds_per_step: float
    startup_seconds: float
    mfu: float | None  # None where its FLOPs or its device's peak are not known
    kind: tuple  # (gpu_type, arithmetic): whose MFU this is


@lru_cache(maxsize=256)
def _micro_batch_flops(task_cfg, model_cfg, micro_batch: int) -> int:
    return counted.flops("train_step", task_cfg, model_cfg, micro_batch,
                         lambda: _count_micro_batch(task_cfg, model_cfg, micro_batch))  # fmt: skip


def _count_micro_batch(task_cfg, model_cfg, micro_batch: int) -> int:
    from hwsweep.models import flops

    try:
        return flops.train_step_flops(*model_and_batch(task_cfg, model_cfg, micro_batch))
    except RuntimeError:
        # A model whose control flow reads values (HRM's ACT stops when every sample halted) cannot
        # run on meta: count one real sample on the CPU; every counted operation is linear in the batch.
        return micro_batch * flops.train_step_flops(*model_and_batch(task_cfg, model_cfg, 1, device="cpu"))


@lru_cache(maxsize=256)
def _predict_flops(task_cfg, model_cfg) -> int:
    """Forward FLOPs of predicting one held-out sample (every segment HRM runs at evaluation)."""
    return counted.flops("predict", task_cfg, model_cfg, 1, lambda: _count_predict(task_cfg, model_cfg))


def _count_predict(task_cfg, model_cfg) -> int:
    import torch

    from hwsweep.models import flops

    model, batch = model_and_batch(task_cfg, model_cfg, 1)
    if not hasattr(model, "predict"):
        return _micro_batch_flops(task_cfg, model_cfg, 1) // 3  # forward: a third of forward + backward
    with flops.counting() as counter, flops.FusedAttentionOnMeta(), torch.no_grad():
        model.predict(batch[0], batch[-1])
    return counter.total


def eval_samples(recipe, steps: int) -> int:
    """Samples the evaluator predicts in a run: every view voted of the held-out set, the unseen puzzles' split (one
    view), and the periodic evaluations (the original view)."""
    task = recipe.task
    views = getattr(task, "voted_views", 1)
    unseen = task.eval_size if getattr(task, "unseen_puzzles", 0) else 0
    periodic = steps // recipe.eval_every if recipe.eval_every else 0
    return views * task.eval_size + unseen + periodic * min(recipe.eval_subset, task.eval_size)


def eval_flops(recipe, steps: int) -> int | None:
    if recipe.model is None or recipe.task is None:
        return None
    return _predict_flops(recipe.task, recipe.model) * eval_samples(recipe, steps)


def eval_peak(spec) -> float | None:
    """Peak FLOP/s of the device that evaluates: the training device's type in fp32 (the built-in
    evaluator's arithmetic; TF32 as the recipe sets it), one device."""
    import dataclasses

    return device_peak(spec.hardware, dataclasses.replace(spec.plan, precision="fp32"))


def eval_job_seconds(spec, settings: dict) -> float | None:
    """The evaluate job's seconds (the final evaluation; the periodic ones run inside training) at the
    hardware's assumed MFU; None where the FLOPs, the peak or the MFU are not known."""
    evaluation, peak, mfu = eval_flops(spec.recipe, 0), eval_peak(spec), assumed_mfu(spec.hardware, settings)
    return evaluation / (peak * mfu) if evaluation is not None and peak and mfu else None


def step_flops(recipe, plan) -> int | None:
    """Training FLOPs of one optimizer step on all devices; None for a user's script (no model known)."""
    if recipe.model is None or recipe.task is None:
        return None
    return _micro_batch_flops(recipe.task, recipe.model, plan.micro_batch) * plan.accumulation * plan.world_size


def assumed_mfu(hardware, settings: dict) -> float | None:
    if hardware.mfu is not None:
        return hardware.mfu
    if hardware.gpu_type in settings.get("mfu", {}):
        return settings["mfu"][hardware.gpu_type]
    kind = hardware.device_type
    return None if kind is None else kind.mfu


def _kind(spec) -> tuple:
    return spec.hardware.gpu_type, catalog.arithmetic(spec.plan.precision, spec.plan.tf32)


def _same_run(record: dict, spec) -> bool:
    """The record ran this model, task and batch layout (its step count may differ)."""
    plan, mine = record.get("plan", {}), spec.plan
    recipe = record.get("spec", {}).get("recipe", {})
    layout = ("gpu_type", "world_size", "global_batch", "micro_batch", "accumulation", "precision", "tf32")
    return (
        all(plan.get(k) == getattr(mine, k) for k in layout)
        and recipe.get("model") == (spec.recipe.model and spec.recipe.model.__dict__)
        and recipe.get("task") == (spec.recipe.task and spec.recipe.task.__dict__)
    )


def step_timing(record: dict) -> tuple[float, float] | None:
    """(seconds per step, startup seconds of one start) a finished run's train.json says; None if not usable."""
    try:
        resumed = int(record.get("resumed_from_step") or 0)
        steps = len(record.get("step_seconds") or []) or int(record["plan"]["steps"]) - resumed
        per_step = float(record["train_seconds"]) / steps
        # unknown (None): a command that printed no step, whose train_seconds holds its startup
        startup = float(record["startup_seconds"] or 0.0) / max(1, len(record.get("segments") or []))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return (per_step, startup) if per_step > 0 and startup >= 0 else None


def measure(record: dict, spec) -> Measured | None:
    """What a finished run's train.json says about speed; None if it is not usable."""
    timing = step_timing(record)
    if timing is None:
        return None
    per_step, startup = timing
    flops = step_flops(spec.recipe, spec.plan)
    peak = device_peak(spec.hardware, spec.plan, record["plan"].get("threads_per_process"))
    mfu = flops / (per_step * spec.plan.world_size * peak) if flops and peak else None
    return Measured(per_step, startup, mfu, _kind(spec))


def run_specs(matrix) -> list:
    return [matrix.spec(r.suite, r.variant, r.hardware, r.seed) for r in matrix.runs()]


def run_records(specs, root: Path = Path(".")) -> list[tuple]:
    """(spec, train.json as a dict) for every run whose record exists under `root` and reads."""
    out = []
    for spec in specs:
        try:
            out.append((spec, io.read_json(Path(root) / spec.run_dir / TRAIN_RECORD)))
        except (OSError, ValueError):
            continue  # not run yet, or damaged: it measures nothing (status names a damaged one)
    return out


def measurements(pairs) -> dict:
    """Run -> Measured for each (spec, record) whose record is complete and ran the spec's model, task
    and batch layout (a record of an earlier config with another model measures nothing)."""
    out = {}
    for spec, record in pairs:
        if record.get("status") == "complete" and _same_run(record, spec):
            found = measure(record, spec)
            if found is not None:
                out[Run(spec.suite, spec.variant, spec.hardware_name, spec.seed)] = found
    return out


class Measurements:
    """The measured runs (Run -> Measured) as estimate_run reads them: per cell (suite x variant x hardware) the sums of
    their seconds, per device kind their MFUs and startups in order, made once, so each run's estimate, one run left
    out or none, costs the same at 10 runs as at 10,000 (a scan of every run per run grew with the square)."""

    def __init__(self, measured: dict):
        self.measured = measured
        self.cells: dict[tuple, list] = {}
        self.kinds: dict[tuple, tuple[list, list]] = {}
        for run, m in measured.items():
            cell = self.cells.setdefault((run.suite, run.variant, run.hardware), [[], []])
            cell[0].append(m.seconds_per_step)
            cell[1].append(m.startup_seconds)
            if m.mfu is not None:
                mfus, startups = self.kinds.setdefault(m.kind, ([], []))
                mfus.append(m.mfu)
                startups.append(m.startup_seconds)
        self.cells = {k: (math.fsum(a), math.fsum(b), len(a)) for k, (a, b) in self.cells.items()}
        for mfus, startups in self.kinds.values():
            mfus.sort()
            startups.sort()

    def cell_means(self, cell: tuple, exclude=None) -> tuple[float, float] | None:
        """The mean seconds per step and startup seconds of the cell's runs (without `exclude`); None if none."""
        per_step, startup, n = self.cells.get(cell, (0.0, 0.0, 0))
        left = self.measured.get(exclude) if exclude is not None else None
        if left is not None and (exclude.suite, exclude.variant, exclude.hardware) == cell:
            per_step, startup, n = per_step - left.seconds_per_step, startup - left.startup_seconds, n - 1
        return (per_step / n, startup / n) if n else None

    def kind_medians(self, kind: tuple, exclude=None) -> tuple[float, float] | None:
        """The median MFU and startup seconds of the device kind's runs with an MFU (without `exclude`); None if
        none."""
        mfus, startups = self.kinds.get(kind, ([], []))
        left = self.measured.get(exclude) if exclude is not None else None
        if left is not None and left.kind == kind and left.mfu is not None:
            if len(mfus) == 1:
                return None
            return _median_without(mfus, left.mfu), _median_without(startups, left.startup_seconds)
        return (statistics.median(mfus), statistics.median(startups)) if mfus else None


def _median_without(ordered: list, value: float) -> float | None:
    """The median of `ordered` (sorted, two items or more) with one item equal to `value` taken out."""
    skip, n = bisect.bisect_left(ordered, value), len(ordered) - 1

    def at(k):
        return ordered[k if k < skip else k + 1]

    return (at((n - 1) // 2) + at(n // 2)) / 2


def measured_cells(specs, root: Path = Path(".")) -> list[str]:
    """One line per cell (suite x variant x hardware) with finished runs of its current plan under `root`: their
    mean seconds per step and median MFU, as `hwsweep plan` prints them."""
    cells: dict[tuple, list[Measured]] = {}
    for run, m in measurements(run_records(specs, root)).items():
        cells.setdefault((run.suite, run.variant, run.hardware), []).append(m)
    lines = []
    for (suite, variant, hardware), found in cells.items():
        mfus = [m.mfu for m in found if m.mfu is not None]
        mfu = f"MFU {statistics.median(mfus):.3g}" if mfus else "MFU not known (no FLOP count or peak)"
        per_step = statistics.fmean(m.seconds_per_step for m in found)
        lines.append(f"{suite}/{variant}/{hardware}: {per_step:.4g} s/step, {mfu} ({len(found)} run(s))")
    return lines


def job_start(settings: dict) -> float:
    """Seconds a train job takes before its trainer starts (estimate.job_start_seconds)."""
    return settings.get("job_start_seconds", 15.0)


def estimate_run(spec, settings: dict, measured: Measurements, exclude=None) -> dict:
    """One run's estimate from the runs measured so far (leaving out `exclude`, for estimated vs actual)."""
    kind = _kind(spec)
    same = measured.cell_means((spec.suite, spec.variant, spec.hardware_name), exclude)
    typed = measured.kind_medians(kind, exclude)
    flops, peak = step_flops(spec.recipe, spec.plan), device_peak(spec.hardware, spec.plan)
    startup, mfu = settings.get("startup_seconds", 10.0), None
    if same:
        source = "measured"
        per_step, startup = same
        mfu = flops / (per_step * spec.plan.world_size * peak) if flops and peak else None
    elif flops and peak and (typed or assumed_mfu(spec.hardware, settings)):
        source = "measured_mfu" if typed else "assumed_mfu"
        mfu, startup = typed if typed else (assumed_mfu(spec.hardware, settings), startup)
        per_step = flops / (spec.plan.world_size * peak * mfu)
    else:
        source, per_step = "unknown", None
    startup += job_start(settings)
    train = None if per_step is None else startup + spec.plan.steps * per_step
    evaluation = eval_flops(spec.recipe, spec.plan.steps)
    fp32_peak = eval_peak(spec)
    eval_seconds = evaluation / (fp32_peak * mfu) if evaluation is not None and fp32_peak and mfu else None
    wall = None if train is None else train + (eval_seconds or 0.0)
    device_hours = None if train is None else (train * spec.plan.world_size + (eval_seconds or 0.0)) / 3600
    price = catalog.price_per_hour(spec.hardware.gpu_type, spec.hardware.price_per_hour)
    return {
        "level": "run", "suite": spec.suite, "variant": spec.variant, "hardware": spec.hardware_name,
        "seed": spec.seed, "gpu_type": spec.hardware.gpu_type, "world_size": spec.plan.world_size,
        "precision": spec.plan.precision, "steps": spec.plan.steps, "flops_per_step": flops,
        "peak_tflops": None if peak is None else peak / 1e12, "mfu": mfu, "source": source,
        "seconds_per_step": per_step, "startup_seconds": None if wall is None else startup,
        "eval_seconds": eval_seconds,
        "wall_hours": None if wall is None else wall / 3600, "device_hours": device_hours,
        "cost": None if device_hours is None or price is None else device_hours * price,
        "currency": catalog.CURRENCY,
    }  # fmt: skip


def _total(level: str, rows: list[dict], **keys) -> dict:
    """Sums over runs; a sum is left empty when any of its runs has no estimate (never a partial sum)."""

    def add(column):
        values = [r[column] for r in rows]
        return None if any(v is None for v in values) else sum(values)

    out = dict.fromkeys(RUN_COLUMNS) | keys | {"level": level, "currency": catalog.CURRENCY}
    out |= {c: add(c) for c in ("wall_hours", "device_hours", "cost")}
    out["source"] = "+".join(sorted({r["source"] for r in rows}))
    return out


def estimate_rows(specs, settings: dict, root: Path = Path(".")) -> list[dict]:
    """Every run (resolved RunSpecs), then per cell (suite x variant), per suite and the total; runs measured
    under `root` (their train.json) are preferred to the model."""
    measured = Measurements(measurements(run_records(specs, root)))
    runs = [estimate_run(spec, settings, measured) for spec in specs]
    rows = list(runs)
    for suite, variant in dict.fromkeys((r["suite"], r["variant"]) for r in runs):
        mine = [r for r in runs if (r["suite"], r["variant"]) == (suite, variant)]
        rows.append(_total("cell", mine, suite=suite, variant=variant))
    for suite in dict.fromkeys(r["suite"] for r in runs):
        rows.append(_total("suite", [r for r in runs if r["suite"] == suite], suite=suite))
    rows.append(_total("total", runs))
    return rows


def write_estimate(spec_dicts: list, settings: dict, path, root: Path = Path(".")) -> None:
    """results/estimate.tsv for a job given the specs the main process resolved (RunSpec.to_dict() each)."""
    from hwsweep.plan.table import format_table

    specs = [RunSpec.from_dict(d, f"specs[{i}]") for i, d in enumerate(spec_dicts)]
    io.write_text(path, format_table(estimate_rows(specs, settings, root), sep="\t", columns=RUN_COLUMNS))


def estimate_vs_actual(pairs, settings: dict) -> list[dict]:
    """For every measured run among (spec, record) pairs: what the estimator says without that run (other
    seeds, else the device type's measured MFU, else the assumption) against its recorded startup and
    training seconds."""
    specs = {Run(s.suite, s.variant, s.hardware_name, s.seed): s for s, _ in pairs}
    measured = measurements(pairs)
    index = Measurements(measured)
    out = []
    for run, actual in measured.items():
        spec = specs[run]
        est = estimate_run(spec, settings, index, exclude=run)
        # The record has no job start either: the same assumption on both sides.
        seconds = job_start(settings) + actual.startup_seconds + spec.plan.steps * actual.seconds_per_step
        guess = None if est["wall_hours"] is None else est["wall_hours"] * 3600
        out.append({"suite": run.suite, "variant": run.variant, "hardware": run.hardware, "seed": run.seed,
                    "source": est["source"], "estimated_seconds": guess, "actual_seconds": seconds,
                    "ratio": None if guess is None else guess / seconds})  # fmt: skip
    return out


def write_estimate_vs_actual(train_records: list, settings: dict, path) -> list[dict]:
    """One suite's train.json files -> estimate_vs_actual.csv (VS_ACTUAL_COLUMNS), each run against the spec
    it ran (the record's own), so the table needs nothing but the records and the estimate settings."""
    import pandas as pd

    pairs = []
    for file in train_records:
        record = io.read_json(file)
        pairs.append((RunSpec.from_dict(record["spec"], f"{file}: spec"), record))
    rows = estimate_vs_actual(pairs, settings)
    io.write_csv(pd.DataFrame(rows, columns=VS_ACTUAL_COLUMNS), path)
    return rows
