"""micro_batch auto by measurement: the peak device memory of a real training step at candidate micro-batches.

On a CUDA device (`hwsweep detect`), one forward + backward + AdamW step of the recipe's model runs at
each candidate micro-batch, largest first, until one fits the budget; torch.cuda.max_memory_allocated
is read back after each. The peaks are kept in a small JSON cache per model, task, precision and
device type (~/.cache/hwsweep/memory.json, or the file HWSWEEP_MEMORY_CACHE names), and the planner
uses a measured peak instead of the footprint estimate wherever the cache has one
(plan.memory_source: measured). On a CPU the probe is skipped: memory is the host's and the estimate
is used. The CUDA step is written for the trainer's step but is not run by the tests (no GPU in CI);
docs/benchmarks.md has the protocol that checks it on an H100.

The cache lookups are torch-free (the planner runs at workflow parse time); measuring imports torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hwsweep import io

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
        try:
            _memo.update(stamp=stamp, data=io.read_json(path))
        except (OSError, ValueError):
            _memo.update(stamp=stamp, data={})  # a damaged cache measures nothing: the estimate is used
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


def step_peak_bytes(recipe, micro_batch: int, precision: str, device) -> tuple[int | None, int]:
    """(peak bytes allocated during one forward + backward + AdamW step, parameter bytes) on a CUDA
    device, as the trainer runs it (autocast, fp32 loss, a grad scaler for fp16); peak None when the
    step ran out of memory."""
    import torch
    from torch.nn import functional as F

    from hwsweep.device import AUTOCAST_DTYPE, adamw
    from hwsweep.estimate import model_and_batch

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    model = optimizer = None
    try:
        model, (x, y) = model_and_batch(recipe.task, recipe.model, micro_batch, device)
        parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        optimizer = adamw(model.parameters(), recipe.optimizer, recipe.optimizer.lr, "cuda")  # the trainer's kernel
        scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16-mixed")
        dtype = AUTOCAST_DTYPE[precision]
        for _ in range(2):  # the second step has the optimizer state allocated, as every later one does
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                logits = model(x)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device), parameter_bytes
    except torch.cuda.OutOfMemoryError:
        return OUT_OF_MEMORY, 0
    finally:
        del model, optimizer
        torch.cuda.empty_cache()


def candidates(per_device: int, cap: int | None) -> list[int]:
    """Micro-batches a plan may use (divisors of the per-device batch up to the cap), largest first."""
    return [d for d in range(per_device, 0, -1) if per_device % d == 0 and (cap is None or d <= cap)]


def probe(recipe, gpu_type: str, precision: str, per_device: int, budget_bytes: float, measure) -> dict:
    """Measure candidates largest first until one's peak fits `budget_bytes` (the planner's budget less the
    CUDA context, which max_memory_allocated does not see); cache every peak. `measure(micro)` returns
    (peak bytes or None, parameter bytes). Returns {micro_batch: peak bytes or None}."""
    peaks, parameter_bytes = {}, 0
    known = measured(recipe, gpu_type, precision) or {"peak_bytes": {}}
    for micro in candidates(per_device, recipe.max_micro_batch):
        if micro in known["peak_bytes"]:
            peak = known["peak_bytes"][micro]
        else:
            peak, size = measure(micro)
            parameter_bytes = size or parameter_bytes
            peaks[micro] = peak
        if peak is not None and peak <= budget_bytes:
            break
    if peaks:
        store(recipe, gpu_type, precision, peaks, parameter_bytes or known.get("parameter_bytes", 0))
    return known["peak_bytes"] | peaks


def probe_matrix(matrix, hardware_name: str, device) -> list[str]:
    """Probe every cell that runs on `hardware_name` (a CUDA entry, e.g. the detected one); one line per cell."""
    from hwsweep.footprint import CUDA_CONTEXT_BYTES
    from hwsweep.plan import GB

    hw, lines = matrix.hardware[hardware_name], []
    for cell in matrix.cells:
        recipe = cell.recipe
        if hardware_name not in cell.hardware or recipe.model is None or hw.device_memory_gb is None:
            continue
        precision = hw.precision or recipe.precision
        plan = matrix.spec(cell.suite, cell.variant, hardware_name, matrix.seeds[0]).plan
        per_device = plan.global_batch // plan.world_size
        budget = matrix.advisor.target_utilisation * hw.device_memory_gb * GB - CUDA_CONTEXT_BYTES
        if recipe.micro_batch != "auto":  # a fixed micro-batch: measure it, for planned vs measured
            recipe = type(recipe)(**(recipe.__dict__ | {"max_micro_batch": recipe.micro_batch}))
            per_device = recipe.micro_batch
        peaks = probe(recipe, hw.gpu_type, precision, per_device, budget,
                      lambda micro: step_peak_bytes(recipe, micro, precision, device))  # fmt: skip
        gb = {m: "out of memory" if b is None else f"{b / GB:.2f} GB" for m, b in sorted(peaks.items())}
        shown = ", ".join(f"{m}: {text}" for m, text in gb.items())
        where = f"{cell.suite}/{cell.variant} on {hw.gpu_type} ({precision})"
        lines.append(f"memory probe {where}, peak per micro-batch: {shown}")
    return lines
