"""What every section of bench/gpu_check.py is given: the machine, its folder, its time and its recorder."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gpucheck.record import Recorder


@dataclass
class Context:
    smoke: bool  # --smoke: tiny sizes on whatever device this is (a CPU in the tests)
    hardware: dict  # this machine as a hardware entry, as `hwsweep detect` makes it (one device of it)
    device: dict  # the device's facts (name, driver, CUDA, torch): gpu_check.json's "device"
    work: Path  # this section's own folder
    ends: float  # time.time() at which the parent stops this section
    rec: Recorder
    speed_rows: list[str] | None = None  # --speed-rows: the speed section runs only these (None: all)

    @property
    def accelerator(self) -> str:
        return self.hardware["accelerator"]

    @property
    def gpu_type(self) -> str:
        return self.hardware["gpu_type"]

    def left(self) -> float:
        """Seconds until the parent stops this section."""
        return self.ends - time.time()
