"""bench/gpu_check.py's sections speed (the trainer against a bare hand-written loop) and mfu (the large size's
model FLOPs utilisation), both on bench/trainer_vs_bare_loop.py's sizes, recipes and bare loop.

speed: per size x precision x eager/compiled, the trainer (hwsweep.run.train, in this process: a process group
of one) and the bare loop run the same spec one after the other in one process (a pair), up to REPEATS pairs, the
order swapped every pair; the figure is the median of the per-pair ratios of steady-state samples/s. Steps per
run: about RUN_SECONDS of steps, each step's time the larger of its FLOPs at the catalog's assumed MFU and
MICRO_FLOOR_S per micro-batch (never fewer than MIN_STEPS, never more than the bench's own count); compiling is the
first step's, which neither side counts.

In passes: first one pair of every row, in _rows' order, then a second pair of each row, then a third, each only
where the time left holds what that row's last pair took. On the first H100 run (2026-11-26) three pairs per row,
one row after the other, finished 6 of 12 rows in 236 s, the tiny rows taking 67 and 81 s (300 steps a run): now
every row gets its first pair before any gets a second, and a tiny run is about 80 steps.
"""

from __future__ import annotations

import gc
import shutil
import statistics
import time
import traceback

import torch
import trainer_vs_bare_loop as tvb

from gpucheck.device import gpu_state
from gpucheck.record import Stopped, judged

GOAL = 0.97  # issue 12: the trainer within 3% of the bare loop
REPEATS = 3  # pairs per row at most
RUN_SECONDS = 2.5  # steady time of one side's run
# A step's time is at least this per micro-batch, whatever its FLOPs: the launch-bound floor of the tiny size on
# the first H100 run (about 30 steps/s of 4 micro-batches, 2026-11-26).
MICRO_FLOOR_S = 0.008
MIN_STEPS = 5  # the first step is startup (compiling), left out by both sides; four timed steps at least
MFU_RUN_SECONDS = 5.0
START_S = 15  # a row's first pair is not started with less of the section's time left
PRECISIONS = ("fp32", "bf16-mixed")
# --smoke: one tiny shape on the CPU, a few steps, one repeat; torch.compile traced by TorchDynamo only (its
# 'eager' backend): Inductor's C++ build of each graph takes minutes on a small CPU.
SMOKE = {"shape": {"width": 32, "depth": 1, "length": 8}, "global_batch": 16, "micro": 8, "steps": 8, "repeats": 1}


def _rows(ctx) -> list[tuple[str, str, bool]]:
    """In the order they run: the sizes and precisions issue 12 measured on an H100 (trainer_vs_bare_loop.py's
    PRECISIONS) eager, then compiled, then the other precision of tiny (eager, compiled), then of large (large fp32
    is the slowest: about 1.5 s a step without TF32); where the section's time ends, the rows left are listed as
    skipped. With --speed-rows only those, in this order."""
    sizes = ["tiny"] if ctx.smoke else list(tvb.SIZES)
    first = [(s, p) for s in sizes for p in PRECISIONS if ctx.smoke or p in tvb.PRECISIONS[s]]
    extra = [(s, p) for s in sizes for p in PRECISIONS if (s, p) not in first]
    rows = [(s, p, c) for c in (False, True) for s, p in first] + [(s, p, c) for s, p in extra for c in (False, True)]
    return [row for row in rows if not ctx.speed_rows or _name(*row) in ctx.speed_rows]  # --speed-rows


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
    """Steps for about `seconds` of steady training: a step's time is its FLOPs at the assumed MFU of this GPU type,
    or MICRO_FLOOR_S per micro-batch where that is more (a small model's steps are launch-bound)."""
    from hwsweep.contracts import catalog
    from hwsweep.plan import estimate

    flops = estimate.step_flops(spec.recipe, spec.plan)
    peak = catalog.peak_flops(spec.plan.gpu_type, spec.plan.precision, spec.plan.tf32)
    kind = catalog.lookup(spec.plan.gpu_type)
    mfu = kind.mfu if kind and kind.mfu else 0.3
    step = max(flops / (peak * mfu) if flops and peak else 0.0, MICRO_FLOOR_S * spec.plan.accumulation)
    return int(min(spec.plan.steps, max(MIN_STEPS, seconds / step)))


def _device(ctx) -> torch.device:
    return torch.device("cuda", 0) if ctx.accelerator == "cuda" else torch.device("cpu")


def _smoke_compile() -> None:
    compile_ = torch.compile

    def traced_only(model=None, **kwargs):
        return compile_(model, **(kwargs | {"backend": "eager"}))

    torch.compile = traced_only  # the trainer (runtime.wrap) and the bare loop both call torch.compile


