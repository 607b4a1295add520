"""Throughput of hwsweep.train against a bare hand-written torch loop (same model, same
batches, world size 1), measured in one run, alternating, as a ratio (goal >= 0.97).

    .venv/bin/python bench/trainer_vs_bare_loop.py [--repeats 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

from hwsweep import data, families, io
from hwsweep.config import resolve
from hwsweep.train import lr_factor

REPO = Path(__file__).resolve().parent.parent
SKIP = 0.1  # the trainer's steady-state rule: leave the first 10% of steps out


def spec_for_bench():
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["hardware"] = {"cpu1": {"accelerator": "cpu", "devices_per_node": 1}}
    cfg["baseline"] = "cpu1"
    cfg["seeds"] = [0]
    cfg["suites"] = {"bench": {"overrides": {"model": {"width": 128}, "schedule": {"steps": 200, "warmup_steps": 20}}}}
    return resolve(cfg).spec("bench", "default", "cpu1", 0)


def bare_loop(spec) -> float:
    """The loop a user would write by hand: no DDP, no records, no checkpoints."""
    torch.set_num_threads(1)
    torch.manual_seed(spec.seed)
    r = spec.recipe
    fam = families.torch_side(r.model.name)
    (x, y), _ = fam.tables(r)
    order = data.GlobalOrder(r.task.train_size, r.global_batch, spec.seed)
    model = fam.build(r)
    opt = torch.optim.AdamW(model.parameters(), lr=r.optimizer.lr, betas=(r.optimizer.beta1, r.optimizer.beta2),
                            weight_decay=r.optimizer.weight_decay)  # fmt: skip
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, r.schedule))
    times = []
    for step in range(r.schedule.steps):
        t0 = time.perf_counter()
        for idx in order.batch(step).split(r.micro_batch):
            loss = model(x[idx], y[idx]) / spec.plan.accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r.optimizer.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        loss.item()
        times.append(time.perf_counter() - t0)
    steady = times[int(len(times) * SKIP) :]
    return r.global_batch * len(steady) / sum(steady)


def hwsweep_trainer(spec, folder: Path) -> float:
    d = spec.to_dict() | {"run_dir": str(folder)}
    io.write_json(folder / "spec.json", d)
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "1", "-m", "hwsweep.train", str(folder / "spec.json")]
    subprocess.run(cmd, check=True, capture_output=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    return json.loads((folder / "train.json").read_text())["samples_per_second"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spec = spec_for_bench()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            bare = bare_loop(spec)
            ours = hwsweep_trainer(spec, Path(tmp) / f"r{i}")
            ratios.append(ours / bare)
            print(f"repeat {i}: hwsweep {ours:.0f} samples/s, bare loop {bare:.0f} samples/s, ratio {ours / bare:.3f}")
    print(f"trainer / bare loop throughput ratio: median {statistics.median(ratios):.3f} (goal >= 0.97)")


if __name__ == "__main__":
    main()
