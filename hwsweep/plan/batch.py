"""The batch plan (the advisor): how one recipe is laid out on one hardware entry.

The global batch, the schedule (in steps) and the precision come from the recipe and never
change with hardware; only the split into devices x micro-batch x accumulation does. With
`micro_batch: auto` the micro-batch is the largest divisor of the per-device batch whose
estimated memory fits the device at the target utilisation. Torch-free: the workflow calls
this at parse time for every cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hwsweep.contracts.hardware import BACKEND, GB, BatchPlan, Hardware
from hwsweep.contracts.memory import measured
from hwsweep.contracts.recipe import Recipe
from hwsweep.models import families, footprint

LR_SCALE = {"none": lambda n: 1.0, "linear": float, "sqrt": math.sqrt}


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Advisor:
    target_utilisation: float = 0.75
    allow_precision_mismatch: bool = False


def _nearest(values, target, k=3):
    return sorted(sorted(set(values), key=lambda v: (abs(v - target), v))[:k])


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_precision(recipe: Recipe, hw: Hardware, advisor: Advisor, context: str) -> list[str]:
    problems = []
    if hw.precision and hw.precision != recipe.precision:
        problems.append((f"hardware precision {hw.precision} differs from recipe.precision {recipe.precision}{context}",
                         "remove the hardware's precision"))  # fmt: skip
    kind = hw.device_type
    precision = hw.precision or recipe.precision
    if kind is not None and not kind.supports(precision):
        problems.append((f"recipe.precision: {precision} is not native on {kind.name}{context}",
                         "use a precision every hardware supports (fp32 always is)"))  # fmt: skip
    if kind is not None and recipe.tf32 and not kind.tf32:
        problems.append((f"recipe.tf32: true but {kind.name} has no TF32{context}",
                         "set tf32: false so every hardware does full fp32 matmuls"))  # fmt: skip
    if problems and not advisor.allow_precision_mismatch:
        what, fix = problems[0]
        raise PlanError(f"{what}; {fix}, or set advisor.allow_precision_mismatch: true to compare anyway")
    notes = [f"{what} (allowed by advisor.allow_precision_mismatch)" for what, _ in problems]
    if kind is None:
        notes.append(f"gpu_type {hw.gpu_type!r} is not in the catalog: precision support unchecked")
    return notes


def device_need(recipe: Recipe, accelerator: str, precision: str, micro: int, accumulation: int, shards: int) -> int:
    """Estimated peak bytes per device of a built-in model: shards 0 for DDP, N for FSDP over N devices (HSDP: a
    node's devices), under the recipe's activation checkpointing."""
    device_bytes = families.family(recipe.model.name).device_bytes
    return device_bytes(recipe.model, recipe.task, micro, accumulation, recipe.reproducibility == "strict", accelerator,
                        precision, shards, recipe.parallel.reshard_after_forward, recipe.activation_checkpointing)  # fmt: skip


# Device counts the advisor tries for FSDP when DDP does not fit (a hardware entry's own count comes first).
FSDP_DEVICE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def fsdp_alternative(recipe: Recipe, hw: Hardware, precision: str, global_batch: int, limit: float):
    """(devices, bytes per device) of the fewest devices on which FSDP fits `limit` bytes at the smallest
    micro-batch (the hardware entry's own count first), or None when no count up to 1024 does."""
    micro = 1 if recipe.micro_batch == "auto" else recipe.micro_batch
    for n in dict.fromkeys((hw.world_size, *(c for c in FSDP_DEVICE_COUNTS if c > hw.world_size))):
        if global_batch % (n * micro):
            continue
        need = device_need(recipe, hw.accelerator, precision, micro, global_batch // (n * micro), n)
        if need <= limit:
            return n, need
    return None


def _refuse_ddp(recipe: Recipe, hw: Hardware, precision: str, global_batch: int, limit: float | None, what: str) -> None:
    """A built-in model whose DDP replica does not fit: refused, naming FSDP and the device count that fits."""
    if recipe.model is None or recipe.parallel.sharded or limit is None:
        return
    found = fsdp_alternative(recipe, hw, precision, global_batch, limit)
    if found is None:
        return
    n, need = found
    where = f"on this hardware's {n} devices" if n == hw.world_size else f"on {n} devices (a hardware entry of nodes x devices_per_node = {n})"
    raise PlanError(f"recipe.parallel.strategy: ddp keeps a whole replica per device and {what}; set "
                    f"parallel.strategy: fsdp, which needs {need / GB:.2f} GB per device {where}")  # fmt: skip


def make_plan(recipe: Recipe, hw: Hardware, advisor: Advisor = Advisor(), context: str = "") -> BatchPlan:
    """Split the recipe's global batch over the hardware, or explain in one line why it cannot be."""
    w = hw.world_size
    warnings = _check_precision(recipe, hw, advisor, context)
    grow = recipe.batch_policy == "grow"
    g = recipe.global_batch * w if grow else recipe.global_batch
    if grow:
        warnings.append(f"batch_policy grow: global batch {g} on {w} devices; not comparable with other world sizes")
    if g % w:
        lower = g // w * w
        fix = " or ".join(str(b) for b in (lower, lower + w) if b > 0)
        raise PlanError(f"recipe.global_batch: {g} is not divisible by world_size {w}{context}; use global_batch {fix}")
    per_device = g // w
    strict = recipe.reproducibility == "strict"
    precision = hw.precision or recipe.precision

    sharded = recipe.parallel.sharded
    # Peaks the memory probe measured on this device type (hwsweep detect on the device) replace the estimate;
    # the probe runs DDP's layout, so a sharded plan keeps the estimate.
    probed = measured(recipe, hw.gpu_type, precision) if hw.accelerator == "cuda" and not sharded else None
    peaks = probed["peak_bytes"] if probed else {}

    def need(micro: int) -> float | None:
        if recipe.model is None:  # a user's script: its memory is its own (micro_batch auto is refused)
            return None
        if micro in peaks:  # the probe ran one micro-batch; strict mode keeps every micro-batch's gradient
            kept = probed["parameter_bytes"] * (per_device // micro) if strict else 0
            return math.inf if peaks[micro] is None else peaks[micro] + kept + footprint.CUDA_CONTEXT_BYTES
        shards = recipe.parallel.shards(hw.nodes, hw.devices_per_node)  # hsdp: a node's devices
        return device_need(recipe, hw.accelerator, precision, micro, per_device // micro, shards)

    memory = hw.device_memory_gb
    if recipe.micro_batch == "auto":
        cap = recipe.max_micro_batch or per_device
        candidates = [d for d in _divisors(per_device) if d <= cap]
        budget = None if memory is None else advisor.target_utilisation * memory * GB
        fits = [d for d in candidates if budget is None or need(d) <= budget]
        if not fits:
            smallest = need(candidates[0])
            needs = "ran out of memory in the probe" if smallest == math.inf else f"needs {smallest / GB:.1f} GB"
            what = f"even micro-batch {candidates[0]} {needs}, over {advisor.target_utilisation:.0%} of {memory} GB{context}"
            _refuse_ddp(recipe, hw, precision, g, budget, what)
            raise PlanError(f"recipe.micro_batch: {what}; use a device with more memory or a smaller model")
        micro = max(fits)
    else:
        micro = recipe.micro_batch
        if per_device % micro:
            step = w * micro
            batches = [b for b in (g // step * step, (g // step + 1) * step) if b > 0]
            fix = f"use global_batch {' or '.join(map(str, batches))}, or micro_batch {' or '.join(map(str, _nearest(_divisors(per_device), micro)))}"
            raise PlanError(
                f"recipe.global_batch: {g} is not divisible by world_size {w} x micro_batch {micro}{context}; {fix}"
            )
    est = None if need(micro) is None else need(micro) / GB
    if est == math.inf:
        warnings.append(f"the memory probe ran out of memory at micro-batch {micro} on {hw.gpu_type}")
        est = None
    if memory is not None and est is not None and est > memory:
        _refuse_ddp(recipe, hw, precision, g, memory * GB, f"needs {est:.1f} GB per device, over {memory} GB{context}")
        warnings.append(f"estimated {est:.1f} GB per device exceeds the device's {memory} GB")
    return BatchPlan(
        accelerator=hw.accelerator,
        backend=BACKEND[hw.accelerator],
        gpu_type=hw.gpu_type,
        nodes=hw.nodes,
        devices_per_node=hw.devices_per_node,
        world_size=w,
        global_batch=g,
        micro_batch=micro,
        accumulation=per_device // micro,
        steps=recipe.schedule.steps,
        warmup_steps=recipe.schedule.warmup_steps,
        epochs=round(recipe.schedule.steps * g / recipe.task.train_size, 4) if recipe.task else None,
        lr=recipe.optimizer.lr * (LR_SCALE[recipe.lr_scaling](w) if grow else 1.0),
        precision=precision,
        tf32=recipe.tf32,
        reproducibility=recipe.reproducibility,
        strategy=recipe.parallel.strategy,
        memory_gb=memory,
        est_memory_gb=None if est is None else round(est, 4),
        memory_source="measured" if micro in peaks else "estimate",
        comparable=not grow,
        warnings=warnings,
    )
