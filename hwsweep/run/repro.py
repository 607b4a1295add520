"""Seeding, reproducibility levels and provenance."""

from __future__ import annotations

import os
import platform
import random
import socket
import sys
from pathlib import Path

import numpy as np
import torch

from hwsweep.contracts import host
from hwsweep.run import lazy_dynamo

LEVELS = ("comparable", "deterministic", "strict")


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
    lazy_dynamo.use_deterministic_algorithms(deterministic)


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


def provenance(device_names: list[str]) -> dict:
    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except (RuntimeError, AttributeError):
            nccl = None
    here = Path(__file__).resolve().parent
    status = host.git(here, "status", "--porcelain")
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": nccl,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "devices": device_names,
        "git_commit": host.git(here, "rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "env": host.recorded_env(),
    }
