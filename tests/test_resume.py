"""Preemption and resume under real torchrun: SIGTERM mid-run, rerun, same bits as an uninterrupted run."""

import json
import os
import signal
import subprocess
import time

import pytest
import torch
from conftest import BIN

from hwsweep.contracts import io
from hwsweep.plan.config import resolve
from hwsweep.run.train import EXIT_PREEMPTED

pytestmark = pytest.mark.slow


def _spec(tmp_path, small_config, name):
    small_config["recipe"] |= {"reproducibility": "strict", "checkpoint_every": 10}
    small_config["recipe"]["schedule"] = {"steps": 400, "warmup_steps": 5}
    spec = resolve(small_config).spec("tiny", "default", "cpu2", 0).to_dict() | {"run_dir": str(tmp_path / name)}
    io.write_json(tmp_path / f"{name}.json", spec)
    return [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", "-m", "hwsweep.run.train",
            str(tmp_path / f"{name}.json")]  # fmt: skip


def test_sigterm_checkpoints_and_rerun_resumes_bitwise(tmp_path, small_config):
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    cmd = _spec(tmp_path, small_config, "cut")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ckpts = tmp_path / "cut" / "checkpoints"
    deadline = time.monotonic() + 120
    while not list(ckpts.glob("step*.pt")) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert f"exiting {EXIT_PREEMPTED}" in out, out[-3000:]
    assert not (tmp_path / "cut" / "train.json").exists()
    cut_at = max(int(p.stem[4:]) for p in ckpts.glob("step*.pt"))
    assert 0 < cut_at < 400

    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)  # the rerun resumes on its own
    subprocess.run(_spec(tmp_path, small_config, "whole"), env=env, check=True, capture_output=True, timeout=300)
    cut = json.loads((tmp_path / "cut" / "train.json").read_text())
    whole = json.loads((tmp_path / "whole" / "train.json").read_text())
    assert cut["restarts"] == 1 and cut["resumed_from_step"] == cut_at and whole["restarts"] == 0
    assert cut["curves"]["loss"]["values"] == whole["curves"]["loss"]["values"]
    a = torch.load(tmp_path / "cut" / "final.pt", weights_only=False)
    b = torch.load(tmp_path / "whole" / "final.pt", weights_only=False)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
