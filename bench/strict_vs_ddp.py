"""Step time of strict ordered reduction against standard DDP at world size 2 on CPU,
measured in one run, alternating (goal <= 1.3x).

    .venv/bin/python bench/strict_vs_ddp.py [--repeats 3]
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
from hwsweep.plan.config import resolve

REPO = Path(__file__).resolve().parent.parent
SKIP = 0.1


def spec(level: str, folder: Path) -> Path:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["hardware"] = {"cpu2": {"accelerator": "cpu", "devices_per_node": 2}}
    cfg["baseline"] = "cpu2"
    cfg["seeds"] = [0]
    cfg["recipe"]["reproducibility"] = level
    cfg["suites"] = {"bench": {"overrides": {"model": {"width": 128}, "schedule": {"steps": 150, "warmup_steps": 10}}}}
    d = resolve(cfg).spec("bench", "default", "cpu2", 0).to_dict() | {"run_dir": str(folder)}
    io.write_json(folder / "spec.json", d)
    return folder / "spec.json"


def step_seconds(level: str, folder: Path) -> float:
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "hwsweep.run.train", str(spec(level, folder)),
           "--threads", "2"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    times = json.loads((folder / "train.json").read_text())["step_seconds"]
    return statistics.median(times[int(len(times) * SKIP) :])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            ddp = step_seconds("deterministic", Path(tmp) / f"ddp{i}")
            strict = step_seconds("strict", Path(tmp) / f"strict{i}")
            ratios.append(strict / ddp)
            print(f"repeat {i}: strict {strict * 1e3:.1f} ms/step, DDP {ddp * 1e3:.1f} ms/step, ratio {strict / ddp:.2f}")
    print(f"strict / standard DDP step time at N=2: median {statistics.median(ratios):.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
