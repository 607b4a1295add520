"""bench/gpu_check.py's section memory: the plan's memory against the peak a real step allocates.

Layouts: DDP and FSDP at world size 1, fp32 and bf16-mixed, at bench/trainer_vs_bare_loop.py's three sizes and
their micro-batches, each measured by bench/fsdp.py's layout_peak (hwsweep's own reduction, the recipe's AdamW,
torch.cuda.max_memory_allocated after STEPS steps) against footprint.device_bytes for the same layout, without
the CUDA context the plan reserves (max_memory_allocated does not see it). Goal: measured / planned within +-15%.

micro_batch auto: the large size in bf16-mixed with a global batch of about four times the largest micro-batch the
estimate fits in the budget (advisor.target_utilisation of this GPU's memory), a multiple of 840 (auto_global_batch),
so the plan must split it and the split is not decided by the batch's divisors. Two rows: the plan from the estimate (what `hwsweep plan` picks), and the
plan from the memory probe's measurements (what `hwsweep detect` picks). Each chosen micro-batch is run (the
probe's step: forward, backward and AdamW, twice) and must not run out of memory and must use at least 70% of
the budget (its peak plus the CUDA context).
"""

from __future__ import annotations

import math
import os
import socket
import time
from types import SimpleNamespace

import fsdp
import memory_plan
import torch
import torch.distributed as dist
import trainer_vs_bare_loop as tvb

from gpucheck.record import bytes_text, judged

from hwsweep.contracts.memory_check import TOLERANCE  # the run records' flag uses the same
SPLITS = 840  # lcm(1, ..., 8): a multiple of it is split evenly into 1 to 8 micro-batches
USE_GOAL = 0.70
STEPS = 3  # the optimizer state exists from the first step on; the peak is reached by the second
MICRO = {"tiny": 32, "medium": 512, "large": 512}  # the sizes' micro-batches (trainer_vs_bare_loop.py)
SMOKE = {"width": 32, "depth": 2, "length": 8, "micro": 4}


def _layouts(ctx) -> list[tuple[str, str, str]]:
    sizes = ["tiny"] if ctx.smoke else list(tvb.SIZES)
    return [(model, precision, strategy) for model in sizes for precision in ("fp32", "bf16-mixed")
            for strategy in ("ddp", "fsdp")]  # fmt: skip


