"""FLOP counts kept between processes. Counting a model on the meta device imports torch and TorchDynamo, about two
CPU-seconds in every process that estimates (`hwsweep plan`, the workflow's plan and estimate_vs_actual jobs,
the SLURM runtimes of a DAG), for a number that depends only on what makes its key: the task and model config,
the micro-batch, the count's kind, torch's version and the source of hwsweep's models (where the families and
the counter live). A JSON file beside the memory probe's cache (flops.json in the folder of
~/.cache/hwsweep/memory.json, or of the file HWSWEEP_MEMORY_CACHE names), torch-free. A cache that is damaged,
missing or cannot be written costs a count, never a wrong number.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from importlib import metadata
from pathlib import Path

from hwsweep.contracts import io, memory

MODELS = Path(__file__).resolve().parents[1] / "models"  # the families, their build and the FLOP counter


def cache_path() -> Path:
    return memory.cache_path().with_name("flops.json")


@functools.lru_cache(maxsize=1)
def _versions() -> dict | None:
    """torch's version and the models' source; None where torch's version cannot be read without importing it
    (a torch without package metadata): then nothing is cached."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    code = hashlib.sha256()
    for path in sorted(MODELS.glob("*.py")):
        code.update(path.name.encode() + b"\0" + path.read_bytes())
    return {"torch": torch, "models": code.hexdigest()}


def key(kind: str, task_cfg, model_cfg, micro_batch: int) -> str | None:
    if _versions() is None:
        return None
    fields = {"kind": kind, "task": dataclasses.asdict(task_cfg), "model": dataclasses.asdict(model_cfg),
              "micro_batch": micro_batch, **_versions()}  # fmt: skip
    return json.dumps(fields, sort_keys=True, default=repr)


def flops(kind: str, task_cfg, model_cfg, micro_batch: int, count) -> int:
    """The cached count of this key, else count() (stored for the next process)."""
    entry = key(kind, task_cfg, model_cfg, micro_batch)
    if entry is None:
        return count()
    found = io.read_cache(cache_path()).get(entry)
    if isinstance(found, int) and not isinstance(found, bool) and found >= 0:
        return found
    value = count()
    try:
        cache_path().parent.mkdir(parents=True, exist_ok=True)
        # re-read: another process may have added its own since
        io.write_json(cache_path(), io.read_cache(cache_path()) | {entry: value})
    except OSError:
        pass  # a cache only saves time
    return value
