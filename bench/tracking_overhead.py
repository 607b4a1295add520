"""What feeding a tracker costs a training step, tracker on against off in one run: the built-in trainer's loop
(hwsweep.run.train's, on hwsweep.runtime) on the local default recipe (config/config.yaml, width 64, cpu1), at
the default logging interval (recipe.log_every), for each backend in its local/offline mode (TensorBoard event
files, MLflow's file store, W&B offline). In one process per backend the tracker is attached and detached in
alternating windows of --window steps, so on- and off-steps share the machine's state (its load, caches,
clocks); the figure is the mean step time of on-windows over that of off-windows (issue 22's goal: at most
1.01), and the same paired by window (each off window with the on window after it: the geometric mean of their
ratios with its 95% t interval, which says whether the run resolved 1%). Beside it, the same ratio in this
process's CPU time per step (every thread: training's, the tracker's, TensorBoard's writer): what the trackers
take from training when the cores are saturated (W&B does its writing in its own service process, outside this
figure); and the tracker thread's CPU alone. The tracker is opened (its client imported, its run created)
before the first window: that one-off start is printed apart, as seconds on the tracker's thread, not counted
in step time.

    .venv/bin/python bench/tracking_overhead.py                  # all three, 400 steps, windows of 20
    .venv/bin/python bench/tracking_overhead.py --backends mlflow --steps 800
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
WARMUP_WINDOWS = 1  # the first window (allocator, caches) is left out


def spec_file(folder: Path, backend: str, steps: int) -> Path:
    from hwsweep.contracts import io
    from hwsweep.contracts.spec import TRACKING_FILE
    from hwsweep.plan.config import resolve

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["recipe"]["schedule"]["steps"] = steps
    cfg["tracking"] = {"backends": [backend], "wandb": {"project": "hwsweep-bench", "mode": "offline"}}
    matrix = resolve(cfg, config_dir=REPO / "config")
    run_dir = folder / "results/width/width-64/cpu1/seed0"
    path = folder / f"{backend}.json"
    io.write_json(path, matrix.spec("width", "width-64", "cpu1", 0).to_dict() | {"run_dir": str(run_dir)})
    io.write_json(run_dir / TRACKING_FILE, matrix.tracking.to_dict())  # what the workflow's tracking rule writes
    return path


def measure(spec: str, window: int, control: bool = False) -> dict:
    """One run (this process): the trainer's loop with the tracker attached in odd windows only (control: in
    none, so on/off differ by chance alone: the noise floor)."""
    import torch
    from torch.utils.data import TensorDataset

    from hwsweep.models import families
    from hwsweep.run import runtime
    from hwsweep.run.train import lr_factor

    run = runtime.init(spec, node_threads=1)
    recipe = run.recipe
    fam = families.torch_side(recipe.model.name)
    train, _ = fam.tables(recipe)
    loader = run.loader(TensorDataset(*train))
    model = fam.build(recipe)
    run.count_flops(model, loader.peek())
    net = run.wrap(model)
    optimizer = run.adamw(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, recipe.schedule))
    run.resume(model=model, optimizer=optimizer, scheduler=scheduler)
    tracker, opened, on, cpu, windows = None, 0.0, [], [], []
    for step in run.steps():
        cpu.append(time.process_time())  # every thread of this process: training's and the trackers' CPU
        windows.append(step // window)
        if tracker is None:  # run.steps() started it: wait until it is open before anything is timed
            tracker = run.tracker
            t0 = time.perf_counter()
            tracker.drain(timeout=600)
            opened = time.perf_counter() - t0
            busy0 = tracker.busy_seconds
        on.append((step // window) % 2 == 1)
        run.tracker = tracker if on[-1] and not control else None
        for batch in run.accumulate(loader):
            with run.autocast():
                loss = net(*batch)
            run.backward(loss)
        run.optimizer_step(optimizer, scheduler, grad_clip=recipe.optimizer.grad_clip)
    run.tracker = tracker
    seconds = run.history["step_seconds"]  # the first step (startup) is not in it
    flags = on[1:]
    skip = WARMUP_WINDOWS * window
    on_s = [s for s, f in zip(seconds[skip:], flags[skip:]) if f]
    off_s = [s for s, f in zip(seconds[skip:], flags[skip:]) if not f]
    cpu.append(time.process_time())
    cpu_step = [b - a for a, b in zip(cpu, cpu[1:])]  # step i: from its start to the next step's start
    on_cpu = [c for c, f in zip(cpu_step[skip + 1 :], on[skip + 1 :]) if f]
    off_cpu = [c for c, f in zip(cpu_step[skip + 1 :], on[skip + 1 :]) if not f]
    tracker.drain(timeout=600)
    busy = tracker.busy_seconds - busy0  # the tracker thread's CPU over every step it was attached to
    status = tracker.close()
    wall, cpu_pairs = pairs(seconds[skip:], windows[1:][skip:]), pairs(cpu_step[skip + 1 :], windows[skip + 1 :])
    return {"on_ms": 1e3 * sum(on_s) / len(on_s), "off_ms": 1e3 * sum(off_s) / len(off_s), "open_s": opened,
            "ratio": ratio_ci(wall), "cpu_ratio": ratio_ci(cpu_pairs), "pairs": len(wall),
            "on_steps": len(on_s), "off_steps": len(off_s), "status": status,
            "thread_ms_per_step": 1e3 * busy / max(1, sum(on)),
            "cpu_on_ms": 1e3 * sum(on_cpu) / len(on_cpu), "cpu_off_ms": 1e3 * sum(off_cpu) / len(off_cpu)}  # fmt: skip


def pairs(seconds: list[float], windows: list[int]) -> list[tuple[float, float]]:
    """Mean step seconds of each off window and the on window after it (windows 2k, 2k + 1): neighbours share
    the machine's state, so their ratio cancels its slow drifts."""
    by: dict[int, list[float]] = {}
    for s, w in zip(seconds, windows):
        by.setdefault(w, []).append(s)
    return [(sum(by[w]) / len(by[w]), sum(by[w + 1]) / len(by[w + 1])) for w in sorted(by) if w % 2 == 0 and w + 1 in by]


