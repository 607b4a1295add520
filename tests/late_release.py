"""Helper for tests/run/test_shutdown.py, run under torchrun (2 ranks, gloo): a rank's exit while gloo's worker thread
still holds a collective's tensor made in Python, as a loaded machine leaves it now and then.

Rank 1 starts an all-reduce of such a tensor and drops its own references: the worker thread releases the tensor,
which takes the GIL, once rank 0 joins. Rank 1 leaves the process group the way the runtime does
(hwsweep.run.shutdown.leave, its DDP reduction letting go of the group first) and exits. Its last two exit handlers
note the exit in argv[1] (rank 0 joins on seeing it, or after WAIT seconds) and hold the GIL for HOLD seconds in a
C call, as a busy interpreter holds it past a waiting thread's turn; in the teardown that follows, an object's
__del__ lets go of it. A worker thread that outlived the group takes it there and the process aborts ("terminate
called without an active exception"); one that `leave` joined had released the tensor before. Each rank prints
how many worker threads it still runs after leaving.
"""

import atexit
import ctypes
import os
import sys
import time
from pathlib import Path

NOTE, WAIT, HOLD = Path(sys.argv[1]), 3.0, 2
RANK = int(os.environ["RANK"])
if RANK == 1:  # registered before anything else, so they run last, in this order: note, hold
    atexit.register(ctypes.PyDLL(None).sleep, HOLD)  # PyDLL: the call keeps the GIL
    atexit.register(NOTE.write_text, "exiting\n")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from hwsweep.run import shutdown  # noqa: E402
from hwsweep.run.reduce import StandardReduction  # noqa: E402


class TearDown:
    def __del__(self):  # in the teardown (the __main__ module's globals are cleared)
        time.sleep(1)  # without the GIL: a thread waiting for it takes it now


dist.init_process_group("gloo")
reduction = StandardReduction(torch.nn.Linear(4, 4), 1, None)  # DDP at 2 ranks: it holds the group
if RANK == 1:
    teardown = TearDown()
    t = torch.ones(1)
    dist.all_reduce(t, async_op=True)  # the work, and with it the tensor, is the worker thread's alone
    del t
else:
    end = time.monotonic() + WAIT
    while not NOTE.exists() and time.monotonic() < end:
        time.sleep(0.01)
    dist.all_reduce(torch.ones(1))
shutdown.leave(reduction)
print(f"rank {RANK}: {shutdown.worker_threads()} worker threads after leaving", flush=True)
