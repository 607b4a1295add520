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
    node's devices), under the recipe's activation checkpointing, with its optimizer's state."""
    device_bytes = families.family(recipe.model.name).device_bytes
    return device_bytes(recipe.model, recipe.task, micro, accumulation, recipe.reproducibility == "strict", accelerator,
                        precision, shards, recipe.parallel.reshard_after_forward, recipe.activation_checkpointing,
                        recipe.optimizer.name)  # fmt: skip


# Device counts the advisor tries when a plan does not fit (the hardware entry's own count comes first).
DEVICE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
STRATEGIES = ("ddp", "fsdp")


def strategy_problem(recipe: Recipe, precision: str, strategy: str) -> str | None:
    """Why `recipe` cannot train under `strategy` at `precision` (the hardware's, else the recipe's), or None."""
    if strategy != "fsdp":
        return None
    if recipe.reproducibility == "strict":
        return ("fsdp cannot keep reproducibility strict's promise (its reduce-scatter sums gradients in an order "
                "that depends on the device count)")  # fmt: skip
    if precision == "fp16-mixed":
        return "fsdp does not run fp16-mixed (its loss scaler does not unscale sharded gradients)"
    return None


def usable_strategies(recipe: Recipe, precision: str) -> list[str]:
    """The recipe's strategy, then the others it may train under."""
    own = recipe.parallel.strategy
    return [own] + [s for s in STRATEGIES if s != own and strategy_problem(recipe, precision, s) is None]


def fitting_layout(recipe: Recipe, hw: Hardware, precision: str, micro: int, limit: float):
    """(strategy, devices, bytes per device) of the fewest devices, the recipe's strategy before the other one it
    may use, on which a built-in model fits `limit` bytes at micro-batch `micro` (the hardware entry's own device
    count first), or None when no count up to 1024 does. The global batch is the recipe's (batch_policy grow: per
    device count 1, grown with the count)."""
    strategies = usable_strategies(recipe, precision)
    for n in dict.fromkeys((hw.world_size, *(c for c in DEVICE_COUNTS if c > hw.world_size))):
        g = recipe.global_batch * n if recipe.batch_policy == "grow" else recipe.global_batch
        if g % (n * micro):
            continue
        for strategy in strategies:
            need = device_need(recipe, hw.accelerator, precision, micro, g // (n * micro), n if strategy == "fsdp" else 0)
            if need <= limit:
                return strategy, n, need
    return None


def gb(*values: float) -> list[str]:
    """Byte counts in GB, with the fewest significant digits (3 at least) at which different values read
    differently: a plan that needs more than its limit never reads "needs 0.03 GB, over 0.03 GB"."""
    for digits in range(3, 18):
        shown = [f"{v / GB:.{digits}g}" for v in values]
        if len(set(shown)) == len(set(values)):
            return shown
    return shown


def _refuse_memory(recipe: Recipe, hw: Hardware, precision: str, micro: int, need: float, limit: float,
                   what: str, context: str) -> None:  # fmt: skip
    """The one memory rule, for DDP and FSDP alike: a built-in model whose plan needs more than `limit` bytes per
    device is refused, naming the device count or strategy that fits at this micro-batch, or that none does."""
    found = fitting_layout(recipe, hw, precision, micro, limit)
    needs, over = gb(need, limit)
    field = "recipe.micro_batch" if recipe.micro_batch == "auto" else "recipe.parallel.strategy"
    head = f"{field}: {recipe.parallel.strategy} at micro-batch {micro} needs {needs} GB per device, over {what} {over} GB{context}"
    if found is None:
        tried = usable_strategies(recipe, precision)
        fixes = ["a device with more memory", "a smaller model"] + (
            ["a smaller micro_batch"] if recipe.micro_batch != "auto" and micro > 1 else [])  # fmt: skip
        fits_none = (f"neither {' nor '.join(tried)} fits on any" if len(tried) > 1 else f"{tried[0]} fits on no")
        raise PlanError(f"{head}; {fits_none} device count up to {DEVICE_COUNTS[-1]}: use {', '.join(fixes[:-1])} or "
                        f"{fixes[-1]}")  # fmt: skip
    strategy, n, fits = found
    (fits,) = gb(fits)
    where = (f"on this hardware's {n} devices" if n == hw.world_size else
             f"on {n} devices (a hardware entry of nodes x devices_per_node = {n})")  # fmt: skip
    change = "" if strategy == recipe.parallel.strategy else f"set parallel.strategy: {strategy}, which "
    raise PlanError(f"{head}; {change or 'it '}needs {fits} GB per device {where}")


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
    problem = strategy_problem(recipe, precision, recipe.parallel.strategy)
    if problem and hw.precision:  # the recipe's own precision is checked with the recipe; this is the hardware's
        raise PlanError(f"recipe.parallel.strategy: {problem}, and hardware precision {hw.precision} asks for it"
                        f"{context}; remove the hardware's precision, use bf16-mixed there, or strategy: ddp")  # fmt: skip
    # Peaks the memory probe measured on this device type (hwsweep detect on the device) replace the estimate;
    # the probe runs DDP's layout with AdamW, so a sharded plan, or an optimizer keeping other state, keeps it.
    adam_state = footprint.OPTIMIZER_STATE[recipe.optimizer.name] == footprint.OPTIMIZER_STATE["adamw"]
    probed = measured(recipe, hw.gpu_type, precision) if hw.accelerator == "cuda" and not sharded and adam_state else None
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
            if smallest == math.inf:
                raise PlanError(f"recipe.micro_batch: even micro-batch {candidates[0]} ran out of memory in the probe "
                                f"on {hw.gpu_type}{context}; use a device with more memory or a smaller model")  # fmt: skip
            _refuse_memory(recipe, hw, precision, candidates[0], smallest, budget,
                           f"{advisor.target_utilisation:.0%} of {memory} GB =", context)  # fmt: skip
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
        _refuse_memory(recipe, hw, precision, micro, est * GB, memory * GB, "the device's", context)
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
