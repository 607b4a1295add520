"""bench/gpu_check.py's section startup: bench/startup.py's measurement on this device, world size 1 under
torchrun, alternating REPEATS times: the bare floor (import torch, CUDA init on the rank's device, NCCL's
process group and its first collective), the same plus a DDP-wrapped Linear and one AdamW step, and the built-in
trainer on config/config.yaml's recipe on this GPU (its record's startup: process start to the end of the first
step). Goal (issue 39): the trainer's startup at most GOAL_S over the bare floor (medians)."""

from __future__ import annotations

import statistics

import startup as bench

from hwsweep.contracts.records import PARTS

from gpucheck.record import judged

GOAL_S = 3.0
REPEATS = 2
STEPS = 20
NAMES = ["startup beyond import + CUDA init + process group", "startup beyond + DDP and one AdamW step"]


def startup(ctx) -> None:
    rec = ctx.rec
    rec.declare(NAMES)
    repeats = 1 if ctx.smoke else REPEATS
    floor, floor_step, runs = [], [], []
    with rec.guarded(NAMES[0]):
        for _ in range(repeats):  # alternating: a slow moment of the machine hits all three
            floor.append(bench.bare(ctx.work, 1, step=False, accelerator=ctx.accelerator))
            if not ctx.smoke:  # the same code as the floor's, with a step: not worth a smoke's minute
                floor_step.append(bench.bare(ctx.work, 1, step=True, accelerator=ctx.accelerator))
            runs.append(bench.hwsweep_run(ctx.work, 1, STEPS, hardware=ctx.hardware))
        base = statistics.median(floor)
        ours = statistics.median(r["startup"] for r in runs)
        parts = ", ".join(f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in PARTS)
        detail = (f"bare floor {base:.2f} s ({', '.join(f'{x:.2f}' for x in floor)}), hwsweep startup {ours:.2f} s "
                  f"({parts}); medians of {repeats}")  # fmt: skip
        excess = ours - base
        status = "info" if ctx.smoke else judged(excess <= GOAL_S)
        rec.row(NAMES[0], status, f"**{excess:+.2f} s** ({ours:.2f} - {base:.2f})", f"<= +{GOAL_S:.0f} s",
                round(excess, 3), detail)  # fmt: skip
        if not floor_step:
            rec.row(NAMES[1], "skipped", detail="--smoke: the floor's code with a step, left out")
            return
        base_step = statistics.median(floor_step)
        rec.row(NAMES[1], "info", f"**{ours - base_step:+.2f} s** ({ours:.2f} - {base_step:.2f})", "reported",
                round(ours - base_step, 3), "the floor of any DDP training script: torch's lazy costs at its first step")  # fmt: skip
