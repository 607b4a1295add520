"""What FSDP keeps of reproducibility (not a speed benchmark): the built-in trainer under torchrun, FSDP twice
at world size 2, DDP at 2, FSDP at 4 and DDP at 1, same seed, `deterministic`; prints for each pair the
largest relative difference of the per-step losses and the largest absolute difference of the final weights.

    .venv/bin/python bench/fsdp_repro.py [--steps 30] [--width 64 --depth 4]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hwsweep.contracts import io  # noqa: E402
from hwsweep.contracts.spec import FINAL_CHECKPOINT, TRAIN_RECORD  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402


def config(args, strategy: str, devices: int) -> dict:
    return {
        "recipe": {"task": {"length": 8, "vocab_size": 16, "train_size": 4000, "eval_size": 500},
                   "model": {"width": args.width, "depth": args.depth, "heads": 2},
                   "schedule": {"steps": args.steps, "warmup_steps": 5}, "global_batch": 32, "micro_batch": 8,
                   "reproducibility": "deterministic", "parallel": {"strategy": strategy}},
        "suites": {"repro": {}}, "seeds": [0], "baseline": "gpus",
        "hardware": {"gpus": {"accelerator": "cpu", "devices_per_node": devices}},
    }  # fmt: skip


def train(args, folder: Path, name: str, strategy: str, devices: int):
    import torch

    spec = resolve(config(args, strategy, devices)).spec("repro", "default", "gpus", 0).to_dict()
    spec["run_dir"] = str(folder / name)
    io.write_json(folder / f"{name}.json", spec)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(devices),
           "-m", "hwsweep.run.train", str(folder / f"{name}.json")]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=1800)
    losses = json.loads((folder / name / TRAIN_RECORD).read_text())["curves"]["loss"]["values"]
    return losses, torch.load(folder / name / FINAL_CHECKPOINT, weights_only=False)["model"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = {name: train(args, folder, name, s, n) for name, s, n in
                [("fsdp2", "fsdp", 2), ("fsdp2-again", "fsdp", 2), ("ddp2", "ddp", 2), ("fsdp4", "fsdp", 4),
                 ("ddp1", "ddp", 1)]}  # fmt: skip
    print(f"{'pair':<26} {'loss max rel diff':>18} {'weights max abs diff':>21}")
    for a, b in [("fsdp2", "fsdp2-again"), ("fsdp2", "ddp2"), ("fsdp2", "fsdp4"), ("ddp2", "ddp1"), ("fsdp4", "ddp1")]:
        (la, pa), (lb, pb) = runs[a], runs[b]
        loss = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
        weights = max((pa[k] - pb[k]).abs().max().item() for k in pb)
        print(f"{a + ' vs ' + b:<26} {loss:>18.2e} {weights:>21.2e}")


if __name__ == "__main__":
    main()
