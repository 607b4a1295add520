"""What feeding a tracker costs a training step: the built-in trainer on the local default recipe
(config/config.yaml, suite width at width 64, cpu1) with tracking off and with one tracker on, each backend in
its local/offline mode (TensorBoard event files, MLflow's file store, W&B offline), at the default logging
interval (recipe.log_every). Off and on runs alternate, each a fresh process; the figure per backend is the
median over repeats of (mean steady-state step time on) / (mean steady-state step time off), the first 10% of
steps left out as the trainer does (issue 22's goal: at most 1.01).

    .venv/bin/python bench/tracking_overhead.py                 # all three, 2 repeats, 200 steps
    .venv/bin/python bench/tracking_overhead.py --backends mlflow --repeats 3 --steps 400
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from hwsweep.contracts import io
from hwsweep.contracts.tracking import BACKENDS
from hwsweep.plan.config import resolve

REPO = Path(__file__).resolve().parent.parent
SKIP = 0.1  # the trainer's steady-state rule


def run(folder: Path, backend: str | None, steps: int) -> float:
    """One fresh training process; its mean steady-state step time in seconds."""
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["recipe"]["schedule"]["steps"] = steps
    cfg["seeds"] = [0]
    if backend:
        cfg["tracking"] = {"backends": [backend], "wandb": {"project": "hwsweep-bench", "mode": "offline"}}
    spec = resolve(cfg, config_dir=REPO / "config").spec("width", "width-64", "cpu1", 0)
    run_dir = folder / (backend or "off") / "results/width/width-64/cpu1/seed0"
    path = folder / f"{backend or 'off'}.json"
    io.write_json(path, spec.to_dict() | {"run_dir": str(run_dir)})
    env = os.environ | {"OMP_NUM_THREADS": "1", "MLFLOW_ALLOW_FILE_STORE": "true"}
    subprocess.run([sys.executable, "-m", "hwsweep.run.train", str(path)], env=env, check=True, capture_output=True)
    seconds = json.loads((run_dir / "train.json").read_text())["step_seconds"]
    steady = seconds[int(len(seconds) * SKIP) :]
    return sum(steady) / len(steady)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    print(f"local default recipe, {args.steps} steps, cpu1, log_every default; off/on alternate, {args.repeats} repeats")
    for backend in args.backends:
        ratios = []
        for i in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                off = run(Path(tmp), None, args.steps)
                on = run(Path(tmp), backend, args.steps)
            ratios.append(on / off)
            print(f"  {backend} repeat {i + 1}: step {on * 1e3:.2f} ms on / {off * 1e3:.2f} ms off = {on / off:.4f}", flush=True)
        print(f"{backend}: on/off step time, median of {args.repeats}: {statistics.median(ratios):.4f}", flush=True)


if __name__ == "__main__":
    main()
