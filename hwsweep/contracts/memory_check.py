"""A run's memory held against its plan: what each rank used above where it started, beside the plan's figure per
device, and the check a run over its plan gets in its record (which `status` and the report show).

What a rank used: on a GPU, the most torch's allocator handed out (max_memory_allocated) above what it held before
the model was built; on a CPU, the peak resident set above the resident set before the model was built (the
baseline: the interpreter, torch, the process group and the data, 210-300 MB that the plan does not count). The
plan's figure is compared without the CUDA context it reserves on a GPU (the allocator does not see it), and on a
CPU with an allowance for what torch maps on first use of its kernels and collectives (FIRST_USE_BYTES, measured
on small runs, docs/fsdp.md), which the plan does not count either. The tolerance is the GPU check's
(bench/gpucheck/memory.py): a run that used more than the plan by over TOLERANCE is flagged, not failed.
Torch-free."""

from __future__ import annotations

from hwsweep.contracts.hardware import GB

TOLERANCE = 0.15  # measured / planned within +-15%: the GPU check's goal, and the flag's threshold above the plan
# A CPU rank's growth that no plan counts: the code and buffers torch, its optimizers, checkpointing and gloo map on
# first use (36-53 MB measured on runs of a 0.4 MB plan, DDP and FSDP, 2026-12-07), and with recipe.compile
# TorchDynamo's and inductor's (66 MB more measured). Above the tolerance: a rank's growth passes them only with
# memory the plan should have counted.
FIRST_USE_BYTES = 80 * 2**20
COMPILE_BYTES = 160 * 2**20
CHECK = "memory"  # the record's check names it first: "memory: ..."


def comparable_plan_bytes(planned_gb: float, accelerator: str, context_bytes: int, compiled: bool) -> float:
    """The plan's figure per device as the measurement sees it: without the CUDA context (`context_bytes`,
    hwsweep.models.footprint's) on a GPU, with torch's first-use allowance (and compile's) on a CPU."""
    if accelerator == "cuda":
        return max(planned_gb * GB - context_bytes, 0.0)
    return planned_gb * GB + FIRST_USE_BYTES + (COMPILE_BYTES if compiled else 0)


def over_plan(planned_gb: float | None, accelerator: str, context_bytes: int, ranks: list[dict],
              compiled: bool = False) -> str | None:  # fmt: skip
    """The record's check when a rank used more than the plan allows (`ranks`: each rank's {peak_gb, baseline_gb};
    `compiled`: recipe.compile), naming the rank that used most; None when every rank kept within it, or the run
    has no plan figure."""
    if planned_gb is None or not ranks:
        return None
    allowed = comparable_plan_bytes(planned_gb, accelerator, context_bytes, compiled)
    rank, most = max(enumerate(r["peak_gb"] - r["baseline_gb"] for r in ranks), key=lambda x: x[1])
    if most * GB <= allowed * (1 + TOLERANCE):
        return None
    over = most * GB / allowed - 1 if allowed else float("inf")
    return (f"{CHECK}: rank {rank} used {most:.3f} GB above its start, over the plan's {allowed / GB:.3f} GB "
            f"by {over:.0%} (tolerance {TOLERANCE:.0%})")


def flagged(checks: list) -> bool:
    """Whether a record's checks hold the memory check."""
    return any(isinstance(c, str) and c.startswith(f"{CHECK}:") for c in checks)
