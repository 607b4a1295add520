"""Throughput of hwsweep.run.train against a bare hand-written torch loop: same model, same batches, same
precision, world size 1, steady-state samples/s (the first 10% of steps left out on both sides). Trainer
and bare runs alternate; the figure is the median of the per-repeat ratios (goal >= 0.97, issue 12).

    .venv/bin/python bench/trainer_vs_bare_loop.py                          # CPU: scaled sizes, fp32, eager
    .venv/bin/python bench/trainer_vs_bare_loop.py --device cuda --compile  # GPU: issue 12's sizes, precisions

The bare loop runs in a fresh process too (this script with --bare), so neither side inherits the other's
allocator, caches or compiled graphs. It is what a user would write for speed: the data table on the device,
indexed with the same global order, no DDP, no records, no checkpoints, the loss read once per step
(`.item()`, which also waits for the device), the recipe's AdamW kernel (fused on CUDA). With --compile each
configuration is measured a second time with the trainer at recipe.compile: true against a torch.compile'd
bare loop. Run here on a CPU, eager and compiled; --device cuda is written for an H100 but not yet run.

Sizes (issue 12): tiny = the default recipe at width 64; medium = width 512, depth 6, length 64, global
batch 512; large = width 1024, depth 12, length 128, global batch 512. On CUDA: fp32 for tiny and medium,
bf16-mixed + TF32 for medium and large. On a CPU (2 cores here) the medium and large global batches and
every step count are scaled down so each size runs in minutes: the script prints what it scaled.
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

from hwsweep.contracts import io
from hwsweep.contracts.spec import RunSpec
from hwsweep.models import families
from hwsweep.plan.config import resolve
from hwsweep.run import data
from hwsweep.run import device as devices
from hwsweep.run.train import lr_factor

REPO = Path(__file__).resolve().parent.parent
SKIP = 0.1  # the trainer's steady-state rule: leave the first 10% of steps out

# name: (model and task, global batch, steps) as issue 12 measured them on an H100, and as scaled on a CPU.
SIZES = {
    "tiny": ({"width": 64, "depth": 2, "length": 12}, {"cuda": (128, 300), "cpu": (128, 150)}),
    "medium": ({"width": 512, "depth": 6, "length": 64}, {"cuda": (512, 100), "cpu": (8, 20)}),
    "large": ({"width": 1024, "depth": 12, "length": 128}, {"cuda": (512, 60), "cpu": (1, 10)}),
}
PRECISIONS = {"tiny": ["fp32"], "medium": ["fp32", "bf16-mixed"], "large": ["bf16-mixed"]}


def spec_for(size: str, precision: str, compiled: bool, device: str, gpu_type: str, steps: int | None = None,
             hardware: dict | None = None):  # fmt: skip
    """The RunSpec of one size (SIZES) as this bench runs it; `steps` replaces the size's step count."""
    shape, scale = SIZES[size]
    global_batch, default_steps = scale[device]
    micro = min(32, global_batch) if size == "tiny" else global_batch  # tiny: the default recipe's split
    return shaped_spec(shape, global_batch, micro, steps or default_steps, precision, compiled, device, gpu_type,
                       hardware)  # fmt: skip