def _trainer(spec, folder) -> dict:
    """tvb.trainer_in_process; the trainer stopped by the section's SIGTERM (it checkpoints and exits 75) is the
    section's stop, not this row's error."""
    from hwsweep.run.runtime import EXIT_PREEMPTED

    try:
        return tvb.trainer_in_process(spec, folder)
    except SystemExit as e:
        if e.code == EXIT_PREEMPTED:
            raise Stopped("stopped by bench/gpu_check.py during a trainer run (its time was over)") from e
        raise


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
    found: dict[str, dict] = {}  # a row's spec and pairs so far
    broken: set[str] = set()
    for i in range(repeats):
        for size, precision, compiled in rows:
            name = _name(size, precision, compiled)
            row, left = found.get(name), ctx.left()
            if i == 0 and left < START_S:
                why = "the section's time was over" if left <= 0 else f"{left:.0f} s of the section's time were left"
                rec.row(name, "skipped", detail=f"not started: {why}")
                continue
            if i and (row is None or name in broken or left < row["pair_seconds"] + 5):
                continue  # not started, broke, or another pair of it would not fit: the next row's may
            done = None
            try:
                if i == 0:
                    with rec.guarded(name):  # the first pair's error is the row's
                        done = _pair(ctx, device, i, size, precision, compiled, row)
                else:  # a later pair's: a note, the row keeps its pairs
                    try:
                        done = _pair(ctx, device, i, size, precision, compiled, row)
                    except Exception as e:
                        traceback.print_exc()
                        rec.note(f"{name}: pair {i + 1} broke: {type(e).__name__}: "
                                 f"{(str(e).splitlines() or [''])[0][:300]}")  # fmt: skip
            finally:
                if compiled:
                    torch._dynamo.reset()  # the compiled graphs of this row: not the next one's
                _free()
            if done is None:
                broken.add(name)
            else:
                found[name] = done


def _pair(ctx, device, i: int, size: str, precision: str, compiled: bool, row: dict | None) -> dict:
    """Pair i of a row (its spec and pairs so far in `row`; None: the first): the trainer and the bare loop, in
    the order of pair i; the row recorded with every pair so far; the row's state."""
    t0 = time.monotonic()
    name = _name(size, precision, compiled)
    if row is None:
        row = {"spec": _spec(ctx, size, precision, compiled, RUN_SECONDS), "ratios": [], "ours": [], "bare": [],
               "mfus": [], "seconds": 0.0}  # fmt: skip
    else:
        row = dict(row)
    spec = row["spec"]
    folder = ctx.work / name.replace(" ", "-")
    ours, bare = None, None
    for side in ("trainer", "bare") if i % 2 == 0 else ("bare", "trainer"):
        if side == "trainer":
            record = _trainer(spec, folder / f"trainer{i}")
            shutil.rmtree(folder / f"trainer{i}")  # its checkpoints: GBs at the large size
            ours = record["samples_per_second"]
            row["mfus"] = row["mfus"] + [record["mfu"]]
        else:
            bare = tvb.bare_loop(spec, device)
    row["ours"], row["bare"], row["ratios"] = row["ours"] + [ours], row["bare"] + [bare], row["ratios"] + [ours / bare]
    row["pair_seconds"] = time.monotonic() - t0
    row["seconds"] += row["pair_seconds"]
    ratios, p = row["ratios"], spec.plan
    median = statistics.median(ratios)
    mfus = [m for m in row["mfus"] if m is not None]
    state = None if ctx.smoke else gpu_state()
    detail = (f"global batch {p.global_batch} = {p.micro_batch} x {p.accumulation}, {p.steps} steps, "
              f"tf32 {p.tf32}; {len(ratios)} pair(s); samples/s trainer {statistics.median(row['ours']):.4g}, "
              f"bare {statistics.median(row['bare']):.4g}" + (f"; trainer MFU {statistics.median(mfus):.3f}" if mfus
                                                              else "") + (f"; GPU after: {state}" if state else ""))  # fmt: skip
    shown = f"**{median:.3f}** ({', '.join(f'{r:.3f}' for r in ratios)})"
    status = "info" if ctx.smoke else judged(median >= GOAL)
    ctx.rec.row(name, status, shown, f">= {GOAL}", round(median, 4), detail, ratios=ratios,
                seconds=round(row["seconds"], 1), steps=p.steps)  # fmt: skip
    print(f"speed: {name}: pair {i + 1}, ratio {ratios[-1]:.3f} in {row['pair_seconds']:.1f} s; "
          f"{ctx.left():.0f} s of the section left", flush=True)  # fmt: skip
    return row


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
        record = _trainer(spec, ctx.work / "large")
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
        state = None if ctx.smoke else gpu_state()
        steady = record["step_seconds"][int(len(record["step_seconds"]) * 0.1) :]
        detail += (f"; steady step {statistics.median(steady):.3f} s median, {min(steady):.3f} s fastest"
                   if steady else "") + (f"; GPU after: {state}" if state else "")  # fmt: skip
        print(f"mfu: {value:.3f}; {detail}", flush=True)
        rec.row(name, status, shown, "0 < MFU <= 1", round(value, 4), detail)