def ratio_ci(pairs: list[tuple[float, float]]) -> list[float]:
    """On over off: the geometric mean of the pairs' ratios, with its 95% t interval (hwsweep's paired speedup)."""
    from hwsweep.analysis.stats import speedup_ci

    off, on = ([p[i] for p in pairs] for i in (0, 1))
    return [float(x[0]) for x in speedup_ci([on], [off], 0.95)]


def main() -> None:
    from hwsweep.contracts.tracking import BACKENDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--control", action="store_true", help="first the same run with no tracker attached in any window")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one run, in a fresh process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.window, args.control)))
        return
    print(f"local default recipe (width 64, cpu1), {args.steps} steps, log_every 10, windows of {args.window} steps")
    env = os.environ | {"OMP_NUM_THREADS": "1", "MLFLOW_ALLOW_FILE_STORE": "true"}
    for backend in (["control"] if args.control else []) + args.backends:
        control = ["--control"] if backend == "control" else []
        with tempfile.TemporaryDirectory() as tmp:
            spec = spec_file(Path(tmp), "tensorboard" if control else backend, args.steps)
            out = subprocess.run([sys.executable, __file__, "--measure", str(spec), "--window", str(args.window), *control],
                                 env=env, check=True, capture_output=True, text=True).stdout  # fmt: skip
        r = json.loads(out.strip().splitlines()[-1])
        (w, w_low, w_high), (c, c_low, c_high) = r["ratio"], r["cpu_ratio"]
        print(f"{backend}: step {r['on_ms']:.2f} ms on / {r['off_ms']:.2f} ms off = {r['on_ms'] / r['off_ms']:.4f}, "
              f"paired by window {w:.4f} (95% CI {w_low:.4f}-{w_high:.4f}, {r['pairs']} pairs); "
              f"process CPU per step {r['cpu_on_ms']:.2f} ms on / {r['cpu_off_ms']:.2f} ms off = "
              f"{r['cpu_on_ms'] / r['cpu_off_ms']:.4f}, paired {c:.4f} (95% CI {c_low:.4f}-{c_high:.4f}); "
              f"tracker thread CPU {r['thread_ms_per_step']:.3f} ms per tracked step "
              f"({r['on_steps']} / {r['off_steps']} steps; tracker opened in {r['open_s']:.1f} s; "
              f"{r['status']['backends']}, dropped {r['status']['dropped']})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
