"""bench/gpu_check.py's section hrm: config/hrm.yaml's baseline model (HRM on 9x9 sudoku, bf16-mixed, micro-batch
64) on this GPU, as its own hardware entry: STEPS optimizer steps of GLOBAL_BATCH (two micro-batches accumulated,
not the study's eight) by the real launcher (hwsweep.run.launch: hwsweep.run.train, one process) on small tables
(TABLES: 128 puzzles made by search, not 1,000: the search is CPU time that each of the two processes pays at its
start, about 8 ms a puzzle on the 2-core VM), then the built-in evaluator on them. The first H100 run (2026-11-26)
trained the study's batch of 8 micro-batches (its record's startup 21.2 s) and left the evaluator 10 s of the
section's 50: too few. The batch and tables are smaller now, and the plan's FLOP count (on the CPU) runs while the
GPU trains.

Rows: the run trains on the GPU; it is evaluated on the device that trained it (eval.json's device); its FLOPs
per step as `hwsweep plan --estimate` counts them (on the CPU, one sample, every operation linear in the batch)
against the record's (torch's counter on the GPU on a real micro-batch): goal equal within 1%; and the plan's
seconds per step at the catalog's assumed MFU against the steps measured (not the first, which is startup, nor the
last, which holds the periodic evaluation).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
from pathlib import Path

import yaml

from gpucheck import proc

REPO = Path(__file__).resolve().parents[2]
STEPS = 4  # the first is startup, the last holds the evaluation: two steady steps between
GLOBAL_BATCH = 128  # 2 micro-batches of 64: accumulation's path, a quarter of the study's step
TABLES = {"train_size": 512, "eval_size": 64, "distinct_puzzles": 128}
EVALUATE_S = 25  # kept for the evaluator when the training starts (its process start, the tables, 64 puzzles)
FLOPS_TOLERANCE = 0.01
NAMES = ["trains on the device", "evaluated on the device that trained", "FLOPs per step: estimate / spent",
         "seconds per step: estimate / measured"]  # fmt: skip


def _spec(ctx, folder: Path):
    from hwsweep.plan.config import resolve

    cfg = yaml.safe_load((REPO / "config" / ("hrm_cpu.yaml" if ctx.smoke else "hrm.yaml")).read_text())
    name = "gpu1" if ctx.accelerator == "cuda" else "cpu1"
    baseline = {k: v for k, v in cfg["suites"]["baseline"].items() if k != "hardware"}  # this device only
    # the section's schedule, not the suite's (config/hrm_cpu.yaml's baseline overrides it: 150 steps)
    baseline["overrides"] = {k: v for k, v in (baseline.get("overrides") or {}).items() if k != "schedule"}
    cfg |= {"suites": {"baseline": baseline}, "hardware": {name: ctx.hardware}, "baseline": name, "seeds": [0]}
    cfg.pop("compare", None)  # comparisons across the suites left out
    r = cfg["recipe"]
    r["task"] |= TABLES if not ctx.smoke else {"train_size": 256, "eval_size": 32}
    # two micro-batches: accumulation's code path (of 8 at a CPU's size)
    r |= {"global_batch": 16, "micro_batch": 8} if ctx.smoke else {"global_batch": GLOBAL_BATCH}
    r["schedule"] = {"steps": STEPS, "warmup_steps": 1}
    r |= {"checkpoint_every": STEPS, "log_every": 1, "eval_every": STEPS, "eval_subset": r["task"]["eval_size"]}
    spec = resolve(cfg, config_dir=REPO / "config").spec("baseline", "default", name, 0)
    return spec, spec.to_dict() | {"run_dir": str(folder / "run")}


def hrm(ctx) -> None:
    from hwsweep.contracts import io

    rec = ctx.rec
    rec.declare(NAMES)
    folder = ctx.work
    spec, raw = _spec(ctx, folder)
    io.write_json(folder / "spec.json", raw)
    run = Path(raw["run_dir"])
    threads = "1" if ctx.smoke else "4"
    planned = {}
    record = None
    with rec.guarded(NAMES[0]):
        train = proc.Program([sys.executable, "-m", "hwsweep.run.launch", str(folder / "spec.json"), "--threads",
                              threads], folder / "train.log", cwd=ctx.work)  # fmt: skip
        print(f"hrm: training started ({STEPS} steps), {ctx.left():.0f} s left", flush=True)
        # The plan's figures (FLOPs counted on the CPU) while the GPU trains.
        planner = threading.Thread(target=_plan, args=(spec, planned), daemon=True)
        planner.start()
        train.finish(max(10.0, ctx.left() - (3 if ctx.smoke else EVALUATE_S)))
        record = json.loads((run / "train.json").read_text())
        p = spec.plan
        parts = ", ".join(f"{k} {v:.1f}" for k, v in (record.get("startup_parts") or {}).items() if v is not None)
        print(f"hrm: trained in {record['wall_seconds']:.1f} s (startup {record['startup_seconds']:.1f} s: {parts}); "
              f"{ctx.left():.0f} s left", flush=True)  # fmt: skip
        trained = len(record["curves"]["loss"]["values"])  # log_every 1: one loss a step
        rec.row(NAMES[0], "pass", f"**{trained} steps** on {';'.join(record['provenance']['devices'])}", "finishes",
                detail=f"{spec.recipe.model.name} width {spec.recipe.model.width}, global batch {p.global_batch} = "
                       f"{p.micro_batch} x {p.accumulation}, {p.precision}; startup {record['startup_seconds']:.1f} s "
                       f"({parts}), wall {record['wall_seconds']:.1f} s")  # fmt: skip
    if record is None:
        for name in NAMES[1:]:
            rec.row(name, "skipped", detail="the training run did not finish")
        return
    with rec.guarded(NAMES[1]):
        proc.run([sys.executable, "-m", "hwsweep.run.evaluate", str(folder / "spec.json"), "--threads", threads],
                 folder / "evaluate.log", max(10.0, ctx.left() - 3), cwd=ctx.work)  # fmt: skip
        evaluated = json.loads((run / "eval.json").read_text())
        ok = evaluated.get("device") == ctx.accelerator
        metrics = ", ".join(f"{k} {v:.3f}" for k, v in evaluated["metrics"].items() if isinstance(v, float))
        print(f"hrm: evaluated on {evaluated.get('device')} in {evaluated['eval_seconds']:.1f} s", flush=True)
        rec.row(
            NAMES[1],
            "pass" if ok else "fail",
            f"**{evaluated.get('device')}**",
            f"eval.json device: {ctx.accelerator}",
            detail=f"{evaluated['eval_seconds']:.1f} s; {metrics}",
        )
    planner.join(timeout=max(1.0, ctx.left() - 2))
    if not planned:
        planned["error"] = RuntimeError("the plan's FLOP count (on the CPU) did not finish in the section's time")
    with rec.guarded(NAMES[2]):
        if "error" in planned:
            raise planned["error"]
        # The estimate counts every segment ACT may run; the record, the segments each step ran (issue 32): with
        # ACT the estimate is an upper bound, at most halt_max_steps times what a step that halts at once spends.
        counted = record["flops_per_step"]
        ratio, most = planned["flops"] / counted, spec.recipe.model.halt_max_steps
        act = spec.recipe.model.act_mode == "act"
        ok = 1 - FLOPS_TOLERANCE <= ratio <= (most if act else 1 + FLOPS_TOLERANCE)
        goal = f"1 to {most} (ACT: estimate at the most segments)" if act else f"within +-{FLOPS_TOLERANCE:.0%}"
        segments = (record["curves"].get("segments_per_sample") or {}).get("values") or []
        rec.row(NAMES[2], "pass" if ok else "fail", f"**{ratio:.4f}** ({planned['flops']:.4g} / {counted:.4g})", goal,
                round(ratio, 5), "estimate: hwsweep.plan.estimate.step_flops; record: flops_per_step, the FLOPs the "
                f"segments run spent (mean segments per sample {statistics.fmean(segments) if segments else 'n/a'})")  # fmt: skip
    with rec.guarded(NAMES[3]):
        if "error" in planned:
            raise planned["error"]
        estimated = planned["run"]
        steady = record["step_seconds"][:-1]  # the last step's time holds the periodic evaluation (eval_every)
        measured = statistics.median(steady) if steady else None
        if measured is None or estimated["seconds_per_step"] is None:
            rec.row(NAMES[3], "skipped", detail="no steady step measured, or no estimate (no catalog peak)")
        else:
            ratio = estimated["seconds_per_step"] / measured
            rec.row(NAMES[3], "info", f"**{ratio:.2f}** ({estimated['seconds_per_step']:.3g} / {measured:.3g} s)",
                    "reported (the estimate assumes the catalog's MFU)", round(ratio, 4),
                    f"assumed MFU {estimated['mfu']}; measured MFU {record['mfu']}; trained beside the workflow "
                    "section's runs (bench/gpu_check.py runs the two side by side)")  # fmt: skip


def _plan(spec, out: dict) -> None:
    """The plan's FLOPs per step and run estimate into `out` (or the exception, under "error")."""
    try:
        from hwsweep.plan import estimate

        out["flops"] = estimate.step_flops(spec.recipe, spec.plan)
        out["run"] = estimate.estimate_run(spec, {}, estimate.Measurements({}))
    except Exception as e:  # raised again by the rows that need it
        out["error"] = e
