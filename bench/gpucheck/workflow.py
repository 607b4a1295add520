"""bench/gpu_check.py's section workflow: config/config.yaml's recipe on this GPU (one device of it as the only
hardware entry), seeds 0 and 1, tracking: [tensorboard] with a system sample every second, through the real
workflow (the snakemake CLI on the repository's Snakefile: spec, the launcher, evaluate, aggregate).

The first H100 run (2026-11-26) gave snakemake 45 s, then 21 s, and it finished neither time, one run after the
other (timing: exclusive, one timing_slot). The rows check what runs, not how fast: the sweep runs with timing:
shared (the two seeds train side by side on the GPU), and the repeat of seed 0 starts as soon as the sweep has
written seed 0's spec.json, beside the sweep's own runs. A failure or a timeout puts the tail of snakemake's log
and of the job logs written last into gpu_check.log.

Rows: the sweep finishes (runs.csv holds both seeds); every record's provenance names this GPU and CUDA; the
tracker's system metrics from NVML (utilisation, memory, power of the run's GPU) are in each run's TensorBoard
event file, read back with TensorBoard's EventAccumulator; each run was evaluated on the device that trained it
(eval.json's device); and seed 0 trained again from its spec.json (`python -m hwsweep.run.launch`, in another
folder, no tracker) is bitwise equal to the sweep's (every loss in metrics.jsonl, every tensor of final.pt)
under the recipe's reproducibility: deterministic.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import yaml

from gpucheck import proc

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GPU_TAGS = ("system/gpu_utilisation_percent", "system/gpu_memory_gb", "system/gpu_power_w")
NAMES = ["the sweep finishes (2 seeds: train, evaluate, aggregate)", "provenance records the GPU",
         "NVML metrics in the TensorBoard event file", "evaluated on the device that trained",
         "deterministic repeat bitwise equal"]  # fmt: skip
CHECKS_S = 8  # kept for the rows read after the sweep (TensorBoard's event files, two checkpoints)
JOB_LOGS = 3  # the job logs written last whose tails go to gpu_check.log when the sweep fails


def _config(ctx) -> tuple[dict, str, str]:
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    suite = next(iter(cfg["suites"]))
    cfg["suites"] = {suite: {"description": cfg["suites"][suite].get("description", "")}}  # the recipe as it is
    name = "gpu1" if ctx.accelerator == "cuda" else "cpu1"
    cfg |= {"hardware": {name: ctx.hardware}, "baseline": name, "seeds": [0, 1], "timing": "shared",
            "tracking": {"backends": ["tensorboard"], "system_every": 1}}  # fmt: skip
    if ctx.smoke:
        cfg["recipe"]["schedule"] = {"steps": 20, "warmup_steps": 2}
        cfg["recipe"]["task"] |= {"train_size": 2000, "eval_size": 200}
    return cfg, suite, name


def _runs(folder: Path) -> dict[int, Path]:
    """seed -> the run's folder (where its spec.json is)."""
    return {
        int(p.parent.name.removeprefix("seed")): p.parent for p in sorted(folder.glob("results/**/seed*/spec.json"))
    }


def workflow(ctx) -> None:
    rec = ctx.rec
    rec.declare(NAMES)
    cfg, suite, hw_name = _config(ctx)
    folder = ctx.work / "sweep"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    cores = str(min(8, len(os.sched_getaffinity(0))))
    cmd = [str(BIN / "snakemake"), f"results/{suite}/comparison.csv", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(folder), "--configfile", str(folder / "config.yaml"), "--replace-workflow-config",
           "--cores", cores]  # fmt: skip
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    repeat = []  # the repeat of seed 0, once its spec.json exists

    def start_repeat() -> None:
        spec = _runs(folder).get(0)
        if not repeat and spec is not None:
            repeat.append(_start_repeat(ctx, folder, spec))

    with rec.guarded(NAMES[0]):
        print(f"workflow: snakemake started, {ctx.left():.0f} s left", flush=True)
        try:
            proc.run(cmd, ctx.work / "snakemake.log", max(10.0, ctx.left() - CHECKS_S), env=env, poll=start_repeat)
        except proc.Failed:
            _job_tails(folder)
            raise
        import csv

        with open(folder / "results" / suite / "runs.csv") as f:
            rows = list(csv.DictReader(f))
        seeds = sorted(int(r["seed"]) for r in rows)
        print(f"workflow: the sweep finished, {ctx.left():.0f} s left", flush=True)
        rec.row(NAMES[0], "pass" if seeds == [0, 1] else "fail", f"**{len(rows)} runs** (seeds {seeds})",
                "exit 0, both seeds in runs.csv", detail=f"{suite}/default on {hw_name}, timing: shared: "
                + "; ".join(f"seed {r['seed']}: train {float(r['train_seconds']):.1f} s, eval "
                            f"{float(r['eval_seconds']):.1f} s" for r in rows))  # fmt: skip
    runs = _runs(folder)
    if not all((p / "train.json").exists() for p in runs.values()) or not runs:
        for name in NAMES[1:]:
            rec.row(name, "skipped", detail="no finished run to read")
        for program, _ in repeat:
            program.stop()  # nothing to compare it with
        return
    with rec.guarded(NAMES[1]):
        _provenance(ctx, runs)
    with rec.guarded(NAMES[2]):
        _nvml(ctx, runs)
    with rec.guarded(NAMES[3]):
        _evaluated(ctx, runs)
    with rec.guarded(NAMES[4]):
        start_repeat()  # where the sweep's spec.json came too late for the poll
        _repeat(ctx, runs[0], *repeat[0])


