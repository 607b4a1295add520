"""What forking the built-in trainer's workers from torchrun's agent saves (hwsweep.run.torchrun): the CPU seconds
of the whole run (agent and workers, their children's included) and its wall seconds, for the same run of the
built-in trainer (config/config.yaml's recipe, a few steps, N CPU processes) with its workers forked
(`--start-method fork`, what hwsweep.run.launch starts on CPUs) and started anew (each a tethered `python -u -m`,
what it starts on GPUs and what it started before), alternating, in one run.

    .venv/bin/python bench/forked_workers.py [--repeats 5] [--world-sizes 2 4] [--steps 10]
"""

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from startup import hwsweep_run, setting  # noqa: E402

from hwsweep.run import launch, tether  # noqa: E402

TIMES = []  # (cpu, wall) of each run, appended by `timed`


def agent(workers: str):
    """hwsweep_run's `run`: torchrun's command, its agent hwsweep's (as hwsweep.run.launch starts it) and its
    workers `workers` ("forked" or "started"); the run's CPU seconds and wall seconds go to TIMES."""

    def timed(cmd: list[str], env: dict) -> str:
        program = cmd[cmd.index("-m"):]
        shape = cmd[1:cmd.index("-m")]  # --standalone --nnodes 1 --nproc_per_node N
        head = [sys.executable, "-m", "hwsweep.run.torchrun", *launch.AGENT_SIGNALS, *shape]
        if workers == "forked":
            cmd = [*head, "--start-method", "fork", *program]
        else:
            cmd = [*head, *tether.tethered([sys.executable, "-u", *program])]
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        TIMES.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall))
        return proc.stdout

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    print(f"{setting(args.repeats)}, {args.steps} steps")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.world_sizes:
            seen = {"forked": [], "started": []}
            for _ in range(args.repeats):  # alternating: a slow moment of the machine hits both
                for workers, times in seen.items():
                    hwsweep_run(Path(tmp), n, args.steps, run=agent(workers))
                    times.append(TIMES[-1])
            cpu = {w: statistics.median(c for c, _ in t) for w, t in seen.items()}
            wall = {w: statistics.median(s for _, s in t) for w, t in seen.items()}
            saved = cpu["started"] - cpu["forked"]
            print(f"world size {n}: forked {cpu['forked']:.2f} CPU-s, {wall['forked']:.2f} s; started "
                  f"{cpu['started']:.2f} CPU-s, {wall['started']:.2f} s; saved {saved:.2f} CPU-s ({saved / n:.2f} a "
                  f"worker), {wall['started'] - wall['forked']:.2f} s of wall time")  # fmt: skip


if __name__ == "__main__":
    main()
