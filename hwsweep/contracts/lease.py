"""One live writer per run folder: the lease a train attempt holds on its run while it runs.

Each attempt of a train job (hwsweep.run.preempt) writes lease.json into the run's folder before it starts the
trainer and removes it when the trainer has ended: host, pid (and the process's start time, so a reused pid is
not taken for it), the SLURM job it runs in, the attempt, and the snakemake that scheduled it. Whoever finds a
lease asks whether its holder still lives, in the strongest words it has:

- a SLURM job: the controller's state of that job (a requeued or pending job is alive: it comes back to the
  same folder); a job the controller no longer knows has ended; where no SLURM is (a sweep copied off its
  cluster), as a process below;
- a process on this machine: its pid with the same start time;
- a process on another machine, outside SLURM: the lease's heartbeat (its modification time, renewed every
  HEARTBEAT_S seconds while the holder lives).

A lease left behind by a holder that died (kill -9, a lost node) is taken over by the next attempt. An attempt
in the same SLURM job (requeued after a preemption) takes its own job's lease over too. Torch-free."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from hwsweep.contracts import io, scheduler
from hwsweep.contracts.host import process_start

LEASE_FILE = "lease.json"
LOCK_FILE = ".lease.lock"  # held only while a lease is read and written, so two attempts never both take it
SNAKEMAKE_ENV = "HWSWEEP_SNAKEMAKE"  # host:pid:start of the snakemake that scheduled the job (jobs inherit it)
HEARTBEAT_S = 30.0
DEAD_AFTER_S = 5 * HEARTBEAT_S  # a lease from another machine not renewed for this long: its holder is gone


class Held(RuntimeError):
    """The run is being written by a live holder: the message names it and what to do."""


@dataclass(frozen=True)
class Lease:
    host: str
    pid: int
    start: int | None  # the holder's start time in clock ticks since boot (/proc/PID/stat), None where unknown
    job: str | None  # SLURM_JOB_ID of the job the holder runs in
    attempt: int
    since: str
    snakemake: str | None  # host:pid:start of the snakemake that scheduled it ("" or None: unknown)

    def who(self) -> str:
        where = "this machine" if self.host == socket.gethostname() else self.host
        return f"SLURM job {self.job}" if self.job else f"pid {self.pid} on {where}"


def this_process(attempt: int, env: dict | None = None) -> Lease:
    env = os.environ if env is None else env
    return Lease(host=socket.gethostname(), pid=os.getpid(), start=process_start(os.getpid()),
                 job=env.get("SLURM_JOB_ID") or None, attempt=attempt, since=time.strftime("%Y-%m-%d %H:%M:%S %z"),
                 snakemake=env.get(SNAKEMAKE_ENV) or None)  # fmt: skip


def snakemake_mark(pid: int | None = None) -> str:
    """host:pid:start of a process (default: this one), the value of SNAKEMAKE_ENV a scheduling snakemake sets."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start(pid) or ''}"


def read(run_dir) -> Lease | None:
    """The run's lease, or None where there is none (or one too damaged to name a holder: nobody can wait for it)."""
    try:
        data = json.loads(Path(run_dir, LEASE_FILE).read_text())
        return Lease(**{k: data.get(k) for k in Lease.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return None


def _alive_here(pid: int, start: int | None) -> bool:
    return start is not None and process_start(pid) == start


def holder(lease: Lease, run_dir, job_state=scheduler.job_state) -> str | None:
    """How the lease's holder still lives ("SLURM job 123 (RUNNING)", "pid 42 on this machine"), or None if it
    is gone. A holder that cannot be asked about is taken as alive, and said so: two writers are worse than a
    wait."""
    if lease.job:
        try:
            state = job_state(lease.job)
            return f"{lease.who()} ({state})" if state in scheduler.LIVE else None
        except scheduler.NoCluster:
            pass  # no SLURM here (a sweep copied off its cluster): its process, or its heartbeat in this folder
        except scheduler.SchedulerError as e:
            if scheduler.FORGOTTEN in str(e):
                return None
            if lease.host != socket.gethostname():
                return f"{lease.who()} (SLURM cannot be asked: {e})"
    if lease.host == socket.gethostname():
        return lease.who() if _alive_here(lease.pid, lease.start) else None
    try:
        age = time.time() - Path(run_dir, LEASE_FILE).stat().st_mtime
    except OSError:
        return None
    return f"{lease.who()} (alive {age:.0f} s ago)" if age < DEAD_AFTER_S else None


@contextmanager
def _locked(run_dir):
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def acquire(run_dir, attempt: int, env: dict | None = None, job_state=scheduler.job_state) -> Lease:
    """Take the run's lease for this process; Held (one line: who writes the run, and what to do) if a live
    holder other than this process's own SLURM job has it."""
    mine = this_process(attempt, env)
    with _locked(run_dir):
        found = read(run_dir)
        if found is not None and not (mine.job and found.job == mine.job):
            alive = holder(found, run_dir, job_state)
            if alive is not None:
                fix = f"scancel {found.job}" if found.job else f"kill {found.pid} on {found.host}"
                raise Held(f"{run_dir} is being trained by {alive} since {found.since}; this attempt does not "
                           f"start a second writer: wait for it to end, or stop it ({fix})")  # fmt: skip
        io.write_text(Path(run_dir, LEASE_FILE), json.dumps(asdict(mine), indent=1, sort_keys=True) + "\n")
    return mine


def release(run_dir, lease: Lease) -> None:
    """Give the lease back, if it is still this holder's."""
    with _locked(run_dir):
        if read(run_dir) == lease:
            Path(run_dir, LEASE_FILE).unlink(missing_ok=True)


@contextmanager
def held(run_dir, attempt: int, env: dict | None = None):
    """The lease for the block's duration, renewed every HEARTBEAT_S seconds, given back at its end."""
    lease = acquire(run_dir, attempt, env)
    stop = threading.Event()

    def renew():
        while not stop.wait(HEARTBEAT_S):
            try:
                os.utime(Path(run_dir, LEASE_FILE))
            except OSError:
                pass  # gone or unreachable for a moment: the holder itself carries on

    beat = threading.Thread(target=renew, name="hwsweep-lease", daemon=True)
    beat.start()
    try:
        yield lease
    finally:
        stop.set()
        release(run_dir, lease)
