"""Where one tracked run lives in each tracker: its id, names and folders, its plan as params and its identity as
tags (a run's, or a suite's tables')."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hwsweep.contracts.spec import RUN_DIR
from hwsweep.contracts.tracking import aggregate_id, run_id


@dataclass
class Target:
    """Where one tracked run lives in each tracker."""

    run_id: str
    experiment: str  # MLflow experiment: the suite
    name: str  # the run's name: variant/hardware/seedN
    group: str  # W&B group: suite/variant
    job_type: str  # W&B job type: the hardware
    folder: Path  # TensorBoard event files and W&B's offline runs go under it
    results: Path  # results/: the default MLflow store is results/mlruns
    start_step: int = 0  # a resumed run continues after this step
    params: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)
    gpu: int | str | None = None  # the run's GPU: NVML's index, or its UUID; None: no GPU metrics


def _flat(value, prefix: str, out: dict) -> dict:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = ",".join(map(str, value))
    else:
        out[prefix] = value
    return out


def _results(folder: Path, layout: str) -> Path:
    """results/ above a folder laid out as `layout` (the folder itself when it is not so deep)."""
    depth = layout.count("/")
    return folder.parents[depth - 1] if len(folder.parents) >= depth else folder


def visible_gpu() -> int | str:
    """The first GPU this process may use, as NVML names it, without torch (the runner of a command): the first
    entry of CUDA_VISIBLE_DEVICES (SLURM binds a job's GPUs so), an index or a UUID; 0 where it is unset."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else (first or 0)


def run_target(spec, run_dir, start_step: int = 0, gpu: int | str | None = None) -> Target:
    """The tracked run of `spec`: its plan as params (recipe, batch plan, sweep values) and its identity as tags."""
    folder = Path(run_dir).resolve()
    tags = {"suite": spec.suite, "variant": spec.variant, "hardware": spec.hardware_name, "seed": str(spec.seed),
            "gpu_type": spec.hardware.gpu_type}  # fmt: skip
    params = dict(tags) | _flat(spec.recipe.to_dict(), "recipe", {}) | _flat(spec.plan.__dict__, "plan", {})
    params |= {f"sweep.{k}": v for k, v in spec.sweep_values.items()}
    return Target(
        run_id=run_id(spec.suite, spec.variant, spec.hardware_name, spec.seed), experiment=spec.suite,
        name=f"{spec.variant}/{spec.hardware_name}/seed{spec.seed}", group=f"{spec.suite}/{spec.variant}",
        job_type=spec.hardware_name, folder=folder, results=_results(folder, RUN_DIR), start_step=start_step,
        params={k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in params.items()},
        tags=tags, gpu=gpu,
    )  # fmt: skip


def aggregate_target(suite: str, suite_dir) -> Target:
    """A suite's tables: one tracked 'run' per suite, beside its runs."""
    folder = Path(suite_dir).resolve()
    return Target(run_id=aggregate_id(suite), experiment=suite, name=f"{suite} tables", group=suite,
                  job_type="aggregate", folder=folder, results=_results(folder, "results/{suite}"), tags={"suite": suite, "kind": "aggregate"})  # fmt: skip
