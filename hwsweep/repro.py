"""Seeding, reproducibility levels and provenance."""

from __future__ import annotations

import os
import platform
import random
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

LEVELS = ("comparable", "deterministic", "strict")

# Environment variables that change how a run behaves or where it ran; recorded with each run.
RECORDED_ENV = (
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "CUBLAS_WORKSPACE_CONFIG",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "SLURM_JOB_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_PARTITION",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GPUS_ON_NODE",
    "SLURMD_NODENAME",
)


def prepare_environment(level: str) -> None:
    """Call before any CUDA work: cuBLAS reads this when its handle is created."""
    if level != "comparable":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def apply_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"recipe.reproducibility: unknown level {level!r}; use one of {LEVELS}")
    torch.backends.cudnn.benchmark = False  # autotuning picks kernels by timing: never comparable
    deterministic = level != "comparable"
    torch.backends.cudnn.deterministic = deterministic
    torch.use_deterministic_algorithms(deterministic)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _git(*args: str) -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def node_name() -> str:
    """The scheduler's name for this node where there is one (several may share a host)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def provenance(device_names: list[str]) -> dict:
    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except (RuntimeError, AttributeError):
            nccl = None
    status = _git("status", "--porcelain")
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": nccl,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "devices": device_names,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "env": {k: os.environ[k] for k in RECORDED_ENV if k in os.environ},
    }
