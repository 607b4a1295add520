"""How long a job of one hardware entry's shape would wait in the SLURM queue now: SLURM's own answer, from
`sbatch --test-only` (which schedules nothing), asked for the job a run's train job would be (partition, nodes,
one task per node, CPUs, memory, GRES per node, time limit).

The start time is SLURM's backfill estimate at this moment: it assumes every running job uses its whole time
limit, so a start moves earlier as jobs end early and later as jobs of higher priority arrive. A start further
than FAR_S is shown as such (the estimate that far out says little), and one SLURM cannot give is unknown.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime

from hwsweep.contracts.hardware import Hardware

FAR_S = 7 * 24 * 3600
TIMEOUT_S = 10.0  # a test-only submission runs the scheduler's placement: longer than a listing's 4 s
ANSWER = re.compile(r"Job \d+ to start at (\S+) using (\d+) processors on nodes (\S+) in partition (\S+)")


@dataclass(frozen=True)
class Wait:
    seconds: float | None  # None: SLURM gave no start time (refused, unknown, or no answer)
    note: str  # what the number is, or why there is none
    partition: str = ""
    nodes: str = ""

    @property
    def known(self) -> bool:
        return self.seconds is not None


def test_only_argv(hardware: Hardware, minutes: int) -> list[str]:
    """The `sbatch --test-only` a run's train job on `hardware` would be (workflow/rules/train.smk's resources)."""
    argv = ["sbatch", "--test-only", f"--nodes={hardware.nodes}", f"--ntasks={hardware.nodes}",
            f"--cpus-per-task={hardware.cpus_per_task}", f"--mem={hardware.mem_mb or 2000 * hardware.cpus_per_task}",
            f"--time={max(1, int(minutes))}", "--output=/dev/null", "--wrap=true"]  # fmt: skip
    argv += [f"--partition={hardware.partition}"] if hardware.partition else []
    argv += [f"--gres={hardware.slurm_gres}"] if hardware.slurm_gres else []
    return argv


def parse(text: str, now: datetime) -> Wait:
    """SLURM's answer (sbatch writes it to stderr) as a wait from `now`."""
    found = ANSWER.search(text)
    if not found:
        last = (text.strip().splitlines() or ["no answer"])[-1]
        return Wait(None, f"SLURM will not place it: {last.removeprefix('sbatch: error: ')}")
    when, _, nodes, partition = found.groups()
    try:
        start = datetime.fromisoformat(when)
    except ValueError:  # "Unknown" where the controller cannot say
        return Wait(None, f"SLURM gives no start time ({when})", partition, nodes)
    seconds = max(0.0, (start - now).total_seconds())
    if seconds > FAR_S:
        return Wait(seconds, f"starts {when} at the earliest: too far out for the estimate to mean much", partition, nodes)
    return Wait(seconds, "starts now" if seconds < 60 else f"SLURM's backfill estimate: starts {when}", partition, nodes)


def wait(hardware: Hardware, minutes: int, now: datetime | None = None, timeout: float = TIMEOUT_S) -> Wait:
    """SLURM's estimate of the wait of a job of this shape and time limit, never an exception."""
    if shutil.which("sbatch") is None:
        return Wait(None, "no SLURM client here (sbatch not on PATH)")
    now = now or datetime.now()
    try:
        proc = subprocess.run(test_only_argv(hardware, minutes), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Wait(None, f"no answer from the SLURM controller within {timeout:g} s")
    except OSError as e:
        return Wait(None, f"sbatch could not run: {e}")
    return parse(proc.stderr + proc.stdout, now)
