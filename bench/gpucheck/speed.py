"""bench/gpu_check.py's sections speed (the trainer against a bare hand-written loop) and mfu (the large size's
model FLOPs utilisation), both on bench/trainer_vs_bare_loop.py's sizes, recipes and bare loop.

speed: per size x precision x eager/compiled, the trainer (hwsweep.run.train, in this process: a process group
of one) and the bare loop run the same spec alternately in one process, REPEATS times each, the order swapped
every repeat; the figure is the median of the per-repeat ratios of steady-state samples/s. Steps per run come
from the step's FLOPs at the catalog's assumed MFU so that a run lasts about RUN_SECONDS (never fewer than
MIN_STEPS, never more than the bench's own count); compiling is the first step's, which neither side counts.
"""

from __future__ import annotations

import gc
import shutil
import statistics
import time

import torch
import trainer_vs_bare_loop as tvb

from gpucheck.record import judged

GOAL = 0.97  # issue 12: the trainer within 3% of the bare loop
REPEATS = 3
RUN_SECONDS = 1.0  # steady time of one side's run
MIN_STEPS = 10  # the steady state leaves out the first 10%: one step at least, as the trainer does
MFU_RUN_SECONDS = 3.0
PRECISIONS = ("fp32", "bf16-mixed")
# --smoke: one tiny shape on the CPU, a few steps, one repeat; torch.compile traced by TorchDynamo only (its
# 'eager' backend): Inductor's C++ build of each graph takes minutes on a small CPU.
SMOKE = {"shape": {"width": 32, "depth": 1, "length": 8}, "global_batch": 16, "micro": 8, "steps": 8, "repeats": 1}


def _rows(ctx) -> list[tuple[str, str, bool]]:
    """In the order they run: the sizes and precisions issue 12 measured on an H100 (trainer_vs_bare_loop.py's
    PRECISIONS) eager, then compiled, then the other precision of tiny and large (large fp32 is the slowest row);
    where the section's time ends, the rows left are listed as skipped."""
    sizes = ["tiny"] if ctx.smoke else list(tvb.SIZES)
    first = [(s, p) for s in sizes for p in PRECISIONS if ctx.smoke or p in tvb.PRECISIONS[s]]
    extra = [(s, p) for s in sizes for p in PRECISIONS if (s, p) not in first]
    return [(s, p, c) for group in (first, extra) for c in (False, True) for s, p in group]


def _name(size: str, precision: str, compiled: bool) -> str:
    return f"{size} {precision} {'compiled' if compiled else 'eager'}"


def _spec(ctx, size: str, precision: str, compiled: bool, seconds: float):
    if ctx.smoke:
        s = SMOKE
        return tvb.shaped_spec(s["shape"], s["global_batch"], s["micro"], s["steps"], precision, compiled,
                               ctx.accelerator, ctx.gpu_type, ctx.hardware)  # fmt: skip
    spec = tvb.spec_for(size, precision, compiled, "cuda", ctx.gpu_type, hardware=ctx.hardware)
    return tvb.spec_for(size, precision, compiled, "cuda", ctx.gpu_type, _steps(spec, seconds), ctx.hardware)


def _steps(spec, seconds: float) -> int:
    """Steps for about `seconds` of steady training: the step's FLOPs at the assumed MFU of this GPU type."""
    from hwsweep.contracts import catalog
    from hwsweep.plan import estimate

    flops = estimate.step_flops(spec.recipe, spec.plan)
    peak = catalog.peak_flops(spec.plan.gpu_type, spec.plan.precision, spec.plan.tf32)
    kind = catalog.lookup(spec.plan.gpu_type)
    mfu = (kind.mfu if kind and kind.mfu else 0.3) if peak else None
    if not flops or not peak:
        return spec.plan.steps
    return int(min(spec.plan.steps, max(MIN_STEPS, seconds * peak * mfu / flops)))


def _device(ctx) -> torch.device:
    return torch.device("cuda", 0) if ctx.accelerator == "cuda" else torch.device("cpu")


