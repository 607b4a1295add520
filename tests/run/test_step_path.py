"""What the trainer's step path asks of the device (issue 39's H100 check, trainer vs bare loop): it reads values
back from the device only at flushes (every log_every steps, checkpoints, the last step) and waits for it only at
the end of the first step (startup) and at the end of the last step the steady window leaves out, so that the
record's steady throughput holds no device work queued by the steps left out. Counted on the CPU, where a read is
no wait: each would be one on a GPU."""

import os
import sys

import pytest
import torch
from conftest import REPO

from hwsweep.contracts import host, io
from hwsweep.plan.config import resolve
from hwsweep.run import device as devices
from hwsweep.run import runtime
from hwsweep.run.runtime import steady_start, steady_sync_step

sys.path.insert(0, str(REPO / "bench"))

import trainer_vs_bare_loop as tvb  # noqa: E402

PACKAGE = str(REPO / "hwsweep")
READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__")  # each a wait for the device on a GPU
COLLECTIVES = ("all_gather", "all_reduce", "broadcast", "barrier", "all_gather_object", "broadcast_object_list")


def test_the_steady_window_begins_right_after_a_device_wait():
    """For every segment a run may have (resumed after `timed_before` step times, at any start) running to the
    plan's last step: the record's steady window (step_seconds[steady_start(n):]) begins either at the segment's
    first timed step, which follows the wait at the end of its first step, or right after the step at whose end
    steady_sync_step waits; or it began in an earlier segment."""
    checked = {"after the sync": 0, "no sync needed": 0}
    for timed_before in (0, 1, 3, 9, 30):
        for steps in range(2, 400):
            for start in range(timed_before + 1 if timed_before else 0, steps):
                timed = steps - start - 1  # this segment's step times: its first step is startup
                first = steady_start(timed_before + timed)  # index of the window's first step time
                sync = steady_sync_step(timed_before, start, steps)
                if sync is None:
                    assert first <= timed_before, (timed_before, steps, start)
                    checked["no sync needed"] += 1
                    continue
                assert start + 2 <= sync <= steps
                # Step d's time (d 1-based, as run.step) has index timed_before + d - start - 2: the wait is in the last
                # one left out.
                assert timed_before + sync - start - 2 == first - 1, (timed_before, steps, start, sync)
                checked["after the sync"] += 1
    assert min(checked.values()) > 1000, checked  # both cases were met often


def test_the_step_path_reads_the_device_at_flushes_only_waits_twice_and_alone_calls_no_collective(
        tmp_path, small_config, monkeypatch):  # fmt: skip
    """World size 1, the built-in trainer in this process. A collective of one process gathers nothing; on NCCL
    the first one creates the communicator: in a timed step, were it on the step path."""
    steps, log_every = 23, 5
    small_config["recipe"] |= {"schedule": {"steps": steps, "warmup_steps": 2}, "log_every": log_every,
                               "checkpoint_every": 100}  # fmt: skip
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0)
    runs, reads, waits, collectives = [], [], [], []
    init = runtime.init

    def keep(*args, **kwargs):
        runs.append(init(*args, **kwargs))
        return runs[-1]

    def counted(name):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if runs and caller.startswith(PACKAGE):  # hwsweep's reads, not the optimizer's or the model's
                reads.append((runs[-1].step, name, caller))
            return original(self, *args, **kwargs)

        return read

    monkeypatch.setattr(runtime, "init", keep)
    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    monkeypatch.setattr(devices.Device, "synchronize", lambda self: waits.append(runs[-1].step))
    for name in COLLECTIVES:
        original = getattr(torch.distributed, name)
        monkeypatch.setattr(torch.distributed, name, lambda *a, _f=original, _n=name, **k: (
            collectives.append((runs[-1].step if runs else None, _n)), _f(*a, **k))[1])  # fmt: skip
    monkeypatch.setattr(host, "other_runs", lambda: 0)  # the suite's other runs aside: this one pins its core
    given = os.sched_getaffinity(0)
    record = tvb.trainer_in_process(spec, tmp_path / "run")
    # pinned to its rank's cores while it ran, given back by run.finish() to the process that goes on
    assert record["provenance"]["contention"]["affinity"]["pinned"] is (len(given) > 1)
    assert os.sched_getaffinity(0) == given

    flushes = {s for s in range(1, steps + 1) if s % log_every == 0 or s == steps}
    assert {step for step, _, _ in reads if step is not None} <= flushes, reads
    assert {step for step, _, _ in reads} >= flushes  # the counting sees the flushes' reads: it can fail
    assert waits == [1, steady_sync_step(0, 0, steps)] == [1, 3]  # 22 step times, the first 2 left out
    assert len(record["step_seconds"]) == steps - 1
    # The last step's checkpoint and run.finish() (after the last step's time) may; nothing before them does, from
    # init() on: a startup alone creates no communicator either.
    assert {step for step, _ in collectives} == {steps}, collectives
    assert (steps, "barrier") in collectives  # the counting sees the collectives: it can fail