def _group(ctx):
    """A process group of one on a free local port (FSDP needs one), on this device."""
    from hwsweep.run import device as devices

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    device = devices.select(ctx.accelerator, 0)
    dist.init_process_group(backend=device.backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    return device


def memory(ctx) -> None:
    rec = ctx.rec
    os.environ["HWSWEEP_MEMORY_CACHE"] = str(ctx.work / "memory.json")  # the probe's cache: this check's own
    torch.set_num_threads(1 if ctx.smoke else 4)
    layouts = _layouts(ctx)
    names = [f"{model} {precision} {strategy} ws1" for model, precision, strategy in layouts]
    auto = ["micro_batch auto, from the estimate", "micro_batch auto, from the probe"]
    rec.declare(names + auto)
    device = _group(ctx)
    cuda = ctx.accelerator == "cuda"
    if not cuda:
        rec.note("no CUDA device: peaks are the growth of the process's peak resident set, not max_memory_allocated "
                 "(the goal's measure): not judged")  # fmt: skip
    for (model, precision, strategy), name in zip(layouts, names):
        t0 = time.monotonic()
        with rec.guarded(name):
            shape = SMOKE if ctx.smoke else tvb.SIZES[model][0]
            micro = SMOKE["micro"] if ctx.smoke else MICRO[model]
            args = SimpleNamespace(width=shape["width"], depth=shape["depth"], length=shape["length"],
                                   micro_batch=micro, steps=STEPS, precision=precision, strategy=strategy,
                                   activation_checkpointing="none", optimizer="adamw")  # fmt: skip
            found = fsdp.layout_peak(args, device)
            ratio = found["peak_bytes"] / found["planned_bytes"]
            shown = f"**{ratio:.3f}** ({bytes_text(found['peak_bytes'])} of {bytes_text(found['planned_bytes'])})"
            detail = (f"micro-batch {micro}, {found['parameters'] / 1e6:.1f}M parameters; peak: {found['source']}; "
                      "planned: footprint.device_bytes without the CUDA context")  # fmt: skip
            status = judged(abs(ratio - 1) <= TOLERANCE) if cuda else "info"
            rec.row(name, status, shown, f"measured / planned in [{1 - TOLERANCE:.2f}, {1 + TOLERANCE:.2f}]",
                    round(ratio, 4), detail)  # fmt: skip
            print(f"memory: {name}: {ratio:.3f} in {time.monotonic() - t0:.1f} s; {ctx.left():.0f} s left", flush=True)
    _auto(ctx, device, auto)
    dist.destroy_process_group()


def _peak(ctx, device, recipe, micro: int, precision: str) -> tuple[int | None, str]:
    """(peak bytes of the probe's step at `micro`, None: out of memory; what was measured)."""
    from hwsweep.run import probe

    if ctx.accelerator == "cuda":
        peak, _ = probe.step_peak_bytes(recipe, micro, precision, device.torch_device)
        return peak, "max_memory_allocated"
    args = SimpleNamespace(width=recipe.model.width, depth=recipe.model.depth, length=recipe.task.length,
                           micro_batch=micro, steps=2, precision=precision, strategy="ddp",
                           activation_checkpointing="none", optimizer="adamw")  # fmt: skip
    return int(fsdp.layout_peak(args, device)["peak_bytes"]), "host RSS growth (CPU stand-in)"


def largest_fit(recipe, accelerator: str, precision: str, budget: float) -> int:
    """The largest micro-batch whose estimated need (DDP, one device) fits `budget` bytes (at least 1)."""
    from hwsweep.plan.batch import device_need

    def fits(micro: int) -> bool:
        return device_need(recipe, accelerator, precision, micro, 1, 0) <= budget

    low = 1
    while fits(low * 2):
        low *= 2
    high = low * 2  # the answer is in [low, high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def auto_global_batch(fit: int) -> int:
    """The global batch the micro_batch auto rows plan: about 4 x `fit` (the estimate's largest micro-batch), a
    multiple of SPLITS, so G/4, G/5, ..., G/8 are all micro-batches the plan may take, each at least 80% of the one
    above: wherever the measured fit lies between G/8 and G/4 (about half the estimate's to the estimate's), one of
    them uses at least 80% of it. The plan takes divisors only (every micro-batch the same size, hwsweep.plan.batch),
    so a batch with a large prime factor leaves a gap: on the H100 (2026-11-26) 2 x 1052 = 2104 = 8 x 263 left the
    probe 526, half, once 1052 measured 0.3% over the budget. Under 210 (a CPU's --smoke): 2 x `fit`."""
    if fit < SPLITS // 4:
        return 2 * fit
    return SPLITS * math.ceil(4 * fit / SPLITS)


def _auto(ctx, device, names: list[str]) -> None:
    from hwsweep.contracts.hardware import GB
    from hwsweep.models.footprint import CUDA_CONTEXT_BYTES
    from hwsweep.plan.batch import Advisor, device_need
    from hwsweep.run import probe

    rec, cuda = ctx.rec, ctx.accelerator == "cuda"
    precision = "bf16-mixed"
    shape = SMOKE if ctx.smoke else tvb.SIZES["large"][0]
    hardware = dict(ctx.hardware)
    recipe, _ = memory_plan.plan_at(shape, 2, 1, precision, hardware, cuda)
    if not cuda:  # a CPU's memory is the host's: a budget of a few micro-batches, so that the plan must split
        hardware["memory_gb"] = device_need(recipe, "cpu", precision, 8, 1, 0) / (Advisor.target_utilisation * GB)
    budget = Advisor.target_utilisation * hardware["memory_gb"] * GB
    global_batch = auto_global_batch(largest_fit(recipe, ctx.accelerator, precision, budget))
    context = CUDA_CONTEXT_BYTES if cuda else 0
    goal = f">= {USE_GOAL:.0%} of the budget, no out-of-memory"

    def judge(name: str, micro: int, how: str) -> None:
        peak, source = _peak(ctx, device, recipe, micro, precision)
        if peak is None:
            rec.row(name, "fail" if cuda else "info", f"micro-batch {micro}: **out of memory**", goal,
                    detail=f"global batch {global_batch}; {how}")  # fmt: skip
            return
        used = (peak + context) / budget
        shown = (
            f"micro-batch {micro}: **{used:.0%}** of the budget ({bytes_text(peak + context)} of {bytes_text(budget)})"
        )
        print(f"memory: {name}: micro-batch {micro}, {used:.0%} of the budget; {ctx.left():.0f} s left", flush=True)
        rec.row(name, judged(used >= USE_GOAL) if cuda else "info", shown, goal, round(used, 4),
                f"large bf16-mixed, global batch {global_batch}; {how}; peak: {source}" + (
                    "" if cuda else "; CPU stand-in (the budget is made up)"))  # fmt: skip

    with rec.guarded(names[0]):
        _, spec = memory_plan.plan_at(shape, global_batch, "auto", precision, hardware, cuda)
        judge(names[0], spec.plan.micro_batch, f"planned {bytes_text(spec.plan.est_memory_gb * GB)} (estimate)")
    with rec.guarded(names[1]):
        peaks = probe.probe(recipe, hardware["gpu_type"], precision, global_batch, budget - context,
                            lambda micro: (_peak(ctx, device, recipe, micro, precision)[0], 0))  # fmt: skip
        # The cache now holds the measured peaks: the plan takes them (memory_source measured) on a GPU.
        _, spec = memory_plan.plan_at(shape, global_batch, "auto", precision, hardware, cuda)
        tried = ", ".join(f"{m}: {'OOM' if b is None else bytes_text(b)}" for m, b in sorted(peaks.items()))
        judge(names[1], spec.plan.micro_batch, f"probed {tried}; plan memory_source {spec.plan.memory_source}")
