"""A finished sweep of any size without training: the records the built-in trainer and evaluator would leave (spec.json,
train.json with a loss curve per step, eval.json, a final checkpoint), for bench/scale.py. The runs pass the project's
own validation (hwsweep.analysis.validation: done), so `snakemake -n all` has no run to redo; the suites' tables are
made by the workflow itself afterwards.

The sweep keeps its cells fixed (2 suites x 5 variants x 2 hardware) and grows by seeds, so what grows with it is the
run count alone: 100 runs are 5 seeds, 10,000 are 500.

    .venv/bin/python bench/synthetic_sweep.py FOLDER --runs 1000 [--steps 100]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
from pathlib import Path

import yaml

from hwsweep.contracts.command import as_passed
from hwsweep.contracts.records import EvalRecord, RunRecord
from hwsweep.contracts.spec import EVAL_RECORD, FINAL_CHECKPOINT, SPEC_FILE, TRAIN_RECORD, canonical_json
from hwsweep.plan.config import resolve

REPO = Path(__file__).resolve().parent.parent
SUITES = {
    "width": {"sweep": {"model.width": [32, 48, 64, 96, 128]}},
    "depth": {"sweep": {"model.depth": [1, 2, 3, 4, 5]}},
}
CELLS = sum(len(next(iter(s["sweep"].values()))) for s in SUITES.values()) * 2  # x 2 hardware


def config(runs: int, steps: int) -> dict:
    """The default config (config/config.yaml) with SUITES, two CPU hardware entries and runs / CELLS seeds."""
    if runs % CELLS:
        raise SystemExit(f"--runs must be a multiple of {CELLS} (the cells of the sweep)")
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["suites"] = copy.deepcopy(SUITES)
    cfg["seeds"] = list(range(runs // CELLS))
    cfg["recipe"]["schedule"] = {"steps": steps, "warmup_steps": max(1, steps // 10)}
    return cfg


def loss_curve(rng: random.Random, steps: int, scale: float) -> list[float]:
    """A training loss as runs show it: fast fall from log(vocab), then a slow tail, with step-to-step noise."""
    start, floor = math.log(32), 0.05 + 0.1 * scale
    return [round(floor + (start - floor) * math.exp(-5 * s / steps) * (1 + 0.05 * rng.gauss(0, 1)), 6)
            for s in range(1, steps + 1)]  # fmt: skip


def records(spec, rng: random.Random) -> tuple[RunRecord, EvalRecord]:
    """train.json and eval.json of one run, as the built-in trainer and evaluator write them."""
    plan, spec_dict = as_passed(spec)
    steps = spec.plan.steps
    scale = 64 / (spec.recipe.model.width * spec.recipe.model.depth / 2)
    values = loss_curve(rng, steps, scale)
    devices = spec.plan.world_size
    seconds = steps * 0.02 / devices * (1 + 0.03 * rng.gauss(0, 1))
    accuracy = min(0.999, max(0.0, 0.97 - 0.05 * scale + 0.004 * rng.gauss(0, 1)))
    train = RunRecord(
        status="complete", suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
        trainer="builtin", spec=json.loads(json.dumps(spec_dict)), plan=plan | {"threads_per_process": 1},
        metrics={"final_loss": values[-1]}, curves={"loss": {"steps": list(range(1, steps + 1)), "values": values}},
        train_seconds=seconds, startup_seconds=1.5, wall_seconds=seconds + 2.0,
        samples_per_second=spec.plan.global_batch * steps / seconds,
        data_order={"sampler": "global-order", "dataset_size": 20000, "num_workers": 0},
        segments=[{"start_step": 0, "startup_seconds": 1.5}], restarts=0, resumed_from_step=None,
        provenance={"torch": "2.5.1", "host": "synthetic", "git_commit": "synthetic", "devices": ["cpu"] * devices},
        checkpoint=FINAL_CHECKPOINT, seeded=True,
    )  # fmt: skip
    evaluation = EvalRecord(
        suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed, evaluator="builtin",
        metrics={"token_accuracy": accuracy, "exact_accuracy": accuracy**12}, eval_seconds=0.5, device="cpu",
    )  # fmt: skip
    return train, evaluation


def write(folder: Path, runs: int, steps: int = 100, seed: int = 0) -> dict:
    """The sweep's config (folder/config.yaml) and every run's files under folder/results; returns the config."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = config(runs, steps)
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    matrix = resolve(cfg, config_dir=folder)
    rng = random.Random(seed)
    for run in matrix.runs():
        spec = matrix.spec(run.suite, run.variant, run.hardware, run.seed)
        train, evaluation = records(spec, rng)
        run_dir = folder / spec.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        # Plain writes, in the records' own format (hwsweep.contracts.io.write_json's): 40,000 fsyncs would time the
        # disk, not the workflow.
        (run_dir / SPEC_FILE).write_text(canonical_json(spec))
        (run_dir / TRAIN_RECORD).write_text(json.dumps(train.to_dict(), indent=1, sort_keys=True) + "\n")
        (run_dir / EVAL_RECORD).write_text(json.dumps(evaluation.to_dict(), indent=1, sort_keys=True) + "\n")
        (run_dir / FINAL_CHECKPOINT).write_bytes(b"synthetic")  # what the built-in evaluator would read
    return cfg


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    write(args.folder, args.runs, args.steps)
    print(f"{args.runs} finished runs in {args.folder}")


if __name__ == "__main__":
    main()
