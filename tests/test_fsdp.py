"""Fully sharded data parallel (recipe.parallel.strategy: fsdp): the plan's sharded memory and its refusals."""

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml
from conftest import BIN, REPO

from hwsweep.contracts import io
from hwsweep.contracts.command import plan_values
from hwsweep.contracts.spec import FINAL_CHECKPOINT, TRAIN_RECORD
from hwsweep.contracts.hardware import GB
from hwsweep.models import footprint
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.plan.table import plan_rows
from hwsweep.run.train import EXIT_PREEMPTED


def big_config(small_config, strategy="ddp", memory_gb=0.1, devices=2, **recipe):
    """A transformer of ~9.5M parameters (~150 MB of fp32 weights, gradients and AdamW state) on CPU entries
    that declare `memory_gb` per device: too big for DDP at 0.1 GB."""
    cfg = small_config
    cfg["recipe"] |= {"global_batch": 16, "micro_batch": 4, "parallel": {"strategy": strategy}} | recipe
    cfg["recipe"]["model"] = {"width": 256, "depth": 12, "heads": 4}
    cfg["hardware"] = {f"cpu{n}": {"accelerator": "cpu", "devices_per_node": n, "memory_gb": memory_gb}
                       for n in (1, devices)}  # fmt: skip
    cfg["hardware"]["cpu1"]["memory_gb"] = 1.0  # the baseline fits either way
    return cfg


def test_ddp_too_big_for_the_declared_memory_is_refused_naming_fsdp_and_the_device_count(small_config):
    with pytest.raises(ConfigError) as err:
        resolve(big_config(small_config, devices=4))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("recipe.parallel.strategy: ddp keeps a whole replica per device")
    assert "hardware cpu4" in msg and "set parallel.strategy: fsdp" in msg and "on this hardware's 4 devices" in msg
    # Two devices are too few for FSDP too: the advisor names the fewest that fit.
    with pytest.raises(ConfigError, match=r"fsdp, which needs .* GB per device on 4 devices \(a hardware entry"):
        resolve(big_config(small_config, memory_gb=0.07, devices=2))


def test_fsdp_plans_the_sharded_state_per_device(small_config):
    matrix = resolve(big_config(small_config, "fsdp", devices=4))
    plan = matrix.spec("tiny", "default", "cpu4", 0).plan
    assert plan.strategy == "fsdp" and plan.est_memory_gb * GB <= 0.1 * GB
    one = matrix.spec("tiny", "default", "cpu1", 0).plan
    r = matrix.cells[0].recipe
    n = footprint.parameter_count(r.model, r.task)
    state = n * footprint.FP32 * (2 + footprint.ADAMW_STATE)
    # What sharding saves from 1 to 4 devices is three quarters of the weights, gradients and AdamW state
    # (the micro-batch, activations and gathered blocks are the same).
    assert (one.est_memory_gb - plan.est_memory_gb) * GB == pytest.approx(state * 3 / 4, rel=1e-3)  # est_memory_gb: 4 decimals
    ddp = footprint.device_bytes(r.model, r.task, 4, 1, False, "cpu")
    assert plan.est_memory_gb * GB < ddp / 2


def test_strategy_is_a_sweepable_recipe_key_and_a_plan_value(small_config):
    small_config["suites"]["tiny"]["sweep"] = {"parallel.strategy": ["ddp", "fsdp"]}
    matrix = resolve(small_config)
    assert [c.variant for c in matrix.cells] == ["strategy-ddp", "strategy-fsdp"]
    spec = matrix.spec("tiny", "strategy-fsdp", "cpu2", 0)
    assert spec.plan.strategy == "fsdp" and spec.recipe.parallel.reshard_after_forward is True
    assert plan_values(spec).items() >= {"strategy": "fsdp", "fsdp": True, "reshard_after_forward": True}.items()
    assert plan_values(matrix.spec("tiny", "strategy-ddp", "cpu2", 0))["fsdp"] is False
    rows = {(r["variant"], r["hardware"]): r for r in plan_rows(matrix)}  # hwsweep plan's table
    assert rows[("strategy-fsdp", "cpu2")]["strategy"] == "fsdp" and rows[("strategy-ddp", "cpu2")]["strategy"] == "ddp"


