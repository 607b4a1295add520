"""The trainer under real torchrun (gloo, CPU): parity across world sizes."""

import json
import subprocess

import pytest
import torch
from conftest import launcher, one_thread

from hwsweep.contracts import io
from hwsweep.contracts.spec import FINAL_CHECKPOINT, TRAIN_RECORD
from hwsweep.plan.config import resolve

pytestmark = pytest.mark.slow


def _config(small_config, level: str, steps: int, world_sizes=(1, 2, 4)):
    cfg = small_config
    cfg["recipe"] |= {"reproducibility": level, "global_batch": 32, "micro_batch": 8}
    cfg["recipe"]["schedule"] = {"steps": steps, "warmup_steps": 5}
    cfg["hardware"] = {f"cpu{n}": {"accelerator": "cpu", "devices_per_node": n} for n in world_sizes}
    cfg["seeds"] = [7]
    return resolve(cfg)


def train(tmp_path, matrix, hardware: str, threads: int = 2, global_batch: int | None = None):
    spec = matrix.spec("tiny", "default", hardware, 7).to_dict()
    spec["run_dir"] = str(tmp_path / hardware)
    if global_batch:  # the naive setup: per-device batch fixed, global batch grows with devices
        spec["recipe"]["global_batch"] = spec["plan"]["global_batch"] = global_batch
        spec["plan"]["accumulation"] = global_batch // (spec["plan"]["world_size"] * spec["plan"]["micro_batch"])
    path = tmp_path / f"{hardware}.json"
    io.write_json(path, spec)
    n = spec["plan"]["devices_per_node"]
    cmd = [*launcher(n), "-m", "hwsweep.run.train", str(path), "--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=one_thread())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / hardware / TRAIN_RECORD).read_text())
    params = torch.load(tmp_path / hardware / FINAL_CHECKPOINT, weights_only=False)["model"]
    return record, params


def test_strict_mode_is_bitwise_equal_at_world_sizes_1_2_4(tmp_path, small_config):
    matrix = _config(small_config, "strict", steps=32)
    runs = {n: train(tmp_path, matrix, f"cpu{n}") for n in (1, 2, 4)}
    (rec1, p1) = runs[1]
    assert rec1["plan"]["accumulation"] == 4 and runs[2][0]["plan"]["accumulation"] == 2
    assert runs[4][0]["plan"]["accumulation"] == 1
    assert len(rec1["curves"]["loss"]["values"]) == 32
    for n in (2, 4):
        rec, params = runs[n]
        assert rec["curves"]["loss"]["values"] == rec1["curves"]["loss"]["values"]  # exact float equality, every step
        assert all(torch.equal(params[k], p1[k]) for k in p1)
    assert rec1["curves"]["loss"]["values"][-1] < rec1["curves"]["loss"]["values"][0]


def test_deterministic_standard_ddp_stays_within_1e5_and_naive_setup_diverges(tmp_path, small_config):
    matrix = _config(small_config, "deterministic", steps=25, world_sizes=(1, 2))
    rec1, _ = train(tmp_path, matrix, "cpu1")
    rec2, _ = train(tmp_path, matrix, "cpu2")
    diffs = [abs(a - b) for a, b in zip(rec1["curves"]["loss"]["values"], rec2["curves"]["loss"]["values"], strict=True)]
    assert max(diffs) < 1e-5, diffs
    assert rec2["plan"]["threads_per_process"] == 1 and rec1["plan"]["threads_per_process"] == 2

    # Contrast: keep 8 per device x 4 accumulation on 2 devices -> global batch 64, not 32.
    naive, _ = train(tmp_path / "naive", matrix, "cpu2", global_batch=64)
    assert abs(naive["curves"]["loss"]["values"][0] - rec1["curves"]["loss"]["values"][0]) > 1e-3