def shaped_spec(shape: dict, global_batch: int, micro: int, steps: int, precision: str, compiled: bool, device: str,
                gpu_type: str, hardware: dict | None = None):  # fmt: skip
    """The default recipe at `shape` (width, depth, length), batch and steps, on one device of `device` (or on
    the one-device `hardware` entry given, e.g. the detected one)."""
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    r = cfg["recipe"]
    r["task"]["length"] = shape["length"]
    r["model"] |= {"width": shape["width"], "depth": shape["depth"], "heads": max(1, shape["width"] // 64)}
    r |= {"global_batch": global_batch, "micro_batch": micro, "precision": precision, "compile": compiled,
          "tf32": precision != "fp32" and device == "cuda",  # TF32 is a GPU format
          "reproducibility": "comparable",  # the bare loop is not deterministic
          "schedule": {"steps": steps, "warmup_steps": max(1, steps // 10)},
          "log_every": 10, "checkpoint_every": steps}  # fmt: skip
    kind = {"accelerator": device, "devices_per_node": 1} | ({"gpu_type": gpu_type} if device == "cuda" else {})
    kind = hardware or kind
    cfg |= {"hardware": {"one": kind}, "baseline": "one", "seeds": [0], "suites": {"bench": {}}}
    return resolve(cfg).spec("bench", "default", "one", 0)


def bare_loop(spec, device: torch.device) -> float:
    """Steady samples/s of the hand-written loop."""
    r, plan = spec.recipe, spec.plan
    torch.manual_seed(spec.seed)
    devices.lock_precision(plan.tf32)
    fam = families.torch_side(r.model.name)
    (x, y), _ = fam.tables(r)
    x, y = x.to(device), y.to(device)
    order = data.GlobalOrder(len(x), plan.global_batch, spec.seed, device=device)
    model = fam.build(r).to(device)
    opt = devices.adamw(model.parameters(), r.optimizer, plan.lr, device.type)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, r.schedule))
    step_fn = torch.compile(model) if r.compile else model
    dtype = devices.AUTOCAST_DTYPE[plan.precision]
    times = []
    for step in range(plan.steps):
        t0 = time.perf_counter()
        for idx in order.batch(step).split(plan.micro_batch):
            with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = step_fn(x[idx], y[idx]) / plan.accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r.optimizer.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        loss.item()  # once per step: waits for the device
        times.append(time.perf_counter() - t0)
    # As the trainer counts: its first step is startup (compiling, lazy init), then the first 10% of the rest left
    # out. The same steps as `times[int(len(times) * SKIP):]` at 10, 100 and 300 steps; right at fewer than 10.
    steady = times[1:][int((len(times) - 1) * SKIP) :]
    return plan.global_batch * len(steady) / sum(steady)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def bare_process(spec, folder: Path, device: str) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    io.write_json(folder / "bare.json", spec.to_dict())
    proc = _run([sys.executable, __file__, "--bare", str(folder / "bare.json"), "--device", device])
    return float(proc.stdout.split()[-1])


def hwsweep_trainer(spec, folder: Path) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    io.write_json(folder / "spec.json", spec.to_dict() | {"run_dir": str(folder)})
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "1", "-m", "hwsweep.run.train", str(folder / "spec.json"),
           "--threads", "1"]  # fmt: skip
    _run(cmd)
    return json.loads((folder / "train.json").read_text())["samples_per_second"]


def trainer_in_process(spec, folder: Path) -> dict:
    """The RunRecord (train.json) of hwsweep.run.train run in this process, world size 1 (a process group of
    one on a free local port, as a plain start of the trainer makes): for a pairing with bare_loop in the same
    process, where neither side pays a process start."""
    import signal

    from hwsweep.run import runtime, train

    folder.mkdir(parents=True, exist_ok=True)
    io.write_json(folder / "spec.json", spec.to_dict() | {"run_dir": str(folder)})
    handlers = {sig: signal.getsignal(sig) for sig in runtime.STOP_SIGNALS}
    try:
        train.main([str(folder / "spec.json"), "--threads", "1"])
    finally:  # the run's handlers hold the run, its model and optimizer: not past its end
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return json.loads((folder / "train.json").read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--compile", action="store_true", help="also measure recipe.compile against a compiled loop")
    parser.add_argument("--gpu-type", default="H100-80GB", help="the catalog type of the GPU (--device cuda)")
    parser.add_argument("--bare", metavar="SPEC", help=argparse.SUPPRESS)  # one bare run: prints its samples/s
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the trainer's one process with --threads 1
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if args.bare:
        print(bare_loop(RunSpec.load(args.bare), device))
        return
    where = torch.cuda.get_device_name(device) if args.device == "cuda" else "cpu, 1 thread per side"
    print(f"{where}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            precisions = PRECISIONS[size] if args.device == "cuda" else ["fp32"]  # no bf16 speed-up on a CPU
            for precision in precisions:
                for compiled in [False, True] if args.compile else [False]:
                    spec = spec_for(size, precision, compiled, args.device, args.gpu_type)
                    p = spec.plan
                    name = f"{size} {precision}{' +TF32' if p.tf32 else ''} {'compiled' if compiled else 'eager'}"
                    cuda_batch, cuda_steps = SIZES[size][1]["cuda"]
                    scaled = "" if args.device == "cuda" else f" (scaled from {cuda_batch} x {cuda_steps} steps)"
                    print(f"{name}: global batch {p.global_batch} = {p.micro_batch} x {p.accumulation}, "
                          f"{p.steps} steps{scaled}", flush=True)  # fmt: skip
                    ratios, best = [], [0.0, 0.0]
                    for i in range(args.repeats):
                        bare = bare_process(spec, Path(tmp) / f"bare-{size}-{precision}-{compiled}-{i}", args.device)
                        ours = hwsweep_trainer(spec, Path(tmp) / f"{size}-{precision}-{compiled}-{i}")
                        ratios.append(ours / bare)
                        best = [max(best[0], ours), max(best[1], bare)]
                        print(f"  repeat {i}: trainer {ours:.1f} samples/s, bare loop {bare:.1f}, "
                              f"ratio {ours / bare:.3f}", flush=True)  # fmt: skip
                    results.append((name, statistics.median(ratios), ratios, best[0] / best[1]))
    # The best run of each side is what a run without interference would do: the ratio to read on a shared machine.
    print("\ntrainer / bare loop (goal >= 0.97): median of ratios (the ratios), ratio of the best runs")
    for name, median, ratios, of_best in results:
        print(f"  {name:32s} {median:.3f}  ({', '.join(f'{x:.3f}' for x in ratios)})  best {of_best:.3f}")


if __name__ == "__main__":
    main()
