"""Throughput: the steady window of step times (the first STEADY_STATE_SKIP of them left out) and samples/s,
TFLOP/s and MFU per device over step times."""

from __future__ import annotations

from hwsweep.contracts.catalog import device_peak

STEADY_STATE_SKIP = 0.1  # leave the first 10% of steps out of throughput (allocator, caches)


def steady_start(timed: int) -> int:
    """The index of the first step time of the steady window, of `timed` step times: the record's throughput."""
    return int(timed * STEADY_STATE_SKIP)


def steady_sync_step(timed_before: int, start: int, steps: int) -> int | None:
    """The step (1-based, as run.step) at whose end the device is waited for, so that the record's steady window
    (step_seconds after the first STEADY_STATE_SKIP of them) holds no device work queued by the steps it leaves
    out; None where none is needed. Step times are host times and the device is otherwise waited for only at the
    first step and at flushes: without this, the work a GPU still had queued from the left-out steps was charged
    to the steady steps (one step's time of a GPU-bound model in the H100 check of 2026-11-26: 1/11 of a 12-step
    run's throughput). `timed_before`: step times of earlier segments (a resumed run); the window is
    reckoned as if this segment runs to the plan's last step (a run that stops at a target starts it earlier)."""
    planned = timed_before + max(0, steps - start - 1)  # this segment's first step is startup, not timed
    skip = steady_start(planned)
    if skip <= timed_before:  # starts in an earlier segment, or at this segment's first timed step (the device
        return None  # was waited for at the end of the segment's first step)
    return start + 1 + skip - timed_before  # the step whose time is the window's last one left out


class Throughput:
    """The part of Run (hwsweep.run.runtime.run) that turns step times into throughput."""

    def _throughput(self, seconds: list[float]) -> dict:
        """Per device over `seconds` (step times): samples/s, TFLOP/s and MFU (None where unknown)."""
        steps_per_second = len(seconds) / sum(seconds) if seconds and sum(seconds) > 0 else 0.0
        p = self.plan
        out = {"samples_per_second": p.global_batch * steps_per_second,
               "samples_per_second_per_device": p.global_batch * steps_per_second / p.world_size,
               "tflops_per_device": None, "mfu": None}  # fmt: skip
        if self.flops_per_step:
            achieved = self.flops_per_step * steps_per_second / p.world_size
            peak = device_peak(self.spec.hardware, p, self.threads)  # a CPU process: its threads' cores
            out |= {"tflops_per_device": achieved / 1e12, "mfu": achieved / peak if peak else None}
        return out