@pytest.mark.parametrize("recipe, words", [
    ({"reproducibility": "strict"}, "fsdp cannot keep reproducibility strict's promise"),
    ({"precision": "fp16-mixed"}, "use precision: bf16-mixed or strategy: ddp"),
])  # fmt: skip
def test_fsdp_refuses_what_it_cannot_keep_in_one_line(small_config, recipe, words):
    small_config["recipe"] |= recipe | {"parallel": {"strategy": "fsdp"}}
    with pytest.raises(ConfigError) as err:
        resolve(small_config)
    assert str(err.value).startswith("recipe.parallel.strategy: fsdp") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_every_block_of_the_built_in_families_is_a_shard_unit():
    from types import SimpleNamespace

    from hwsweep.models import families
    from hwsweep.run.reduce import shard_units

    task = SimpleNamespace(name="sort", length=8, vocab_size=16)
    model = families.torch_side("transformer").build(SimpleNamespace(
        task=task, model=SimpleNamespace(name="transformer", width=32, depth=3, heads=2, mlp_ratio=4)))  # fmt: skip
    assert shard_units(model) == list(model.blocks)
    sudoku = SimpleNamespace(name="sudoku", size=4, blanks=6, augmentation=0, eval_views=0, train_size=8, eval_size=8,
                             length=16, vocab_size=5, num_puzzle_ids=1)  # fmt: skip
    hrm = SimpleNamespace(name="hrm", width=32, heads=2, mlp_ratio=4, h_layers=2, l_layers=3, h_cycles=1, l_cycles=1,
                          halt_max_steps=2, halt_exploration_prob=0.1, act_mode="act", puzzle_emb_ndim=0,
                          positions="rope", loss="stablemax_cross_entropy", embed_scale=True,
                          halt_exploration="per_segment")  # fmt: skip
    model = families.torch_side("hrm").build(SimpleNamespace(task=sudoku, model=hrm))
    units = shard_units(model)
    assert len(units) == 5 and all(type(u).__name__ == "Block" for u in units)


# -- real torchrun (gloo, CPU): FSDP trains, is killed, resumes, matches DDP, reshards -------------------
# A model of 0.2M parameters on CPU entries declaring 3.7 MB per device: DDP's plan needs 4.1 MB, FSDP's
# 3.4 MB on 2 devices and 2.6 MB on 4 (the DDP comparison runs on an entry without the declaration).
TOO_BIG = 0.0037


def _config(small_config, strategy: str, devices: int = 2, steps: int = 30, memory_gb=TOO_BIG) -> dict:
    cfg = copy.deepcopy(small_config)
    # log_every 2: the stop flag is read every 2 steps, so a SIGTERM stops the run well before its end
    cfg["recipe"] |= {"parallel": {"strategy": strategy}, "checkpoint_every": 10, "reproducibility": "deterministic",
                      "log_every": 2, "model": {"width": 64, "depth": 4, "heads": 2}}  # fmt: skip
    cfg["recipe"]["schedule"] = {"steps": steps, "warmup_steps": 5}
    cfg["hardware"] = {"gpus": {"accelerator": "cpu", "devices_per_node": devices}}
    if memory_gb is not None:
        cfg["hardware"]["gpus"]["memory_gb"] = memory_gb
    cfg["baseline"] = "gpus"
    return cfg


def _spec(tmp_path, small_config, strategy: str, name: str, devices: int = 2, steps: int = 30) -> list[str]:
    """The torchrun command of one run on hardware entry `gpus` with `devices` processes (the same name at
    any device count: the same run moved to another world size)."""
    memory = TOO_BIG if strategy == "fsdp" else None
    cfg = _config(small_config, strategy, devices, steps, memory)
    spec = resolve(cfg).spec("tiny", "default", "gpus", 0).to_dict() | {"run_dir": str(tmp_path / name)}
    io.write_json(tmp_path / f"{name}-{devices}.json", spec)
    return [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", str(devices), "-m", "hwsweep.run.train",
            str(tmp_path / f"{name}-{devices}.json")]  # fmt: skip


ENV = os.environ | {"OMP_NUM_THREADS": "1"}


