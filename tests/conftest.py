import copy
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Plans must not depend on peaks a memory probe cached on this machine (hwsweep detect on a GPU):
# every test, and every snakemake it starts, sees an empty cache of its own.
os.environ["HWSWEEP_MEMORY_CACHE"] = str(Path(tempfile.mkdtemp(prefix="hwsweep-test-")) / "memory.json")

# A small matrix: 1 suite x 1 variant x 2 seeds x (cpu1 + cpu2), a few seconds per run.
SMALL = {
    "recipe": {
        "task": {"length": 8, "vocab_size": 16, "train_size": 4000, "eval_size": 500},
        "model": {"width": 32, "depth": 1, "heads": 2},
        "schedule": {"steps": 60, "warmup_steps": 5},
        "global_batch": 32,
        "micro_batch": 8,
        "checkpoint_every": 25,
    },
    "suites": {"tiny": {"description": "test suite"}},
    "seeds": [0, 1],
    "hardware": {
        "cpu1": {"accelerator": "cpu", "devices_per_node": 1},
        "cpu2": {"accelerator": "cpu", "devices_per_node": 2},
    },
    "baseline": "cpu1",
}


@pytest.fixture
def small_config():
    return copy.deepcopy(SMALL)


def write_config(folder: Path, cfg: dict) -> Path:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def snakemake(workdir: Path, cfg: dict | None, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """The real snakemake CLI on the repo's Snakefile, in `workdir`, with `cfg` as the only config
    (written to workdir/config.yaml; None: the config.yaml already there)."""
    path = workdir / "config.yaml" if cfg is None else write_config(workdir, cfg)
    cmd = [
        str(BIN / "snakemake"),
        "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir),
        "--configfile", str(path),
        "--replace-workflow-config",
        *args,
    ]  # fmt: skip
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
