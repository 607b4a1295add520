"""micro_batch auto by measurement: the peak device memory of a real training step at candidate micro-batches.

On a CUDA device (`hwsweep detect`), one forward + backward + AdamW step of the recipe's model runs at
each candidate micro-batch, largest first, until one fits the budget; torch.cuda.max_memory_allocated
is read back after each. The peaks are kept in a small JSON cache per model, task, precision and
device type (~/.cache/hwsweep/memory.json, or the file HWSWEEP_MEMORY_CACHE names), and the planner
uses a measured peak instead of the footprint estimate wherever the cache has one
(plan.memory_source: measured). On a CPU the probe is skipped: memory is the host's and the estimate
is used. The CUDA step is written for the trainer's step but is not run by the tests (no GPU in CI);
docs/benchmarks.md has the protocol that checks it on an H100.

The cache itself (hwsweep.contracts.memory) is torch-free: the planner reads it at workflow parse time.
"""

from __future__ import annotations

from hwsweep.contracts.hardware import GB
from hwsweep.contracts.memory import OUT_OF_MEMORY, measured, store
from hwsweep.models.footprint import CUDA_CONTEXT_BYTES


def step_peak_bytes(recipe, micro_batch: int, precision: str, device) -> tuple[int | None, int]:
    """(peak bytes allocated during one forward + backward + AdamW step, parameter bytes) on a CUDA
    device, as the trainer runs it (autocast, fp32 loss, a grad scaler for fp16); peak None when the
    step ran out of memory."""
    import torch

    from hwsweep.models.families import model_and_batch
    from hwsweep.run.device import AUTOCAST_DTYPE, adamw

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    model = optimizer = None
    try:
        model, batch = model_and_batch(recipe.task, recipe.model, micro_batch, device)
        parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        optimizer = adamw(model.parameters(), recipe.optimizer, recipe.optimizer.lr, "cuda")  # the trainer's kernel
        scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16-mixed")
        dtype = AUTOCAST_DTYPE[precision]
        for _ in range(2):  # the second step has the optimizer state allocated, as every later one does
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = model(*batch)  # the model owns its loss, in fp32, for every family
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
