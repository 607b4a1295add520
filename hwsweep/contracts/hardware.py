"""A hardware entry of the config and the batch plan a recipe gets on it: the types a RunSpec carries
(hwsweep.plan.batch makes the plan; the trainer, the evaluator and the statistics read it)."""

from __future__ import annotations

from dataclasses import dataclass

from hwsweep.contracts import catalog
from hwsweep.contracts.typed import Typed

BACKEND = {"cpu": "gloo", "cuda": "nccl"}
GB = 2**30


SIGNAL_LEAD_S = 180  # a train job's SIGTERM comes this long before its time limit: time to checkpoint and requeue
DEFAULT_RUNTIME_MIN = 60  # a SLURM train job's time limit where the hardware names none


@dataclass(frozen=True)
class Hardware(Typed):
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
    precision: str | None = None
    price_per_hour: float | None = None  # per device-hour in catalog.CURRENCY; None: the catalog's list price
    mfu: float | None = None  # assumed model FLOPs utilisation for the estimate; None: estimate.mfu or the catalog's

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def signal_lead(self) -> int:
        """Seconds before the time limit a train job is asked to stop at (sbatch --signal=TERM@N): SIGNAL_LEAD_S,
        or a quarter of a time limit shorter than four of them, so the job trains for most of its time instead of
        being signalled as it starts."""
        limit = 60 * (self.runtime or DEFAULT_RUNTIME_MIN)
        return SIGNAL_LEAD_S if limit >= 4 * SIGNAL_LEAD_S else max(1, limit // 4)

    @property
    def slurm_gres(self) -> str | None:
        """The GRES each node of the job asks SLURM for: `gres` as given, or gpu_model's GPUs per node, never
        a count for the whole job (SLURM may split that unevenly across nodes: 1 + 3 for two ranks each)."""
        if self.gpu_model:
            return f"gpu:{self.gpu_model}:{self.devices_per_node}"
        return self.gres

    @property
    def gpus_per_node(self) -> int:
        """GPUs each node of the job is given by SLURM (the count of a gpu GRES), 0 when none is asked for."""
        parts = (self.slurm_gres or "").split(":")
        return int(parts[-1]) if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit() else 0

    @property
    def device_type(self):
        return catalog.lookup(self.gpu_type)

    @property
    def device_memory_gb(self) -> float | None:
        if self.memory_gb is not None:
            return self.memory_gb
        return self.device_type.memory_gb if self.device_type else None


@dataclass(frozen=True)
class BatchPlan(Typed):
    accelerator: str
    backend: str
    gpu_type: str
    nodes: int
    devices_per_node: int
    world_size: int
    global_batch: int
    micro_batch: int
    accumulation: int
    steps: int
    warmup_steps: int
    epochs: float | None  # None when the trainer's data set size is not known (a user's script)
    lr: float
    precision: str
    tf32: bool
    reproducibility: str
    memory_gb: float | None
    est_memory_gb: float | None
    comparable: bool
    warnings: list
    memory_source: str = "estimate"  # est_memory_gb from the footprint estimate, or measured by the memory probe
    strategy: str = "ddp"  # recipe.parallel.strategy: ddp (a replica per device) or fsdp (sharded)