def _job_tails(folder: Path) -> None:
    """The tails of the job logs (train, evaluate, aggregate) written last, into the section's output."""
    logs = sorted((p for p in folder.rglob("*.log") if p.is_file()), key=lambda p: p.stat().st_mtime)
    for log in logs[-JOB_LOGS:]:
        print(f"----- the last {proc.TAIL} lines of {log.relative_to(folder)} -----\n{proc.tail(log) or '(empty)'}\n"
              "-----", file=sys.stderr, flush=True)  # fmt: skip


def _provenance(ctx, runs: dict[int, Path]) -> None:
    seen, ok = [], True
    for seed, run in runs.items():
        prov = json.loads((run / "train.json").read_text())["provenance"]
        seen.append(f"seed {seed}: {';'.join(prov['devices'])}, CUDA {prov['cuda']}")
        named = all(ctx.device["name"] in d for d in prov["devices"])
        ok &= named and (prov["cuda"] is not None or ctx.accelerator != "cuda")
    goal = f"each record names {ctx.device['name']}"
    ctx.rec.row(NAMES[1], "pass" if ok else "fail", f"**{'yes' if ok else 'no'}**", goal, detail="; ".join(seen))


def _nvml(ctx, runs: dict[int, Path]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    counts, system = {}, set()
    for seed, run in runs.items():
        events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
        events.Reload()
        tags = events.Tags()["scalars"]
        system |= {t for t in tags if t.startswith("system/")}
        counts[seed] = {t: len(events.Scalars(t)) for t in GPU_TAGS if t in tags}
    found = all(len(c) == len(GPU_TAGS) and min(c.values()) > 0 for c in counts.values())
    shown = "; ".join(f"seed {s}: " + (", ".join(f"{t.split('/')[1]} x{n}" for t, n in c.items()) or "none")
                      for s, c in counts.items())  # fmt: skip
    if ctx.accelerator != "cuda":
        ctx.rec.row(NAMES[2], "info", "no GPU: none expected", ", ".join(GPU_TAGS),
                    detail=f"system series read back: {', '.join(sorted(system)) or 'none'}")  # fmt: skip
        return
    ctx.rec.row(NAMES[2], "pass" if found else "fail", f"**{'yes' if found else 'no'}** ({shown})", ", ".join(GPU_TAGS),
                detail=f"system series: {', '.join(sorted(system)) or 'none'}")  # fmt: skip


def _evaluated(ctx, runs: dict[int, Path]) -> None:
    devices = {seed: json.loads((run / "eval.json").read_text()).get("device") for seed, run in runs.items()}
    ok = all(d == ctx.accelerator for d in devices.values())
    ctx.rec.row(NAMES[3], "pass" if ok else "fail", f"**{', '.join(f'seed {s}: {d}' for s, d in devices.items())}**",
                f"eval.json device: {ctx.accelerator}", detail="the built-in evaluator's device (eval.json)")  # fmt: skip


def _start_repeat(ctx, folder: Path, run: Path) -> tuple[proc.Program, Path]:
    """Seed 0 trained again from a copy of its spec.json in another folder (no tracker): started; (the program,
    the repeat's run folder)."""
    again = ctx.work / "repeat"
    relative = run.relative_to(folder)
    (again / relative).mkdir(parents=True)
    shutil.copy2(run / "spec.json", again / relative / "spec.json")
    cmd = [sys.executable, "-m", "hwsweep.run.launch", str(relative / "spec.json"), "--threads", "1"]
    print(f"workflow: the repeat of seed 0 started, {ctx.left():.0f} s left", flush=True)
    return proc.Program(cmd, ctx.work / "repeat.log", cwd=again), again / relative


def _repeat(ctx, run: Path, program: proc.Program, again: Path) -> None:
    import torch

    program.finish(max(5.0, ctx.left() - 3))

    def losses(path: Path) -> list:
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        return [(x["step"], x["loss"]) for x in lines if "loss" in x and "step" in x]

    first, second = losses(run / "metrics.jsonl"), losses(again / "metrics.jsonl")
    a = torch.load(run / "final.pt", map_location="cpu", weights_only=False)["model"]
    b = torch.load(again / "final.pt", map_location="cpu", weights_only=False)["model"]
    differ = [k for k in a if k not in b or not torch.equal(a[k], b[k])]
    step = next((s for (s, x), (_, y) in zip(first, second) if x != y), None)
    ok = first == second and not differ and len(first) > 0
    shown = (f"**{'equal' if ok else 'not equal'}** ({len(first)} losses, {len(a)} tensors)" if ok else
             f"**not equal**: losses from step {step}, {len(differ)} of {len(a)} tensors differ")  # fmt: skip
    ctx.rec.row(NAMES[4], "pass" if ok else "fail", shown, "every loss and weight bitwise equal",
                detail="seed 0 again from its spec.json, python -m hwsweep.run.launch, reproducibility deterministic, "
                       "beside the sweep's runs")  # fmt: skip
