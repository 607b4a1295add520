"""Facts about where a run happens, torch-free: the git commit of a checkout, the scheduler's
node name, the environment variables worth recording."""

from __future__ import annotations

import os
import socket
import subprocess

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


def git(folder, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def node_name() -> str:
    """The scheduler's name for this node where there is one (several may share a host)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def recorded_env() -> dict:
    return {k: os.environ[k] for k in RECORDED_ENV if k in os.environ}
