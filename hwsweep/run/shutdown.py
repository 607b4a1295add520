"""The end of a rank's process: leave the process group so that its worker threads are joined, and where they
outlive it, end the process without the interpreter's teardown.

Why: gloo's worker threads (ProcessGroupGloo's, named WORKER_THREAD) release each collective's work after the
waiting rank was told it is done, and releasing a tensor that was made in Python takes the GIL (torch drops the
tensor's Python object). Once the interpreter is finalizing, CPython before 3.14 ends a thread that takes the GIL
with pthread_exit; the unwinding meets torch's noexcept destructor and std::terminate aborts the process:
"terminate called without an active exception", SIGABRT, after a run that finished well. It takes a worker
descheduled between the two (a loaded machine) and a process group still alive when the interpreter tears down.

destroy_process_group joins those threads only when nothing else holds the group: `leave` has the reduction let go
of it first (DDP's wrapper, hwsweep.run.reduce). FSDP's hold is inside torch; `exit_after` ends a process whose
worker threads outlived the group with its exit handlers run and without the teardown.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import os
import sys
import threading
from pathlib import Path
from typing import Callable, NoReturn

import torch.distributed as dist

WORKER_THREAD = "pt_gloo_runloop"  # torch's name for ProcessGroupGloo's worker threads


def worker_threads() -> int:
    """How many of gloo's worker threads this process runs (0 where /proc does not say)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    count = 0
    for task in tasks:
        try:
            count += Path(f"/proc/self/task/{task}/comm").read_text().strip() == WORKER_THREAD
        except OSError:  # the thread ended meanwhile
            pass
    return count


def leave(reduction=None) -> None:
    """Destroy the process group, the reduction (run.wrap's, if any) having let go of it first: with no other
    holder, its worker threads are joined here, while the interpreter is whole."""
    if reduction is not None:
        reduction.release()
    dist.destroy_process_group()


def exit_after(main: Callable[[], int | None]) -> NoReturn:
    """Run `main` (the process's whole work) and end the process with its status, as sys.exit would, without
    collecting its garbage (cycles and all, the memory goes with the process). Where gloo's
    worker threads outlived the process group, the non-daemon threads are waited for and the exit handlers run
    (atexit: coverage, logging), then the process ends without the teardown in which such a thread aborts it."""
    try:
        code = main()
    except SystemExit as e:
        code = e.code
    except BaseException:
        if not worker_threads():
            raise
        sys.excepthook(*sys.exc_info())
        code = 1
    if not worker_threads() or multiprocessing.parent_process() is not None:  # forked: it ends with no teardown
        # The teardown's garbage collections walk every object torch (and TorchDynamo, which the optimizers
        # import) made, to free memory the ending process gives back anyway: 0.4-0.8 CPU-s a process. Frozen,
        # they are left out; the exit handlers and the modules' teardown run as ever.
        gc.freeze()
        sys.exit(code)
    if code is not None and not isinstance(code, int):  # sys.exit("message"): the message, status 1
        print(code, file=sys.stderr)
        code = 1
    wait_for_threads = getattr(threading, "_shutdown", None)  # what the interpreter's exit does first
    if wait_for_threads is not None:
        wait_for_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # None, or closed
            pass
    os._exit(code or 0)