def _smoke_compile() -> None:
    compile_ = torch.compile

    def traced_only(model=None, **kwargs):
        return compile_(model, **(kwargs | {"backend": "eager"}))

    torch.compile = traced_only  # the trainer (runtime.wrap) and the bare loop both call torch.compile


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def speed(ctx) -> None:
    rec, device = ctx.rec, _device(ctx)
    torch.set_num_threads(1)  # as the trainer's one process with --threads 1
    if ctx.smoke:
        _smoke_compile()
    repeats = SMOKE["repeats"] if ctx.smoke else REPEATS
    rows = _rows(ctx)
    rec.declare([_name(*row) for row in rows])
    if ctx.smoke:
        rec.note("--smoke: one tiny shape, TorchDynamo's eager backend for compile: the ratios mean nothing")
    for size, precision, compiled in rows:
        name = _name(size, precision, compiled)
        if ctx.left() < 15:
            rec.row(name, "skipped", detail=f"not started: {ctx.left():.0f} s of the section's time were left")
            continue
        t0 = time.monotonic()
        with rec.guarded(name):
            spec = _spec(ctx, size, precision, compiled, RUN_SECONDS)
            folder = ctx.work / name.replace(" ", "-")
            ratios, ours, bare, mfus = [], [], [], []
            for i in range(repeats):
                for side in ("trainer", "bare") if i % 2 == 0 else ("bare", "trainer"):
                    if side == "trainer":
                        record = tvb.trainer_in_process(spec, folder / f"trainer{i}")
                        shutil.rmtree(folder / f"trainer{i}")  # its checkpoints: GBs at the large size
                        ours.append(record["samples_per_second"])
                        mfus.append(record["mfu"])
                    else:
                        bare.append(tvb.bare_loop(spec, device))
                ratios.append(ours[-1] / bare[-1])
            median = statistics.median(ratios)
            p = spec.plan
            mfu = statistics.median(m for m in mfus if m is not None) if any(m is not None for m in mfus) else None
            detail = (f"global batch {p.global_batch} = {p.micro_batch} x {p.accumulation}, {p.steps} steps, "
                      f"tf32 {p.tf32}; samples/s trainer {statistics.median(ours):.4g}, "
                      f"bare {statistics.median(bare):.4g}" + (f"; trainer MFU {mfu:.3f}" if mfu is not None else ""))  # fmt: skip
            shown = f"**{median:.3f}** ({', '.join(f'{r:.3f}' for r in ratios)})"
            status = "info" if ctx.smoke else judged(median >= GOAL)
            rec.row(name, status, shown, f">= {GOAL}", round(median, 4), detail, ratios=ratios,
                    seconds=round(time.monotonic() - t0, 1), steps=p.steps)  # fmt: skip
        if compiled:
            torch._dynamo.reset()  # the compiled graphs of this row: not the next one's
        _free()


def mfu(ctx) -> None:
    """The built-in transformer at the large size, bf16-mixed, eager, trained by hwsweep.run.train in this process:
    the MFU its record reports (FLOPs counted by torch on a real micro-batch, steady steps, the catalog's dense
    peak for this GPU type). Goal: within (0, 1]: above 1, the FLOP count or the catalog's peak is wrong."""
    from hwsweep.contracts import catalog

    rec = ctx.rec
    torch.set_num_threads(1)
    name = "large bf16-mixed eager: MFU"
    rec.declare([name])
    with rec.guarded(name):
        spec = _spec(ctx, "large", "bf16-mixed", False, MFU_RUN_SECONDS)
        record = tvb.trainer_in_process(spec, ctx.work / "large")
        value = record["mfu"]
        peak = catalog.peak_flops(spec.plan.gpu_type, spec.plan.precision, spec.plan.tf32)
        kind = catalog.lookup(spec.plan.gpu_type)
        assumed = kind.mfu if kind else None
        p = spec.plan
        detail = (f"{spec.recipe.model.width} wide, {spec.recipe.model.depth} deep, length {spec.recipe.task.length}, "
                  f"global batch {p.global_batch}, {p.steps} steps; {record['flops_per_step']:.3g} FLOPs per step; "
                  f"the planner assumes MFU {assumed} for {p.gpu_type} (catalog)")  # fmt: skip
        if value is None:
            rec.row(name, "error", detail=f"no MFU in the record: no catalog peak for {p.gpu_type} {p.precision}")
            return
        shown = f"**{value:.3g}** ({record['tflops_per_device']:.3g} of {peak / 1e12:.4g} TFLOP/s, {p.gpu_type})"
        status = "info" if ctx.smoke else judged(0 < value <= 1)
        rec.row(name, status, shown, "0 < MFU <= 1", round(value, 4), detail)
