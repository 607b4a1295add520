"""FSDP vs DDP in one run: per-device peak memory against world size (1/2/4) beside what the plan estimates for
the same layout, and the step time of FSDP over DDP's at each world size.

    .venv/bin/python bench/fsdp.py [--width 512 --depth 8 --length 32 --micro-batch 4 --steps 8]
                                   [--world-sizes 1 2 4] [--strategies ddp fsdp] [--precision fp32] [--json out.json]
                                   [--layouts ddp fsdp fsdp:full fsdp:selective] [--optimizer adamw]

For each world size it starts torchrun (`python -m hwsweep.run.torchrun --nproc_per_node N --start-method fork -m
bench.fsdp --worker ...`: the workers forked from the agent, as the built-in trainer's are), which measures each
layout (a strategy, with `:MODE` its activation checkpointing; --strategies alone: each without) in turn, the peak
resident set reset between them (one torchrun per layout where it cannot be): the built-in transformer, built on the
meta device and placed as run.wrap places it (hwsweep.run.reduce.prepare: DDP, or FSDP2 sharding each block, then
the embeddings and head, then the root, each rank then given memory for its shards only), trains `steps` steps of
one micro-batch per device with the trainer's optimizer --optimizer (recipe.optimizer.name: adamw, or sgd, which
keeps no state; gloo on CPU, NCCL on CUDA). Per device, the maximum over ranks:

- peak: on CUDA torch.cuda.max_memory_allocated; on CPU the growth of the process's peak resident set from
  just before the model is built, after the same steps on a one-block model (the interpreter, torch's code
  and one-time setup and the process group are not the plan's business), with glibc returning freed large
  blocks at once (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_, set here) so the peak is of live memory;
- whole: the peak in absolute terms (on CPU the process's whole peak resident set: the interpreter, torch and the
  process group included; on CUDA max_memory_allocated from zero), beside the model's fp32 weights: at 4 ranks
  with --optimizer sgd and a large enough model a rank's whole peak is below the weights (docs/fsdp.md);
- planned: footprint.device_bytes for the same layout (shards = N under FSDP, the activation checkpointing, the
  optimizer's state),
  without the CUDA context the plan reserves (max_memory_allocated does not see it); measured / planned is the
  plan's error (goal +-15%);
- step: the median step time after two warm-up steps; fsdp/ddp is their ratio at the same world size.

Runs unchanged on a GPU machine (world sizes above its GPU count are skipped, said so).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


# glibc keeps freed memory in its heap (resident) unless told to hand large blocks back: without this the peak
# RSS measures the allocator's retention as much as the model's memory. One arena, so that other threads (gloo's)
# keep none of their own: set after fsdp:full at N = 1 once read 166 MB where it reads 96 MB (under load, inside
# pytest); whether threads' arenas were the cause is not established.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "1"}


def _shapes(args):
    task = SimpleNamespace(name="sort", length=args.length, vocab_size=64, train_size=max(64, args.micro_batch),
                           eval_size=8)  # fmt: skip
    model = SimpleNamespace(name="transformer", width=args.width, depth=args.depth, heads=max(1, args.width // 64),
                            mlp_ratio=4)  # fmt: skip
    return task, model


def worker(args) -> None:
    import torch
    import torch.distributed as dist

    from hwsweep.run import device as devices

    accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    device = devices.select(accelerator, int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend=device.backend)
    for layout in args.layouts:  # in turn, each from the peak reset after the last (CPU) or the peak stats (CUDA)
        args.strategy, _, checkpointing = layout.partition(":")
        args.activation_checkpointing = checkpointing or "none"
        result = layout_peak(args, device)
        if dist.get_rank() == 0:
            print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def layout_peak(args, device) -> dict:
    """Peak and planned bytes per device (the maximum over ranks) of args.steps steps of args.strategy, in the
    process group already started on `device` (a hwsweep.run.device.Device); the same on every rank. Anything
    it allocates is freed when it returns, so one process can measure several layouts in turn."""
    import gc

    import torch
    import torch.distributed as dist

    from hwsweep.contracts import host
    from hwsweep.contracts.recipe import Optimizer, Parallel
    from hwsweep.models import families, footprint
    from hwsweep.run import device as devices
    from hwsweep.run import optimizers, repro
    from hwsweep.run.reduce import prepare

    accelerator = device.accelerator
    checkpointing = args.activation_checkpointing
    n = dist.get_world_size()
    probe = torch.ones(1, device=device.torch_device)
    dist.all_reduce(probe)  # the process group's own buffers exist before the baseline is read
    task, model_cfg = _shapes(args)
    parallel = Parallel(strategy=args.strategy, reshard_after_forward=True)
    # What run.wrap reads of the recipe and the plan: one micro-batch per step on one node.
    recipe = SimpleNamespace(reproducibility="deterministic", parallel=parallel, compile=False,
                             activation_checkpointing=checkpointing)  # fmt: skip
    plan = SimpleNamespace(accumulation=1, precision=args.precision, nodes=1, devices_per_node=n)
    opt = Optimizer(name=args.optimizer, lr=1e-3, weight_decay=0.01, beta1=0.9, beta2=0.95, grad_clip=0.0, kernel="auto",
                    puzzle_emb_lr=0.01, puzzle_emb_weight_decay=0.1)
    scaler = devices.grad_scaler(device, args.precision)

    def train(model_cfg, steps: int) -> list[float]:
        repro.seed_everything(0)
        model, _ = families.model_and_batch(task, model_cfg, args.micro_batch)  # on the meta device
        reduction = prepare(model, recipe, plan, device, 0)
        train_table, _ = families.torch_side("transformer").tables(SimpleNamespace(task=task, model=model_cfg))
        batch = tuple(t[: args.micro_batch].to(device.torch_device) for t in train_table)
        optimizer = optimizers.build(reduction.model.parameters(), opt, opt.lr, accelerator)
        seconds = []
        for _ in range(steps):
            t0 = time.perf_counter()
            with devices.autocast(device, args.precision):
                loss = reduction.model(*batch)
            reduction.backward(loss, scaler)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            device.synchronize()
            seconds.append(time.perf_counter() - t0)
        return seconds

    # The same steps on a model of one narrow block first: torch's code pages and one-time kernel setup are
    # resident before the baseline is read (on CPU they are ~80 MB of RSS that no plan counts).
    train(SimpleNamespace(**vars(model_cfg) | {"width": 64, "heads": 1, "depth": 1}), 2)
    gc.collect()
    if accelerator == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device.torch_device)
        before = torch.cuda.memory_allocated(device.torch_device)  # what an earlier layout left: not this one's
    else:
        host.reset_peak_rss()  # where it cannot, measure() runs one layout per process: the peak so far is the baseline
        before = host.peak_rss_bytes()
    seconds = train(model_cfg, args.steps)
    if accelerator == "cuda":
        whole, source = torch.cuda.max_memory_allocated(device.torch_device), "cuda_max_memory_allocated"
    else:
        whole, source = host.peak_rss_bytes(), "host_rss_growth"
    most = torch.tensor([float(whole - before), float(whole)], device=device.torch_device)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    planned = footprint.device_bytes(model_cfg, task, args.micro_batch, 1, False, "cpu", args.precision,
                                     parallel.shards(1, n), True, checkpointing, args.optimizer)  # fmt: skip
    del probe
    gc.collect()
    if accelerator == "cuda":
        torch.cuda.empty_cache()
    return {
        "strategy": args.strategy, "activation_checkpointing": checkpointing, "optimizer": args.optimizer, "world_size": n,
        "accelerator": accelerator, "peak_bytes": most[0].item(), "whole_peak_bytes": most[1].item(), "source": source,
        "planned_bytes": planned,
        "step_seconds": statistics.median(seconds[2:] or seconds),
        "parameters": footprint.parameter_count(model_cfg, task), "device": device.name,
    }  # fmt: skip


def measure(args, layouts: list[str], n: int) -> list[dict]:
    """Every layout at world size n: one torchrun measuring them in turn where the peak resident set can be reset
    (Linux; a GPU's peak stats always can), else one torchrun per layout."""
    from hwsweep.contracts import host

    if not host.reset_peak_rss() and len(layouts) > 1:
        return [row for layout in layouts for row in measure(args, [layout], n)]
    # -m bench.fsdp (REPO on PYTHONPATH): each worker forked from the agent, which imported this module and torch
    cmd = [sys.executable, "-m", "hwsweep.run.torchrun", "--standalone", "--nproc_per_node", str(n), "--start-method",
           "fork", "-m", "bench.fsdp", "--worker", "--layouts", *layouts, "--width", str(args.width),
           "--depth", str(args.depth), "--length", str(args.length), "--micro-batch", str(args.micro_batch),
           "--steps", str(args.steps), "--precision", args.precision, "--optimizer", args.optimizer]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")} | MALLOC
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    rows = [json.loads(line[len("RESULT ") :]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or len(rows) != len(layouts):
        sys.exit(f"bench/fsdp.py: {' '.join(layouts)} at world size {n} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--precision", choices=["fp32", "bf16-mixed"], default="fp32")
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw", help="recipe.optimizer.name")
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--strategies", nargs="+", choices=["ddp", "fsdp"], default=["ddp", "fsdp"])
    parser.add_argument("--layouts", nargs="+", help="strategy[:activation checkpointing], e.g. fsdp:full (default: "
                                                     "each of --strategies without)")  # fmt: skip
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # measures --layouts in turn
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    import torch

    gpus = torch.cuda.device_count()
    sizes = [n for n in args.world_sizes if not gpus or n <= gpus]
    for n in sorted(set(args.world_sizes) - set(sizes)):
        print(f"world size {n}: skipped, this machine has {gpus} GPU(s)")
    layouts = args.layouts or args.strategies
    for layout in layouts:
        strategy, _, checkpointing = layout.partition(":")
        if strategy not in ("ddp", "fsdp") or checkpointing not in ("", "none", "full", "selective"):
            sys.exit(f"bench/fsdp.py: --layouts {layout}: use ddp or fsdp, optionally :none, :full or :selective")
    rows = [row for n in sizes for row in measure(args, layouts, n)]
    first = rows[0]
    print(f"model: transformer width {args.width}, depth {args.depth}, length {args.length}, "
          f"{first['parameters'] / 1e6:.2f}M parameters; micro-batch {args.micro_batch}, {args.precision}, {args.optimizer}, "
          f"{args.steps} steps; {first['accelerator']} ({first['device']}); peak: {first['source']}; fp32 weights "
          f"{first['parameters'] * 4 / 2**20:.1f} MB")  # fmt: skip
    print(f"{'strategy':>8} {'act. ckpt':>9} {'N':>3} {'peak MB':>9} {'planned MB':>11} {'peak/plan':>9} {'step ms':>9} "
          f"{'/ddp':>9} {'whole MB':>9}")  # fmt: skip
    # the step time over plain DDP's at the same world size
    step = {(r["strategy"], r["world_size"]): r["step_seconds"] for r in rows if r["activation_checkpointing"] == "none"}
    for r in rows:
        plain = ("ddp", r["world_size"]) in step and (r["strategy"], r["activation_checkpointing"]) != ("ddp", "none")
        ratio = r["step_seconds"] / step[("ddp", r["world_size"])] if plain else None
        print(f"{r['strategy']:>8} {r['activation_checkpointing']:>9} {r['world_size']:>3} {r['peak_bytes'] / 2**20:>9.1f} "
              f"{r['planned_bytes'] / 2**20:>11.1f} "
              f"{r['peak_bytes'] / r['planned_bytes']:>9.2f} {r['step_seconds'] * 1e3:>9.1f} "
              f"{'' if ratio is None else f'{ratio:.2f}':>9} {r['whole_peak_bytes'] / 2**20:>9.1f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
