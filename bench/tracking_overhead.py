"""What feeding a tracker costs a training step: the built-in trainer's loop (hwsweep.run.train's, on
hwsweep.runtime) on the local default recipe (config/config.yaml, width 64, cpu1), at the default logging
interval (recipe.log_every), for each backend in its local/offline mode (TensorBoard event files, MLflow's
file store, W&B offline); issue 22's goal: at most 1% of step time. Two measurements, one process per run:

- The accounting (--account-steps): a run as a sweep runs it, the tracker attached at every step, and the CPU
  time that tracking spends per step counted where it is spent: the training thread's wall time in the
  runtime's tracker calls, every other thread of the run's process (the feed to the tracker's process; less
  what they spend in a run with no tracking) and the processes under it (the tracker's, where the clients
  run, and W&B's service); the tracker's start and first rows are one-offs, left out. It resolves a
  hundredth of a percent in a minute. What the run's process spends is taken from training; the tracker's
  process runs on a CPU the run left spare, where there is one (the local default's cpu1 on 2 CPUs).
- The wall clock (--steps): the tracker attached and detached in alternating windows of --window steps of
  one run, so on- and off-steps share the machine's state; on over off, overall and paired by window (the
  geometric mean of each off window's ratio to the next on window, with its 95% t interval: whether the run
  resolved 1%), and the same in the process's CPU time. --control adds a run that attaches no tracker in any
  window: the noise floor. On a shared VM, windows move by 10% and more, so resolving 1% takes tens of
  thousands of steps (docs/benchmarks.md).

    .venv/bin/python bench/tracking_overhead.py --control --window 10       # both, all three trackers
    .venv/bin/python bench/tracking_overhead.py --steps 0                   # the accounting alone (4 minutes)
    .venv/bin/python bench/tracking_overhead.py --account-steps 0 --steps 12000 --window 10   # 28 minutes
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
# The first off and on windows are left out: the allocator and caches warm up, and a tracker's first rows
# are one-offs (W&B's first run.log takes about 0.1 s of CPU, 0.2% of a 1,000-step run's on-time).
WARMUP_WINDOWS = 2


def spec_file(folder: Path, backend: str, steps: int) -> Path:
    from hwsweep.contracts import io
    from hwsweep.contracts.spec import TRACKING_FILE
    from hwsweep.plan.config import resolve

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["recipe"]["schedule"]["steps"] = steps
    # A checkpoint at the end only: every 200 steps they all fell in the same kind of window (200 / 10 is even).
    cfg["recipe"]["checkpoint_every"] = steps
    if backend:  # None: no tracking at all (the accounting's baseline)
        cfg["tracking"] = {"backends": [backend], "wandb": {"project": "hwsweep-bench", "mode": "offline"}}
    matrix = resolve(cfg, config_dir=REPO / "config")
    run_dir = folder / "results/width/width-64/cpu1/seed0"
    path = folder / f"{backend or 'untracked'}.json"
    io.write_json(path, matrix.spec("width", "width-64", "cpu1", 0).to_dict() | {"run_dir": str(run_dir)})
    io.write_json(run_dir / TRACKING_FILE, matrix.tracking.to_dict())  # what the workflow's tracking rule writes
    return path


def training(spec: str):
    """The built-in trainer's loop on `spec` in this process: (run, step) before each step's work."""
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
    for step in run.steps():
        yield run, step
        for batch in run.accumulate(loader):
            with run.autocast():
                loss = net(*batch)
            run.backward(loss)
        run.optimizer_step(optimizer, scheduler, grad_clip=recipe.optimizer.grad_clip)


def measure(spec: str, window: int, control: bool = False) -> dict:
    """One run (this process): the trainer's loop with the tracker attached in odd windows only (control: in
    none, so on/off differ by chance alone: the noise floor)."""
    tracker, opened, on, cpu, windows = None, 0.0, [], [], []
    for run, step in training(spec):
        cpu.append(time.process_time())  # every thread of this process: training's and the trackers' CPU
        # Windows are offset by half a window from the log steps (each window's last step, when --window is
        # log_every): a row queued at an on window's log step is sent by the tracker's thread while that window
        # goes on. Aligned, it was sent during the next, off, window, which then carried the tracker's cost:
        # on/off read 0.994 for MLflow over 15,000 steps, against the A/A control's 1.0005.
        windows.append((step + window // 2) // window)
        if tracker is None:  # run.steps() started it: wait until it is open before anything is timed
            tracker = run.tracker
            t0 = time.perf_counter()
            tracker.drain(timeout=600)
            opened = time.perf_counter() - t0
            busy0 = tracker.busy_seconds
        on.append(windows[-1] % 2 == 1)
        run.tracker = tracker if on[-1] and not control else None
    run.tracker = tracker
    seconds = run.history["step_seconds"]  # the first step (startup) is not in it
    flags = on[1:]
    skip = WARMUP_WINDOWS * window - window // 2  # the first (half) window and the next
    on_s = [s for s, f in zip(seconds[skip:], flags[skip:]) if f]
    off_s = [s for s, f in zip(seconds[skip:], flags[skip:]) if not f]
    cpu.append(time.process_time())
    cpu_step = [b - a for a, b in zip(cpu, cpu[1:])]  # step i: from its start to the next step's start
    on_cpu = [c for c, f in zip(cpu_step[skip + 1 :], on[skip + 1 :]) if f]
    off_cpu = [c for c, f in zip(cpu_step[skip + 1 :], on[skip + 1 :]) if not f]
    tracker.drain(timeout=600)
    busy = tracker.busy_seconds - busy0  # the clients' CPU (tracker's process) over every step it was attached to
    status = tracker.close()
    wall, cpu_pairs = pairs(seconds[skip:], windows[1:][skip:]), pairs(cpu_step[skip + 1 :], windows[skip + 1 :])
    return {"on_ms": 1e3 * sum(on_s) / len(on_s), "off_ms": 1e3 * sum(off_s) / len(off_s), "open_s": opened,
            "ratio": ratio_ci(wall), "cpu_ratio": ratio_ci(cpu_pairs), "pairs": len(wall),
            "on_steps": len(on_s), "off_steps": len(off_s), "status": status,
            "clients_ms_per_step": 1e3 * busy / max(1, sum(on)),
            "cpu_on_ms": 1e3 * sum(on_cpu) / len(on_cpu), "cpu_off_ms": 1e3 * sum(off_cpu) / len(off_cpu)}  # fmt: skip


def account(spec: str) -> dict:
    """One run (this process) as a sweep runs it, the tracker attached at every step: the CPU that tracking
    costs per step, counted where it is spent. The training thread's share is the wall time of the runtime's
    tracker calls (a log step's row built and queued); the other Python threads' CPU (the feed to the tracker's
    process and the reader of its answers; the progress bar's monitor runs in the baseline too, a run with no
    tracking, whose figure is subtracted); the processes under this one (the tracker's, where the clients run
    and the system is sampled, and W&B's service). The process's CPU in no listed thread (torch's own threads,
    threads that ended) is returned apart: what tracking adds there shows as a difference from the baseline's."""
    import psutil

    def timed(method):
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                calls[0] += time.perf_counter() - t0

        return call

    me, calls = psutil.Process(), [0.0]  # calls: the training thread's seconds in the runtime's tracker calls

    def threads() -> dict[str, float]:
        """CPU seconds of each other live thread, by name (where the other threads' CPU goes)."""
        out = {}
        for t in threading.enumerate():
            if t is not threading.main_thread() and t.ident is not None:
                with contextlib.suppress(OSError):
                    out[t.name] = out.get(t.name, 0.0) + time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        return out

    def children() -> float:
        return sum(sum(c.cpu_times()[:2]) for c in me.children(recursive=True) if c.is_running())

    # Counted from the third log step on: the tracker's start (client import, run made) and its first rows
    # (W&B's first run.log alone takes about 0.1 s of CPU) are one-off costs, apart from a step's.
    warm = None
    for run, step in training(spec):
        if warm is None:
            run._track_step, run._send_tracked = timed(run._track_step), timed(run._send_tracked)
            warm = step + 2 * run.recipe.log_every + 1
        if step == warm:
            if run.tracker is not None:
                run.tracker.drain(timeout=600)
            start = (time.process_time(), time.thread_time(), children(), calls[0])
            named, first = threads(), len(run.history["step_seconds"])
    if run.tracker is not None:
        run.tracker.drain(timeout=600)  # what is queued reaches the tracker, and is counted
    process, thread, child, in_calls = (b - a for a, b in zip(start, (time.process_time(), time.thread_time(),
                                                                     children(), calls[0])))  # fmt: skip
    seconds = run.history["step_seconds"][first:]
    n = len(seconds)
    by_thread = {k: 1e3 * (v - named.get(k, 0.0)) / n for k, v in threads().items()}
    status = run.tracker.close() if run.tracker is not None else None
    listed = sum(by_thread.values())
    return {"step_ms": 1e3 * sum(seconds) / n, "steps": n, "training_ms": 1e3 * in_calls / n, "threads_ms": listed,
            "unlisted_ms": 1e3 * (process - thread) / n - listed, "children_ms": 1e3 * child / n, "status": status,
            "by_thread": dict(sorted(by_thread.items(), key=lambda kv: -kv[1])[:4])}  # fmt: skip


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
    parser.add_argument("--steps", type=int, default=400, help="steps of each on/off run (0: none)")
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--account-steps", type=int, default=1000, help="steps of each accounting run (0: none)")
    parser.add_argument("--control", action="store_true", help="first the same run with no tracker attached in any window")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one run, in a fresh process
    parser.add_argument("--account", action="store_true", help=argparse.SUPPRESS)  # internal: the accounting run
    args = parser.parse_args()
    if 0 < args.account_steps < 100:  # its first 21 steps (start, first rows) are left out
        parser.error("--account-steps: 0 (none) or at least 100")
    if args.measure:
        result = account(args.measure) if args.account else measure(args.measure, args.window, args.control)
        print(json.dumps(result))
        return
    print(f"local default recipe (width 64, cpu1), {args.steps} steps, log_every 10, windows of {args.window} steps")
    env = os.environ | {"OMP_NUM_THREADS": "1", "MLFLOW_ALLOW_FILE_STORE": "true"}

    def one(backend: str | None, steps: int, *flags: str) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            spec = spec_file(Path(tmp), backend, steps)
            out = subprocess.run([sys.executable, __file__, "--measure", str(spec), "--window", str(args.window), *flags],
                                 env=env, check=True, capture_output=True, text=True).stdout  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])

    # The accounting: CPU spent on tracking per step, each tracker attached throughout, against no tracking.
    base = one(None, args.account_steps, "--account") if args.account_steps else None
    if base:
        print(f"accounting baseline (no tracking): step {base['step_ms']:.2f} ms, other Python threads "
              f"{base['threads_ms']:.3f} ms per step, CPU in no listed thread {base['unlisted_ms']:.3f} ms", flush=True)  # fmt: skip
    for backend in args.backends if base else []:
        a = one(backend, args.account_steps, "--account")
        threads = a["threads_ms"] - base["threads_ms"]
        cost = a["training_ms"] + threads + a["children_ms"]
        print(f"{backend}: tracking CPU {cost:.3f} ms per step = {100 * cost / a['step_ms']:.2f}% of a "
              f"{a['step_ms']:.2f} ms step (training thread {a['training_ms']:.3f} ms, tracker threads "
              f"{threads:.3f} ms, tracker's processes {a['children_ms']:.3f} ms; CPU in no listed thread "
              f"{a['unlisted_ms']:.3f} ms; {a['steps']} steps; "
              f"busiest threads {', '.join(f'{k} {v:.3f} ms' for k, v in a['by_thread'].items())}; "
              f"{a['status']['backends']})", flush=True)  # fmt: skip
    # The wall clock: on against off in alternating windows of one run.
    for backend in ((["control"] if args.control else []) + args.backends) if args.steps else []:
        control = backend == "control"
        r = one("tensorboard" if control else backend, args.steps, *(["--control"] if control else []))
        (w, w_low, w_high), (c, c_low, c_high) = r["ratio"], r["cpu_ratio"]
        print(f"{backend}: step {r['on_ms']:.2f} ms on / {r['off_ms']:.2f} ms off = {r['on_ms'] / r['off_ms']:.4f}, "
              f"paired by window {w:.4f} (95% CI {w_low:.4f}-{w_high:.4f}, {r['pairs']} pairs); "
              f"process CPU per step {r['cpu_on_ms']:.2f} ms on / {r['cpu_off_ms']:.2f} ms off = "
              f"{r['cpu_on_ms'] / r['cpu_off_ms']:.4f}, paired {c:.4f} (95% CI {c_low:.4f}-{c_high:.4f}); "
              f"the clients' CPU {r['clients_ms_per_step']:.3f} ms per tracked step "
              f"({r['on_steps']} / {r['off_steps']} steps; tracker opened in {r['open_s']:.1f} s; "
              f"{r['status']['backends']})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
