"""One section of bench/gpu_check.py in this process: its context read, its rows recorded as they come."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from gpucheck.context import Context
from gpucheck.record import Recorder

MODULES = {"speed": "gpucheck.speed", "mfu": "gpucheck.speed", "memory": "gpucheck.memory",
           "workflow": "gpucheck.workflow", "hrm": "gpucheck.hrm", "startup": "gpucheck.startup"}  # fmt: skip


def run(key: str, context_path: Path) -> int:
    raw = json.loads(Path(context_path).read_text())
    ctx = Context(smoke=raw["smoke"], hardware=raw["hardware"], device=raw["device"], work=Path(raw["work"]),
                  ends=raw["ends"], rec=Recorder(Path(raw["rows"]), key))  # fmt: skip
    module = importlib.import_module(MODULES[key])
    getattr(module, key)(ctx)
    print(f"section {key}: done", file=sys.stderr)
    return 0
