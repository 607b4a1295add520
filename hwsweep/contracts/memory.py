"""The measured-memory cache: peak device memory of a real training step per model, task shape,
precision and device type, written by the memory probe (hwsweep.run.probe, on a GPU) and read by the
planner (hwsweep.plan.batch) instead of its footprint estimate. A JSON file, torch-free.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hwsweep.contracts import io

CACHE_ENV = "HWSWEEP_MEMORY_CACHE"
OUT_OF_MEMORY = None  # a cached peak of None: the micro-batch did not fit the device at all


def cache_path() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hwsweep" / "memory.json"


def cache_key(recipe, gpu_type: str, precision: str) -> str | None:
    """One entry per model, task shape, precision and device type; None for a user's script (no model known)."""
    if recipe.model is None or recipe.task is None:
        return None
    task = {"name": recipe.task.name, "length": recipe.task.length, "vocab_size": recipe.task.vocab_size}
    return json.dumps({"model": recipe.model.__dict__, "task": task, "precision": precision, "gpu_type": gpu_type},
                      sort_keys=True)  # fmt: skip


_memo: dict = {}


def _read() -> dict:
    """The cache as a dict, re-read only when the file changed (the planner asks once per cell and hardware)."""
    path = cache_path()
    try:
        stamp = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
    except OSError:
        return {}
    if _memo.get("stamp") != stamp:
        _memo.update(stamp=stamp, data=io.read_cache(path))  # a damaged cache measures nothing: the estimate is used
    return json.loads(json.dumps(_memo["data"]))  # a copy the caller may change


def measured(recipe, gpu_type: str, precision: str) -> dict | None:
    """{"peak_bytes": {micro_batch: bytes or None}, "parameter_bytes": int} from the cache, or None."""
    key = cache_key(recipe, gpu_type, precision)
    entry = _read().get(key) if key else None
    if not entry:
        return None
    peaks = {int(k): v for k, v in entry["peak_bytes"].items()}
    return {"peak_bytes": peaks, "parameter_bytes": entry["parameter_bytes"]}


def store(recipe, gpu_type: str, precision: str, peaks: dict, parameter_bytes: int) -> None:
    key = cache_key(recipe, gpu_type, precision)
    cache = _read()
    entry = cache.setdefault(key, {"peak_bytes": {}, "parameter_bytes": parameter_bytes})
    entry["peak_bytes"] |= {str(k): v for k, v in peaks.items()}
    entry["parameter_bytes"] = parameter_bytes
    cache_path().parent.mkdir(parents=True, exist_ok=True)
    io.write_json(cache_path(), cache)
