"""bench/gpu_check.py's section hrm: config/hrm.yaml's baseline (HRM on 9x9 sudoku, bf16-mixed, micro-batch 64 x 8
accumulated) on this GPU, as its own hardware entry: STEPS optimizer steps by the real launcher (torchrun,
hwsweep.run.train) on smaller tables than the study's (TABLES: the same model, batch and step), then the
built-in evaluator on them.

Rows: the run trains on the GPU; it is evaluated on the device that trained it (eval.json's device); its FLOPs
per step as `hwsweep plan --estimate` counts them (on the CPU, one sample, every operation linear in the batch)
against the record's (torch's counter on the GPU on a real micro-batch): goal equal within 1%; and the plan's
seconds per step at the catalog's assumed MFU against the steps measured (not the first, which is startup, nor the
last, which holds the periodic evaluation).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
STEPS = 4  # the first is startup, the last holds the evaluation: two steady steps between
TABLES = {"train_size": 2048, "eval_size": 128}
FLOPS_TOLERANCE = 0.01
NAMES = ["trains on the device", "evaluated on the device that trained", "FLOPs per step: estimate / spent",
         "seconds per step: estimate / measured"]  # fmt: skip


def _spec(ctx, folder: Path):
    from hwsweep.plan.config import resolve

    cfg = yaml.safe_load((REPO / "config" / ("hrm_cpu.yaml" if ctx.smoke else "hrm.yaml")).read_text())
    name = "gpu1" if ctx.accelerator == "cuda" else "cpu1"
    baseline = {k: v for k, v in cfg["suites"]["baseline"].items() if k != "hardware"}  # this device only
    cfg |= {"suites": {"baseline": baseline}, "hardware": {name: ctx.hardware}, "baseline": name, "seeds": [0]}
    cfg.pop("compare", None)  # comparisons across the suites left out
    r = cfg["recipe"]
    r["task"] |= TABLES if not ctx.smoke else {"train_size": 256, "eval_size": 32}
    if ctx.smoke:  # two micro-batches of 8: accumulation's code path at a CPU's size
        r |= {"global_batch": 16, "micro_batch": 8}
    r["schedule"] = {"steps": STEPS, "warmup_steps": 1}
    r |= {"checkpoint_every": STEPS, "log_every": 1, "eval_every": STEPS, "eval_subset": r["task"]["eval_size"]}
    spec = resolve(cfg, config_dir=REPO / "config").spec("baseline", "default", name, 0)
    return spec, spec.to_dict() | {"run_dir": str(folder / "run")}


def hrm(ctx) -> None:
    from hwsweep.contracts import io
    from hwsweep.plan import estimate

    rec = ctx.rec
    rec.declare(NAMES)
    folder = ctx.work
    spec, raw = _spec(ctx, folder)
    io.write_json(folder / "spec.json", raw)
    run = Path(raw["run_dir"])
    threads = "1" if ctx.smoke else "4"
    with rec.guarded(NAMES[0]):
        _step(ctx, [sys.executable, "-m", "hwsweep.run.launch", str(folder / "spec.json"), "--threads", threads],
              folder / "train.log")  # fmt: skip
        record = json.loads((run / "train.json").read_text())
        p = spec.plan
        rec.row(NAMES[0], "pass", f"**{STEPS} steps** on {';'.join(record['provenance']['devices'])}", "finishes",
                detail=f"{spec.recipe.model.name} width {spec.recipe.model.width}, global batch {p.global_batch} = "
                       f"{p.micro_batch} x {p.accumulation}, {p.precision}; startup {record['startup_seconds']:.1f} s")  # fmt: skip
    if not (run / "train.json").exists():
        for name in NAMES[1:]:
            rec.row(name, "skipped", detail="the training run did not finish")
        return
    with rec.guarded(NAMES[1]):
        _step(ctx, [sys.executable, "-m", "hwsweep.run.evaluate", str(folder / "spec.json"), "--threads", threads],
              folder / "evaluate.log")  # fmt: skip
        evaluated = json.loads((run / "eval.json").read_text())
        ok = evaluated.get("device") == ctx.accelerator
        metrics = ", ".join(f"{k} {v:.3f}" for k, v in evaluated["metrics"].items() if isinstance(v, float))
        rec.row(
            NAMES[1],
            "pass" if ok else "fail",
            f"**{evaluated.get('device')}**",
            f"eval.json device: {ctx.accelerator}",
            detail=f"{evaluated['eval_seconds']:.1f} s; {metrics}",
        )
    with rec.guarded(NAMES[2]):
        # The estimate counts every segment ACT may run; the record, the segments each step ran (issue 32): with
        # ACT the estimate is an upper bound, at most halt_max_steps times what a step that halts at once spends.
        planned = estimate.step_flops(spec.recipe, spec.plan)
        counted = record["flops_per_step"]
        ratio, most = planned / counted, spec.recipe.model.halt_max_steps
        act = spec.recipe.model.act_mode == "act"
        ok = 1 - FLOPS_TOLERANCE <= ratio <= (most if act else 1 + FLOPS_TOLERANCE)
        goal = f"1 to {most} (ACT: estimate at the most segments)" if act else f"within +-{FLOPS_TOLERANCE:.0%}"
        segments = (record["curves"].get("segments_per_sample") or {}).get("values") or []
        rec.row(NAMES[2], "pass" if ok else "fail", f"**{ratio:.4f}** ({planned:.4g} / {counted:.4g})", goal,
                round(ratio, 5), "estimate: hwsweep.plan.estimate.step_flops; record: flops_per_step, the FLOPs the "
                f"segments run spent (mean segments per sample {statistics.fmean(segments) if segments else 'n/a'})")  # fmt: skip
    with rec.guarded(NAMES[3]):
        planned = estimate.estimate_run(spec, {}, {})
        steady = record["step_seconds"][:-1]  # the last step's time holds the periodic evaluation (eval_every)
        measured = statistics.median(steady) if steady else None
        if measured is None or planned["seconds_per_step"] is None:
            rec.row(NAMES[3], "skipped", detail="no steady step measured, or no estimate (no catalog peak)")
        else:
            ratio = planned["seconds_per_step"] / measured
            rec.row(NAMES[3], "info", f"**{ratio:.2f}** ({planned['seconds_per_step']:.3g} / {measured:.3g} s)",
                    "reported (the estimate assumes the catalog's MFU)", round(ratio, 4),
                    f"assumed MFU {planned['mfu']}; measured MFU {record['mfu']}")  # fmt: skip


def _step(ctx, cmd: list[str], log: Path) -> None:
    with open(log, "w") as out:
        proc = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ctx.work, timeout=max(10.0, ctx.left() - 5)
        )
    if proc.returncode:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        print("\n".join(tail), file=sys.stderr)
        raise RuntimeError(f"{' '.join(cmd[1:4])} exited {proc.returncode}: {' | '.join(tail)[-300:]}")
