"""The startup of one training process, in parts that add up to it, and the garbage collector held through its
imports (torch-free).

A process's startup runs from its start (the kernel's clock, /proc) to the end of its first
optimizer step. The parts, in the order the runtime API is called:

    imports        process start -> runtime.init() called: the interpreter, `import torch`, hwsweep and the
                   script's own imports (the age of the process when init() is entered); a worker forked
                   from torchrun's agent (hwsweep.run.torchrun) starts where the agent started: the agent's
                   imports (TorchDynamo's too where the run shards or compiles), the rendezvous and the fork
    process_group  init() entered -> init() returns: threads and CPU pinning, device selection,
                   init_process_group, precision, reproducibility level, seeding, checkpoint manager;
                   in a process started anew of a run that shards, mostly torch's deferred import of
                   TorchDynamo, which the reproducibility level's torch.use_deterministic_algorithms
                   triggers (a forked worker's agent imported it before the fork; a run that neither
                   shards nor compiles never imports it: hwsweep.run.lazy_dynamo)
    data           init() returned -> the first run.loader() returned: the script reads or builds its
                   tables (0 when it never calls run.loader() before the loop)
    model          then -> the step loop begins: build, FLOP count, wrap (DDP), optimizer, resume
    first_step     the first optimizer step of the loop, the device waited for: it carries lazy
                   initialisation (allocator, kernels, DDP buckets, the data loader's first batch)

The first step is startup, not training: train_seconds (and the throughput) leave it out, so a
speedup compares steady steps. A script that builds its model before calling run.loader() counts
that time under data.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

from hwsweep.contracts.records import PARTS


def start_ticks(pid: int | str = "self") -> int:
    """When process `pid` started, in clock ticks since boot (Linux /proc)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def process_age() -> float:
    """Seconds since this process started (Linux /proc, 10 ms ticks), or since the process it was forked from
    started (began_with); elsewhere since this module was imported."""
    try:
        ticks = _BEGAN if _BEGAN is not None else start_ticks()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


def began_with(parent: int) -> None:
    """This process was forked from `parent` to run on the imports `parent` made: its startup (and its wall time)
    begins where `parent` began, so the imports it was spared are still counted (hwsweep.run.torchrun)."""
    global _BEGAN
    try:
        _BEGAN = start_ticks(parent)
    except (OSError, ValueError, IndexError):
        pass


_BEGAN: int | None = None
_IMPORTED = time.perf_counter()


def hold_collection(name: str) -> bool:
    """In an entry point's own process (`name`, its module's __name__, is "__main__"; never in a program that
    imports it), the cyclic garbage collector off from here: importing torch and TorchDynamo makes millions of
    objects that live as long as the process, and the collector would walk them again and again as they come
    (0.3-0.7 CPU-s a process, a sixth of a small run's trainer). Whether it was held, for resume_collection."""
    if name != "__main__":
        return False
    gc.disable()
    return True


def resume_collection(held: bool) -> None:
    """The collector back on (where hold_collection held it), the objects made so far frozen: later collections
    leave them out. Call it once the imports are done and before the run makes anything worth collecting (the
    imports' few cycles are kept: no tensor is among them)."""
    if held:
        gc.freeze()
        gc.enable()


class StartupClock:
    """Started when runtime.init() is entered; each later part ends at its first mark()."""

    def __init__(self):
        self.imports = process_age()
        self._entered = time.perf_counter()
        self._ends: dict[str, float] = {}

    def mark(self, part: str) -> None:
        """`part` ends now (a second mark of the same part changes nothing: e.g. a second loader)."""
        if part not in PARTS[1:]:
            raise ValueError(f"unknown startup part {part!r}")
        self._ends.setdefault(part, time.perf_counter())

    def parts(self) -> dict[str, float]:
        """Seconds per part so far; a part never marked is 0 (its time falls into the next one marked)."""
        out, last = {"imports": self.imports}, self._entered
        for part in PARTS[1:]:
            end = max(last, self._ends.get(part, last))
            out[part], last = end - last, end
        return out


def total(segments: list[dict]) -> dict[str, float] | None:
    """Each part summed over a run's segments (one per process start), as startup_seconds sums them;
    None when a segment was not broken down (a user's command, a record written before the parts)."""
    if not segments or any("startup_parts" not in g for g in segments):
        return None
    return {part: sum(g["startup_parts"][part] for g in segments) for part in PARTS}
