"""System metrics, sampled where the clients run: the machine's and the run's processes' CPU and memory, and
the run's GPU through NVML where present."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path


class System:
    """CPU utilisation and memory in use of the machine and of the run's process `pid` (CPU: with its children
    waited for; memory: with its live descendants, the tracker's own process left out), and the run's GPU
    (utilisation, memory, power) through NVML when nvidia-ml-py is installed and a GPU is given."""

    def __init__(self, gpu: int | str | None, pid: int):
        self.pid = pid
        self.last = (self._machine(), self._process(), time.monotonic())
        self.nvml = None
        if gpu is not None:
            try:
                import pynvml

                pynvml.nvmlInit()
                by = pynvml.nvmlDeviceGetHandleByIndex if isinstance(gpu, int) else pynvml.nvmlDeviceGetHandleByUUID
                self.nvml, self.handle = pynvml, by(gpu)
            except Exception:  # no NVML here: CPU metrics only
                self.nvml = None

    @staticmethod
    def _machine() -> tuple[float, float] | None:
        try:
            fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # total, idle + iowait

    def _process(self) -> float | None:
        """CPU seconds of the run's process and its waited-for children (utime, stime, cutime, cstime)."""
        try:  # the command's name, field 2, may hold spaces: the fields counted after its ')'
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return sum(float(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _memory() -> float | None:
        """Percent of the machine's memory in use (not available to a new process)."""
        try:
            fields = {k: float(v.split()[0]) for k, v in (line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())}
            return 100 * (1 - fields["MemAvailable"] / fields["MemTotal"])
        except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
            return None

    def _resident(self) -> float | None:
        """GB resident of the run's process and its live descendants (a command's, dataloader workers), this
        tracker's process and its own (W&B's service) left out."""
        total, todo, seen = 0, [self.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen or (pid == os.getpid() and pid != self.pid):
                continue
            seen.add(pid)
            try:
                found = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
                total += int(found.group(1)) * 1024 if found else 0
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(child) for child in (task / "children").read_text().split()]
            except (OSError, ValueError):
                if pid == self.pid:
                    return None  # the run's process is gone
        return total / 2**30

    def sample(self, least: float = 0.0) -> dict:
        """The metrics since the last sample, at least `least` seconds after it (a CPU share needs an interval: the
        end of a run shorter than the tracker's start-up is its only sample)."""
        time.sleep(max(0.0, self.last[2] + least - time.monotonic()))
        machine, process, now = self._machine(), self._process(), time.monotonic()
        (m0, p0, t0), self.last = self.last, (machine, process, now)
        out = {}
        memory, resident = self._memory(), self._resident()
        if memory is not None:
            out["system/memory_percent"] = memory
        if resident is not None:
            out["system/process_memory_gb"] = resident
        if now > t0 and process is not None and p0 is not None:
            out["system/process_cpu_percent"] = 100 * (process - p0) / (now - t0)
        if machine and m0 and machine[0] > m0[0]:
            out["system/cpu_percent"] = 100 * (1 - (machine[1] - m0[1]) / (machine[0] - m0[0]))
        if self.nvml:
            try:
                n, h = self.nvml, self.handle
                out["system/gpu_utilisation_percent"] = float(n.nvmlDeviceGetUtilizationRates(h).gpu)
                out["system/gpu_memory_gb"] = n.nvmlDeviceGetMemoryInfo(h).used / 2**30
                out["system/gpu_power_w"] = n.nvmlDeviceGetPowerUsage(h) / 1000
            except Exception:
                pass  # a GPU that stops answering NVML: the curves go on without it
        return out
