"""Hardware entries and the batch plan: how one recipe is laid out on one hardware.

The global batch, the schedule (in steps) and the precision come from the recipe and
never change with hardware; only the split into devices x micro-batch x accumulation
does. Torch-free: the workflow calls this at parse time for every cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwsweep.recipe import Recipe
from hwsweep.typed import from_dict

BACKEND = {"cpu": "gloo", "cuda": "nccl"}


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Hardware:
    accelerator: str
    nodes: int
    devices_per_node: int
    gpu_type: str
    cpus_per_task: int
    memory_gb: float | None = None
    partition: str | None = None
    gres: str | None = None
    gpu_model: str | None = None
    mem_mb: int | None = None
    runtime: int | None = None

    @classmethod
    def from_dict(cls, data: dict, path: str = "hardware") -> "Hardware":
        return from_dict(cls, data, path)

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node


@dataclass(frozen=True)
class BatchPlan:
    accelerator: str
    backend: str
    nodes: int
    devices_per_node: int
    world_size: int
    global_batch: int
    micro_batch: int
    accumulation: int
    steps: int
    warmup_steps: int
    epochs: float
    precision: str
    tf32: bool
    reproducibility: str

    @classmethod
    def from_dict(cls, data: dict, path: str = "plan") -> "BatchPlan":
        return from_dict(cls, data, path)


def _nearest(values, target, k=3):
    return sorted(sorted(set(values), key=lambda v: (abs(v - target), v))[:k])


def make_plan(recipe: Recipe, hw: Hardware, context: str = "") -> BatchPlan:
    """Split the recipe's global batch over the hardware, or explain why it cannot be."""
    g, m, w = recipe.global_batch, recipe.micro_batch, hw.world_size
    if g % (w * m):
        step = w * m
        batches = [b for b in (g // step * step, (g // step + 1) * step) if b > 0]
        micros = [d for d in range(1, g // w + 1) if g % (w * d) == 0] if g % w == 0 else []
        fix = f"use global_batch {' or '.join(map(str, batches))}"
        if micros:
            fix += f", or micro_batch {' or '.join(map(str, _nearest(micros, m)))}"
        raise PlanError(
            f"recipe.global_batch: {g} is not divisible by world_size {w} x micro_batch {m}{context}; {fix}"
        )
    return BatchPlan(
        accelerator=hw.accelerator,
        backend=BACKEND[hw.accelerator],
        nodes=hw.nodes,
        devices_per_node=hw.devices_per_node,
        world_size=w,
        global_batch=g,
        micro_batch=m,
        accumulation=g // (w * m),
        steps=recipe.schedule.steps,
        warmup_steps=recipe.schedule.warmup_steps,
        epochs=round(recipe.schedule.steps * g / recipe.task.train_size, 4),
        precision=recipe.precision,
        tf32=recipe.tf32,
        reproducibility=recipe.reproducibility,
    )
