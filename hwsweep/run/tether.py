"""Processes that die with their parent, so killing the workflow leaves no training behind.

torchrun starts its workers in sessions of their own: a killed agent (snakemake's process group
killed with SIGKILL) would leave them training or waiting in a collective. Every process between
the job and the training code is therefore tethered with Linux's PR_SET_PDEATHSIG: the launcher's
child (torchrun's agent) and each worker, which torchrun starts as

    python -m hwsweep.run.tether PROGRAM ARGS...

(this module sets the tether, then execs PROGRAM; the tether survives exec), or forks them from itself
(hwsweep.run.torchrun: the built-in trainer's workers, which set the same tether and are named WORKER_NAME, as
they keep the agent's command line). The signal is SIGKILL:
a worker whose agent is gone cannot finish a collective with its peers, and a checkpoint exists
from the last `checkpoint_every` steps. Snakemake killed on its own (its job's shell survives it) is
noticed by polling: `stop_when_workflow_ends`."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
# The stop signals hwsweep's launcher has torchrun's agent ignore (it never passes them on: SLURM signals every
# process of a job step, and locally the launcher signals the workers itself); a worker handles them again.
AGENT_IGNORES = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2)

# A worker forked from torchrun's agent is named this and its local rank (the kernel's comm: ps -o comm, top, pgrep).
WORKER_NAME = "hwsweep-rank"


def tethered(program: list[str]) -> list[str]:
    """torchrun's target: every worker runs `program` tethered to torchrun's agent (this module)."""
    return ["-m", __name__, *program]


def _prctl(option: int, value) -> bool:
    """Linux's prctl(option, value) for this process; False where there is none (not Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, value)
    except OSError:
        return False
    return True


def name_process(name: str) -> None:
    """Give this process `name` (at most 15 bytes) where ps and top show it (Linux prctl PR_SET_NAME)."""
    _prctl(PR_SET_NAME, name.encode()[:15])


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies. `parent`: the pid the parent
    had; if it is already gone (reparented before the tether was set), exit now."""
    if not _prctl(PR_SET_PDEATHSIG, int(sig)):
        return  # not Linux: no tether
    if parent is not None and os.getppid() != parent:
        os._exit(128 + int(sig))


def preexec(sig: int = signal.SIGKILL):
    """A Popen preexec_fn tethering the child to the calling process."""
    parent = os.getpid()
    return lambda: die_with_parent(sig, parent)


def agent_preexec():
    """preexec() for torchrun's agent, which also ignores the stop signals (AGENT_IGNORES): hwsweep's
    launcher starts it with --signals-to-handle SIGQUIT, so it neither stops on them nor passes them on.
    Tethered with SIGKILL, as it ignores SIGTERM; its workers die with it."""
    tethered = preexec(signal.SIGKILL)

    def setup():
        tethered()
        for stop in AGENT_IGNORES:
            signal.signal(stop, signal.SIG_IGN)

    return setup


def workflow_process() -> int | None:
    """The snakemake process this job was started by (the nearest ancestor running snakemake), if any."""
    pid = os.getppid()
    while pid > 1:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if any(Path(a.decode(errors="replace")).name == "snakemake" for a in argv[:2]):
            return pid
        pid = parent
    return None


def stop_when_workflow_ends(child: subprocess.Popen, sig: int, every: float = 1.0) -> None:
    """Send `sig` to `child` once the snakemake that started this job is gone: snakemake killed alone
    leaves its job's shell and this process running (no PDEATHSIG reaches that far), and the run must
    not train on unseen. Nothing to watch outside snakemake."""
    workflow = workflow_process()
    if workflow is None:
        return

    def loop():
        while child.poll() is None:
            if not Path(f"/proc/{workflow}").exists():
                print(f"hwsweep: snakemake (pid {workflow}) is gone; stopping the run", file=sys.stderr, flush=True)
                try:
                    os.kill(child.pid, sig)
                except ProcessLookupError:
                    pass
                return
            time.sleep(every)

    threading.Thread(target=loop, daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        sys.exit("usage: python -m hwsweep.run.tether PROGRAM [ARGS...]")
    parent = os.getppid()
    if parent == 1:
        sys.exit(f"hwsweep.run.tether: the parent of {argv[0]} is already gone; not starting it")
    die_with_parent(signal.SIGKILL, parent)
    for sig in AGENT_IGNORES:  # inherited as ignored from torchrun's agent (agent_preexec): a worker handles them
        signal.signal(sig, signal.SIG_DFL)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
