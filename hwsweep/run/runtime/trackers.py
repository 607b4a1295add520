"""Run's feed to the trackers (config tracking), on rank 0: started with the loop, one row per step."""

from __future__ import annotations

import os

import torch

from hwsweep.contracts import host, io
from hwsweep.run import device as devices
from hwsweep.run import tracking


class Trackers:
    """The part of Run (hwsweep.run.runtime.run) that feeds the trackers; its state is set up in Run.__init__."""

    def _start_tracking(self) -> None:
        """Rank 0's tracker (config tracking), continuing the tracked run after a resume. The owner file tells
        the runner of a command that this script feeds the trackers itself."""
        gpu = devices.nvml_index(self.device) if self.device.type == "cuda" else None  # NVML's index, for GPU metrics
        spare = self.affinity.get("spare") or None  # pinned with CPUs to spare: the tracker's process there
        self.tracker = tracking.Tracker.start(self.spec, self.run_dir, self.tracking, self.start, gpu, cpus=spare)
        if self.tracker is not None:
            io.write_text(self.run_dir / tracking.OWNER_FILE, f"{os.getpid()}\n")

    def _track_step(self, done: int, recent: dict) -> None:
        """Throughput, learning rate, gradient norm, peak memory and the per-rank step-time spread at a log step
        (the device was just waited for by the loss read, so the norm's read costs no extra wait)."""
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            peak = host.peak_rss_bytes()
        norm = self._grad_norm.item() if isinstance(self._grad_norm, torch.Tensor) else self._grad_norm
        keys = ("samples_per_second_per_device", "tflops_per_device", "mfu")
        self._to_track.setdefault(done, {}).update({k: recent[k] for k in keys} | {
            "lr": self._lr, "grad_norm": norm, "peak_memory_gb": peak / 2**30, "rank_step_time_spread": self._spread})

    def _send_tracked(self) -> None:
        """One row per step to the trackers: a log step's loss and its throughput, lr and norm ride together."""
        for step in sorted(self._to_track):
            self.tracker.log(step, self._to_track[step])
        self._to_track = {}