def _run(cmd) -> None:
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def _results(tmp_path, name):
    record = json.loads((tmp_path / name / TRAIN_RECORD).read_text())
    return record, torch.load(tmp_path / name / FINAL_CHECKPOINT, weights_only=False)["model"]


def _stopped(proc, out: str) -> str:
    """SIGTERM to a running torchrun: the run checkpoints at a step all ranks agree on and exits preempted."""
    proc.send_signal(signal.SIGTERM)
    out += proc.communicate(timeout=300)[0]
    assert f"exiting {EXIT_PREEMPTED}" in out, out[-3000:]
    return out


@pytest.mark.slow
def test_fsdp_trains_is_killed_resumes_bitwise_and_matches_ddp(tmp_path, small_config):
    with pytest.raises(ConfigError, match="set parallel.strategy: fsdp, which needs .* on this hardware's 2 devices"):
        resolve(_config(small_config, "ddp"))  # the model is too big for DDP on this entry
    cmd = _spec(tmp_path, small_config, "fsdp", "cut")
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ckpts = tmp_path / "cut" / "checkpoints"
    deadline = time.monotonic() + 300
    while not list(ckpts.glob("step*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    _stopped(proc, "")
    cut_at = max(int(p.name[4:]) for p in ckpts.glob("step*"))
    assert 0 < cut_at < 30 and (ckpts / f"step{cut_at:09d}" / ".metadata").is_file()  # DCP's shards, complete
    _run(cmd)  # the rerun resumes from the sharded checkpoint
    _run(_spec(tmp_path, small_config, "fsdp", "whole"))
    _run(_spec(tmp_path, small_config, "ddp", "ddp"))
    (cut, p_cut), (whole, p_whole), (ddp, p_ddp) = (_results(tmp_path, n) for n in ("cut", "whole", "ddp"))
    assert cut["restarts"] == 1 and cut["resumed_from_step"] == cut_at and whole["plan"]["strategy"] == "fsdp"
    assert cut["curves"]["loss"]["values"] == whole["curves"]["loss"]["values"]  # bitwise at the same world size
    assert all(torch.equal(p_cut[k], p_whole[k]) for k in p_whole)
    assert sorted(p_whole) == sorted(p_ddp)  # the consolidated final.pt holds the model as DDP's does
    losses, ddp_losses = whole["curves"]["loss"]["values"], ddp["curves"]["loss"]["values"]
    assert losses[-1] < losses[0]
    assert losses == pytest.approx(ddp_losses, rel=1e-4)  # same seeds: FSDP's reduction order only
    assert max((p_whole[k] - p_ddp[k]).abs().max().item() for k in p_ddp) < 1e-3
    assert len(list(ckpts.glob("step*"))) == 2 and not list(ckpts.glob(".step*"))  # keep-k, no half-written folder


@pytest.mark.slow
def test_a_sharded_checkpoint_resumes_at_another_world_size_and_the_record_says_so(tmp_path, small_config):
    _run(_spec(tmp_path, small_config, "fsdp", "whole", steps=30))  # the reference: uninterrupted at 2
    ckpts = tmp_path / "moved" / "checkpoints"
    proc = subprocess.Popen(_spec(tmp_path, small_config, "fsdp", "moved", steps=30), env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 300
    while not list(ckpts.glob("step*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    _stopped(proc, "")  # stopped at 2 processes ...
    # ... moved to 4 (the same hardware entry with more devices), stopped again there once it has resumed ...
    four = _spec(tmp_path, small_config, "fsdp", "moved", devices=4, steps=30)
    proc = subprocess.Popen(four, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = ""
    for line in proc.stdout:
        seen += line
        if "resumed from" in line:
            break
    assert "hwsweep: resharded the checkpoint of step" in seen and "from world size 2 to 4" in seen, seen[-3000:]
    _stopped(proc, seen)
    _run(four)  # ... and finished at 4
    (record, params), (whole, before) = _results(tmp_path, "moved"), _results(tmp_path, "whole")
    first, second, third = record["segments"]
    assert record["plan"]["world_size"] == 4 and record["restarts"] == 2
    assert second["resharded_from_world_size"] == 2 and "resharded_from_world_size" not in third
    assert 0 < second["start_step"] < third["start_step"] < 30
    cut = second["start_step"]
    assert record["curves"]["loss"]["values"][:cut] == whole["curves"]["loss"]["values"][:cut]  # bitwise until moved
    assert record["curves"]["loss"]["values"] == pytest.approx(whole["curves"]["loss"]["values"], rel=1e-4)
    assert max((params[k] - before[k]).abs().max().item() for k in before) < 1e-3


@pytest.mark.slow
def test_the_memory_plan_is_within_15_percent_of_the_measured_peak_at_world_sizes_1_2_4(tmp_path):
    """bench/fsdp.py's measurement (peak RSS growth over training a 4.8M-parameter transformer, torch's own
    setup excluded) against footprint.device_bytes: FSDP with shards = N, and DDP, whose gradients are its
    buckets' views (one copy, as planned, at every N); the ±15% goal of the plan."""
    out = tmp_path / "fsdp.json"
    cmd = [sys.executable, str(REPO / "bench" / "fsdp.py"), "--width", "256", "--depth", "6", "--length", "16",
           "--steps", "3", "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=900, env=ENV)
    rows = {(r["strategy"], r["world_size"]): r for r in json.loads(out.read_text())}
    assert sorted(rows) == [(s, n) for s in ("ddp", "fsdp") for n in (1, 2, 4)]
    for key, r in rows.items():
        assert r["peak_bytes"] == pytest.approx(r["planned_bytes"], rel=0.15), (key, r)
    assert rows["fsdp", 4]["peak_bytes"] < 0.5 * rows["fsdp", 1]["peak_bytes"]  # sharding, not noise: 1/N of the state


@pytest.mark.slow
def test_hrm_trains_and_evaluates_during_training_under_fsdp_like_ddp(tmp_path):
    """HRM calls its blocks several times per step and its evaluator calls model.predict, not forward: the
    sharded root is gathered for it (run.evaluate) and every rank takes part (run.evaluates)."""
    cfg = yaml.safe_load((REPO / "config" / "hrm_cpu.yaml").read_text())
    cfg["recipe"] |= {"global_batch": 16, "micro_batch": 8, "eval_every": 5, "eval_subset": 16, "checkpoint_every": 5}
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    cfg |= {"suites": {"s": {"sweep": {"parallel.strategy": ["ddp", "fsdp"]}}}, "seeds": [0], "baseline": "cpu2",
            "hardware": {"cpu2": {"accelerator": "cpu", "devices_per_node": 2}}}  # fmt: skip
    cfg.pop("compare", None)
    matrix = resolve(cfg)
    curves = {}
    for variant in ("strategy-ddp", "strategy-fsdp"):
        spec = matrix.spec("s", variant, "cpu2", 0).to_dict() | {"run_dir": str(tmp_path / variant)}
        io.write_json(tmp_path / f"{variant}.json", spec)
        _run([str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", "-m", "hwsweep.run.train",
              str(tmp_path / f"{variant}.json")])  # fmt: skip
        curves[variant] = _results(tmp_path, variant)[0]["curves"]
    ddp, fsdp = curves["strategy-ddp"], curves["strategy-fsdp"]
    assert fsdp["eval_token_accuracy"]["steps"] == [5, 10]
    assert fsdp["eval_token_accuracy"]["values"] == pytest.approx(ddp["eval_token_accuracy"]["values"], abs=0.02)
    assert fsdp["loss"]["values"] == pytest.approx(ddp["loss"]["values"], rel=1e-4)


def test_the_strategy_is_part_of_the_device_description_and_of_a_diagnosis():
    import pandas as pd

    from hwsweep.analysis.diagnose import differences
    from hwsweep.analysis.words import devices

    assert devices({"world_size": 2, "gpu_type": "H100-80GB", "strategy": "fsdp"}) == "2 × H100-80GB, FSDP"
    assert devices({"world_size": 2, "gpu_type": "H100-80GB", "strategy": "ddp"}) == "2 × H100-80GB"
    assert devices({"world_size": 1, "gpu_type": "cpu"}) == "1 × cpu"  # a runs.csv from before the column
    runs, base = pd.DataFrame({"strategy": ["fsdp"]}), pd.DataFrame({"strategy": ["ddp"]})
    assert "parallel strategy: strategy fsdp vs ddp" in differences(runs, base)
