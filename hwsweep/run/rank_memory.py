"""Each rank's memory, for the records: what it held before the model was built (the baseline) and its peak, on a
GPU torch's allocator's count, on a CPU the resident set; gathered from every rank at run.finish() and at the end
of an evaluation, and held against the plan there (hwsweep.contracts.memory_check)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from hwsweep.contracts import host
from hwsweep.contracts.hardware import GB

SOURCE = {"cuda": "cuda_max_memory_allocated"}  # elsewhere host_rss


def held_bytes(device: torch.device) -> int:
    """What this rank holds now: the baseline a run's growth is measured from."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else host.resident_bytes()


def peak_bytes(device: torch.device) -> int:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else host.peak_rss_bytes()


def per_rank(device: torch.device, baseline: int) -> list[dict]:
    """Every rank's {peak_gb, baseline_gb}, in rank order (a collective: every rank calls it)."""
    mine = torch.tensor([float(peak_bytes(device)), float(baseline)], dtype=torch.float64, device=device)
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return [{"peak_gb": round(t[0].item() / GB, 4), "baseline_gb": round(t[1].item() / GB, 4)} for t in every]


def alone(device: torch.device, baseline: int) -> list[dict]:
    """per_rank's list for a process outside any process group (a one-process evaluation)."""
    return [{"peak_gb": round(peak_bytes(device) / GB, 4), "baseline_gb": round(baseline / GB, 4)}]


def source(device: torch.device) -> str:
    return SOURCE.get(device.type, "host_rss")
