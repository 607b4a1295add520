"""`hwsweep stop SUITE/VARIANT/HARDWARE/seedN ...`: stop runs for good, as `scancel` alone cannot (snakemake retries
a cancelled job from its checkpoint). Each run gets its mark (hwsweep.contracts.stopped: who, when), then its train
job is cancelled where SLURM has one (pending, running or requeued); every later attempt refuses to start, in one
line, until `hwsweep stop --undo RUN`. The names are those `snakemake status` shows, checked against the config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hwsweep.contracts import lease, scheduler, stopped
from hwsweep.contracts.spec import RUN_DIR
from hwsweep.plan.config import DEFAULT_CONFIG, ConfigError, load_or_exit, resolve

RESULTS = RUN_DIR.split("{", 1)[0]  # results/: a run's name is its folder below it


def run_names(matrix) -> dict[str, object]:
    """SUITE/VARIANT/HARDWARE/seedN of each run of the config: its spec."""
    specs = (matrix.spec(r.suite, r.variant, r.hardware, r.seed) for r in matrix.runs())
    return {Path(spec.run_dir).relative_to(RESULTS).as_posix(): spec for spec in specs}


def train_jobs(spec) -> list[str]:
    """The run's train jobs SLURM still has (pending, running, requeued; its group job with the evaluation), as this
    folder's: none without SLURM."""
    try:
        jobs = scheduler.my_jobs()
    except scheduler.SchedulerError:  # no SLURM client or cluster: nothing to cancel
        return []
    comments, here = scheduler.job_comments("train", spec), os.path.realpath(".")
    return [j.id for j in jobs if j.comment in comments and j.state in scheduler.LIVE
            and (not j.workdir or os.path.realpath(j.workdir) == here)]  # fmt: skip


def cancel(jobs: list[str]) -> str:
    """scancel JOBS; "" when done, else why not."""
    try:
        proc = subprocess.run(["scancel", *jobs], capture_output=True, text=True, timeout=scheduler.TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return "" if proc.returncode == 0 else (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}"


def stop(name: str, spec) -> int:
    if stopped.read(spec.run_dir) is not None:
        print(f"{name}: already stopped ({stopped.read(spec.run_dir).said()})")
        return 0
    stopped.write(spec.run_dir, name)  # first: an attempt that starts meanwhile refuses
    jobs = train_jobs(spec)
    why = cancel(jobs) if jobs else ""
    if jobs and not why:
        mark = stopped.write(spec.run_dir, name, tuple(jobs))
        print(f"{name}: stopped for good ({mark.said()}); cancelled SLURM job {', '.join(jobs)}")
        return 0
    held = lease.read(spec.run_dir)
    live = held is not None and lease.holder(held, spec.run_dir) is not None
    if why:
        print(f"{name}: marked stopped, but scancel {' '.join(jobs)} failed ({why}); its next attempt refuses",
              file=sys.stderr)  # fmt: skip
        return 1
    if live and not held.job:  # a local run: its process is the user's to end (the attempt ends as a preemption)
        print(f"{name}: marked stopped; its attempt still runs as pid {held.pid} on {held.host} (stop it with "
              f"kill {held.pid}, or let it end): no later attempt starts")  # fmt: skip
        return 0
    print(f"{name}: stopped for good; no job of it runs now, no later attempt starts")
    return 0


def main(args) -> int:
    try:
        names = run_names(resolve(load_or_exit(args.configfile), config_dir=args.configfile.parent))
    except ConfigError as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        return 1
    unknown = [r for r in args.runs if r.strip("/") not in names]
    if unknown:
        print(f"hwsweep stop: not a run of {args.configfile}: {', '.join(unknown)} (a run is named "
              "SUITE/VARIANT/HARDWARE/seedN, as `snakemake status` shows it)", file=sys.stderr)  # fmt: skip
        return 2
    code = 0
    for name in dict.fromkeys(r.strip("/") for r in args.runs):
        spec = names[name]
        if args.undo:
            had = stopped.remove(spec.run_dir)
            print(f"{name}: {'may run again' if had else 'was not stopped'}; the next snakemake run starts it")
        else:
            code = max(code, stop(name, spec))
    return code


def add_parser(sub) -> None:
    s = sub.add_parser("stop", help="stop runs for good (their SLURM jobs cancelled, no retry, no requeue)",
                       description=__doc__)  # fmt: skip
    s.add_argument("runs", nargs="+", metavar="SUITE/VARIANT/HARDWARE/seedN")
    s.add_argument("--undo", action="store_true", help="let the runs run again (their stopped.json removed)")
    s.add_argument("--configfile", type=Path, default=DEFAULT_CONFIG)
    s.set_defaults(handler=main)
