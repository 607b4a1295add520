"""Processes that die with their parent, so killing the workflow leaves no training behind.

torchrun starts its workers in sessions of their own: a killed agent (snakemake's process group
killed with SIGKILL) would leave them training or waiting in a collective. Every process between
the job and the training code is therefore tethered with Linux's PR_SET_PDEATHSIG: the launcher's
child (torchrun's agent) and each worker, which torchrun starts as

    python -m hwsweep.tether PROGRAM ARGS...

(this module sets the tether, then execs PROGRAM; the tether survives exec). The signal is SIGKILL:
a worker whose agent is gone cannot finish a collective with its peers, and a checkpoint exists
from the last `checkpoint_every` steps."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies. `parent`: the pid the parent
    had; if it is already gone (reparented before the tether was set), exit now."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
    except OSError:
        return  # not Linux: no tether
    if parent is not None and os.getppid() != parent:
        os._exit(128 + int(sig))


def preexec(sig: int = signal.SIGKILL):
    """A Popen preexec_fn tethering the child to the calling process."""
    parent = os.getpid()
    return lambda: die_with_parent(sig, parent)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        sys.exit("usage: python -m hwsweep.tether PROGRAM [ARGS...]")
    parent = os.getppid()
    if parent == 1:
        sys.exit(f"hwsweep.tether: the parent of {argv[0]} is already gone; not starting it")
    die_with_parent(signal.SIGKILL, parent)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
