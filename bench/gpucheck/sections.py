"""One section of bench/gpu_check.py in this process: its context read, its rows recorded as they come."""

from __future__ import annotations

import importlib
import json
import signal
import sys
from pathlib import Path

from gpucheck.context import Context
from gpucheck.record import Recorder, Stopped

MODULES = {"speed": "gpucheck.speed", "mfu": "gpucheck.speed", "memory": "gpucheck.memory",
           "workflow": "gpucheck.workflow", "hrm": "gpucheck.hrm", "startup": "gpucheck.startup"}  # fmt: skip


def run(key: str, context_path: Path) -> int:
    raw = json.loads(Path(context_path).read_text())
    ctx = Context(smoke=raw["smoke"], hardware=raw["hardware"], device=raw["device"], work=Path(raw["work"]),
                  ends=raw["ends"], rec=Recorder(Path(raw["rows"]), key), speed_rows=raw.get("speed_rows"))  # fmt: skip
    module = importlib.import_module(MODULES[key])

    def stop(signum, frame):
        raise Stopped(f"section {key}: stopped by bench/gpu_check.py (its time was over)")

    signal.signal(signal.SIGTERM, stop)  # the in-process trainer sets its own while it runs, then this again
    try:
        getattr(module, key)(ctx)
    except Stopped as e:
        print(e, file=sys.stderr, flush=True)
        return 1
    print(f"section {key}: done", file=sys.stderr)
    return 0
