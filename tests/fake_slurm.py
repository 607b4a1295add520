"""Captured scheduler output and a stand-in `sinfo` on PATH, for tests that need no real cluster."""

import os
import stat
from pathlib import Path

# `sinfo` (hwsweep.cluster.slurm.SINFO) on tests/slurm/cluster.py with h100-2 drained and a job holding
# every GPU of h100-1.
CLUSTER = """\
cpu-1|cpu*|idle|0/8/0/8|16000|0|(null)|gpu:0|none|
h100-1|gpu-h100|mixed|1/15/0/16|32000|500|gpu:h100:4|gpu:h100:4(IDX:0-3)|none|
h100-2|gpu-h100|drained|0/0/16/16|32000|0|gpu:h100:4|gpu:h100:0(IDX:N/A)|test|
l40s-1|gpu-l40s|idle|0/8/0/8|16000|0|gpu:l40s:2|gpu:l40s:0(IDX:N/A)|none|
rtx-1|gpu-rtx|idle|0/8/0/8|16000|0|gpu:rtx6000:2|gpu:rtx6000:0(IDX:N/A)|none|
"""


def fake_sinfo(monkeypatch, folder: Path, stdout: str = CLUSTER, rc: int = 0, sleep: float = 0, stderr: str = "") -> dict:
    """Put first on PATH a `sinfo` that prints `stdout` (after `sleep` s) and exits `rc`; returns the environment."""
    bin_dir = folder / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "out.txt").write_text(stdout)
    (bin_dir / "err.txt").write_text(stderr)
    script = bin_dir / "sinfo"
    script.write_text(f"#!/bin/sh\nsleep {sleep}\ncat '{bin_dir}/out.txt'\ncat '{bin_dir}/err.txt' >&2\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    # snakemake's slurm plugin refuses to load without squeue; an empty queue, on a machine without SLURM
    queue = bin_dir / "squeue"
    queue.write_text("#!/bin/sh\nexit 0\n")
    queue.chmod(queue.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return dict(os.environ)
