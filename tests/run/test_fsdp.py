"""Fully sharded data parallel (recipe.parallel.strategy: fsdp): the plan's sharded memory and its refusals."""

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml
from conftest import REPO, SMALL, helper_env, launcher, one_thread
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwsweep.contracts import io
from hwsweep.contracts.command import plan_values
from hwsweep.contracts.spec import TRAIN_RECORD
from hwsweep.contracts.hardware import GB
from hwsweep.models import footprint
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.plan.table import plan_rows
from hwsweep.run import export
from hwsweep.run.runner import descendants
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
    assert msg.startswith("recipe.parallel.strategy: ddp at micro-batch 4 needs 0.147 GB per device, over the device's "
                          "0.1 GB")  # fmt: skip
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
    state = n * footprint.FP32 * (2 + footprint.OPTIMIZER_STATE["adamw"])
    # What sharding saves from 1 to 4 devices is three quarters of the weights, gradients and AdamW state
    # (the micro-batch, activations and gathered blocks are the same).
    assert (one.est_memory_gb - plan.est_memory_gb) * GB == pytest.approx(state * 3 / 4, rel=1e-3)  # est_memory_gb: 4 decimals
    ddp = footprint.device_bytes(r.model, r.task, 4, 1, False, "cpu")
    assert plan.est_memory_gb * GB < ddp / 2


def test_sgd_keeps_no_optimizer_state_and_the_plan_counts_each_optimizers_own(small_config):
    """recipe.optimizer.name: sgd, the state-light optimizer FSDP needs for a rank to hold less than the whole
    weights at 4 devices: torch's SGD without momentum, whose weight decay is then AdamW's decoupled one, keeps no
    tensor; the plan counts 8 bytes per parameter for it where the Adams keep 16 (under DDP, and divided by the
    shards under FSDP), from the one table (footprint.OPTIMIZER_STATE) that has every name the schema allows."""
    import dataclasses

    from hwsweep.plan.batch import device_need
    from hwsweep.plan.config import load_schema
    from hwsweep.run import optimizers

    names = load_schema()["$defs"]["recipe"]["properties"]["optimizer"]["properties"]["name"]["enum"]
    assert sorted(names) == sorted(optimizers.NAMES) == sorted(footprint.OPTIMIZER_STATE)
    small_config["recipe"]["optimizer"] = {"name": "sgd", "lr": 20.0, "weight_decay": 0.1}  # SGD's lr has no cap at 10
    sgd = resolve(small_config).cells[0].recipe
    start, grad = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([0.25, 4.0, -1.0])
    p = torch.nn.Parameter(start.clone())
    opt = optimizers.build([p], sgd.optimizer, 0.01, "cpu")
    for _ in range(2):
        p.grad = grad.clone()
        opt.step()
    expected = start
    for _ in range(2):
        expected = expected * (1 - 0.01 * 0.1) - 0.01 * grad
    torch.testing.assert_close(p.detach(), expected)
    assert type(opt) is torch.optim.SGD and not [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    adamw = dataclasses.replace(sgd, optimizer=dataclasses.replace(sgd.optimizer, name="adamw", lr=0.003))
    n = footprint.parameter_count(sgd.model, sgd.task)
    for shards in (0, 2, 4):  # DDP, FSDP over 2 and 4
        saved = device_need(adamw, "cpu", "fp32", 4, 1, shards) - device_need(sgd, "cpu", "fp32", 4, 1, shards)
        assert saved == pytest.approx(2 * footprint.FP32 * n / max(shards, 1), abs=1), shards


def test_activation_checkpointing_is_a_sweepable_recipe_key_the_plan_counts(small_config):
    small_config["recipe"] |= {"micro_batch": "auto"}
    small_config["recipe"]["model"] |= {"depth": 4}
    small_config["suites"]["tiny"]["sweep"] = {"activation_checkpointing": ["none", "full", "selective"]}
    r = resolve(small_config).cells[0].recipe
    need = {m: footprint.device_bytes(r.model, r.task, 16, 1, False, "cpu", checkpointing=m) for m in ("none", "full")}
    # A device on which 16 samples per micro-batch fit with full checkpointing but not without (auto aims at 75%)
    small_config["hardware"]["cpu2"]["memory_gb"] = (need["none"] + need["full"]) / 2 / 0.75 / GB
    matrix = resolve(small_config)
    assert [c.variant for c in matrix.cells] == [f"activation_checkpointing-{m}" for m in ("none", "full", "selective")]
    plans = {m: matrix.spec("tiny", f"activation_checkpointing-{m}", "cpu2", 0) for m in ("none", "full", "selective")}
    assert plans["full"].recipe.activation_checkpointing == "full"
    assert plan_values(plans["selective"])["activation_checkpointing"] == "selective"
    micro = {m: spec.plan.micro_batch for m, spec in plans.items()}
    assert micro["none"] < micro["full"] == 16 and micro["none"] <= micro["selective"], micro  # auto fits more


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


def test_fp16_under_fsdp_is_refused_however_it_is_set(small_config):
    """The hardware's precision (allowed to differ by advisor.allow_precision_mismatch) slipped past the recipe's check."""
    small_config["recipe"] |= {"parallel": {"strategy": "fsdp"}}
    small_config["hardware"]["cpu2"]["precision"] = "fp16-mixed"
    small_config["advisor"] = {"allow_precision_mismatch": True}
    with pytest.raises(ConfigError, match=r"^recipe.parallel.strategy: fsdp does not run fp16-mixed .*, and hardware "
                                          r"precision fp16-mixed asks for it \(suite tiny, variant default, hardware cpu2\)"):  # fmt: skip
        resolve(small_config)
    small_config["hardware"]["cpu2"]["precision"] = "bf16-mixed"
    assert resolve(small_config).spec("tiny", "default", "cpu2", 0).plan.precision == "bf16-mixed"
    small_config["suites"]["tiny"]["sweep"] = {"precision": ["fp32", "fp16-mixed"]}  # and through a sweep
    with pytest.raises(ConfigError, match=r"^suites.tiny.parallel.strategy: fsdp does not run fp16-mixed"):
        resolve(small_config)


def test_an_fsdp_plan_over_the_device_memory_is_refused_naming_the_device_count_that_fits(small_config):
    # It only warned ("estimated 0.0 GB per device exceeds the device's 0.03 GB") and then ran out of memory.
    with pytest.raises(ConfigError) as err:
        resolve(big_config(small_config, "fsdp", memory_gb=0.06, devices=2))
    assert re.fullmatch(r"recipe.parallel.strategy: fsdp at micro-batch 4 needs 0.0\d+ GB per device, over the device's "
                        r"0.06 GB \(suite tiny, variant default, hardware cpu2\); it needs 0.0\d+ GB per device on 4 "
                        r"devices \(a hardware entry of nodes x devices_per_node = 4\)", str(err.value)), str(err.value)


@pytest.mark.parametrize("strategy, recipe, words", [
    ("ddp", {}, "neither ddp nor fsdp fits on any device count up to 1024"),
    ("fsdp", {}, "neither fsdp nor ddp fits on any device count up to 1024"),
    ("ddp", {"reproducibility": "strict"}, "; ddp fits on no device count up to 1024"),  # fsdp cannot be strict
])  # fmt: skip
def test_a_model_that_fits_no_device_count_is_refused_under_either_strategy(small_config, strategy, recipe, words):
    cfg = big_config(small_config, strategy, memory_gb=0.001, devices=2, **recipe)
    with pytest.raises(ConfigError) as err:
        resolve(cfg)
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert str(err.value).endswith("use a device with more memory, a smaller model or a smaller micro_batch")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.floats(0.9, 0.99999))
def test_a_refusal_never_prints_the_need_and_the_limit_as_the_same_number(small_config, share):
    cfg = big_config(copy.deepcopy(small_config), devices=2)
    cfg["hardware"]["cpu2"]["memory_gb"] = 1.0
    need = resolve(cfg).spec("tiny", "default", "cpu2", 0).plan.est_memory_gb
    cfg["hardware"]["cpu2"]["memory_gb"] = need * share  # just under what the plan needs
    with pytest.raises(ConfigError) as err:
        resolve(cfg)
    needs, limit = re.search(r"needs ([0-9.e-]+) GB per device, over the device's ([0-9.e-]+) GB", str(err.value)).groups()
    assert needs != limit and float(needs) > float(limit), str(err.value)


def test_every_block_and_the_embeddings_and_head_of_the_built_in_families_are_shard_units():
    from types import SimpleNamespace

    from hwsweep.models import families
    from hwsweep.run.reduce import shard_units

    task = SimpleNamespace(name="sort", length=8, vocab_size=16)
    model = families.torch_side("transformer").build(SimpleNamespace(
        task=task, model=SimpleNamespace(name="transformer", width=32, depth=3, heads=2, mlp_ratio=4)))  # fmt: skip
    # The blocks, then the embedding, the final norm and the head as units of their own; the root keeps `pos`.
    assert shard_units(model) == [*model.blocks, model.tok, model.norm, model.head]
    sudoku = SimpleNamespace(name="sudoku", size=4, blanks=6, augmentation=0, eval_views=0, train_size=8, eval_size=8,
                             length=16, vocab_size=5, num_puzzle_ids=1)  # fmt: skip
    hrm = SimpleNamespace(name="hrm", width=32, heads=2, mlp_ratio=4, h_layers=2, l_layers=3, h_cycles=1, l_cycles=1,
                          halt_max_steps=2, halt_exploration_prob=0.1, act_mode="act", puzzle_emb_ndim=0,
                          positions="rope", loss="stablemax_cross_entropy", embed_scale=True,
                          halt_exploration="per_segment")  # fmt: skip
    model = families.torch_side("hrm").build(SimpleNamespace(task=sudoku, model=hrm))
    units = shard_units(model)
    assert len(units) == 8 and all(type(u).__name__ == "Block" for u in units[:5])
    assert units[5:] == [model.input, model.head, model.q_head]  # H and L hold nothing beside their blocks


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
    return [*launcher(devices), "-m", "hwsweep.run.train", str(tmp_path / f"{name}-{devices}.json")]


def _run(cmd, env: dict | None = None) -> None:
    proc = subprocess.run(cmd, env=env or one_thread(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def _results(tmp_path, name):
    """(train record, final weights whole): an FSDP run's read from its sharded final checkpoint (hwsweep export's)."""
    record = json.loads((tmp_path / name / TRAIN_RECORD).read_text())
    return record, export.whole(tmp_path / name)["model"]


@pytest.fixture(scope="module")
def fsdp_whole(tmp_path_factory):
    """(record, final weights) of the uninterrupted FSDP run at 2 processes, 30 steps: the reference of both the
    killed and the moved run (one torchrun for the two tests)."""
    folder = tmp_path_factory.mktemp("fsdp_whole")
    _run(_spec(folder, copy.deepcopy(SMALL), "fsdp", "whole"))
    return _results(folder, "whole")


def _stopped(proc, out: str) -> str:
    """SIGTERM to a running torchrun: the run checkpoints at a step all ranks agree on and exits preempted."""
    proc.send_signal(signal.SIGTERM)
    out += proc.communicate(timeout=300)[0]
    assert f"exiting {EXIT_PREEMPTED}" in out, out[-3000:]
    return out


@pytest.mark.slow
def test_fsdp_trains_is_sigkilled_resumes_bitwise_and_matches_ddp(tmp_path, small_config, fsdp_whole):
    with pytest.raises(ConfigError, match="set parallel.strategy: fsdp, which needs .* on this hardware's 2 devices"):
        resolve(_config(small_config, "ddp"))  # the model is too big for DDP on this entry
    cmd = _spec(tmp_path, small_config, "fsdp", "cut")
    # SIGKILL to torchrun and its ranks (each in a session of its own) once a periodic checkpoint is complete:
    # nothing is written at the signal
    proc = subprocess.Popen(cmd, env=one_thread(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = tmp_path / "cut" / "checkpoints"
    deadline = time.monotonic() + 300
    while not list(ckpts.glob("step*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    ranks = descendants(proc.pid)
    for pid in [*ranks, proc.pid]:
        os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (tmp_path / "cut" / TRAIN_RECORD).exists()
    cut_at = max(int(p.name[4:]) for p in ckpts.glob("step*"))
    assert 0 < cut_at < 30 and (ckpts / f"step{cut_at:09d}" / ".metadata").is_file()  # DCP's shards, complete
    _run(cmd)  # the rerun resumes from the sharded checkpoint
    _run(_spec(tmp_path, small_config, "ddp", "ddp"))
    (cut, p_cut), (ddp, p_ddp) = (_results(tmp_path, n) for n in ("cut", "ddp"))
    whole, p_whole = fsdp_whole
    assert cut["restarts"] == 1 and cut["resumed_from_step"] == cut_at and whole["plan"]["strategy"] == "fsdp"
    assert cut["curves"]["loss"]["values"] == whole["curves"]["loss"]["values"]  # bitwise at the same world size
    assert all(torch.equal(p_cut[k], p_whole[k]) for k in p_whole)
    assert sorted(p_whole) == sorted(p_ddp)  # the exported model holds the model as DDP's final.pt does
    losses, ddp_losses = whole["curves"]["loss"]["values"], ddp["curves"]["loss"]["values"]
    assert losses[-1] < losses[0]
    assert losses == pytest.approx(ddp_losses, rel=1e-4)  # same seeds: FSDP's reduction order only
    assert max((p_whole[k] - p_ddp[k]).abs().max().item() for k in p_ddp) < 1e-3
    assert len(list(ckpts.glob("step*"))) == 2 and not list(ckpts.glob(".step*"))  # keep-k, no half-written folder


@pytest.mark.slow
def test_a_sharded_checkpoint_resumes_at_another_world_size_and_the_record_says_so(tmp_path, small_config, fsdp_whole):
    ckpts = tmp_path / "moved" / "checkpoints"
    proc = subprocess.Popen(_spec(tmp_path, small_config, "fsdp", "moved", steps=30), env=one_thread(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 300
    while not list(ckpts.glob("step*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    _stopped(proc, "")  # stopped at 2 processes ...
    # ... moved to 4 (the same hardware entry with more devices), stopped again there once it has resumed ...
    four = _spec(tmp_path, small_config, "fsdp", "moved", devices=4, steps=30)
    proc = subprocess.Popen(four, env=one_thread(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = ""
    for line in proc.stdout:
        seen += line
        if "resumed from" in line:
            break
    assert "hwsweep: resharded the checkpoint of step" in seen and "from world size 2 to 4" in seen, seen[-3000:]
    _stopped(proc, seen)
    _run(four)  # ... and finished at 4
    (record, params), (whole, before) = _results(tmp_path, "moved"), fsdp_whole  # the reference: uninterrupted at 2
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
    """bench/fsdp.py's measurement (peak RSS growth over training a 4.8M-parameter transformer whose activations
    are about as large as its state, torch's own setup excluded) against footprint.device_bytes: DDP, whose
    gradients are its buckets' views (one copy, as planned, at every N), FSDP with shards = N, and FSDP with full
    activation checkpointing; the ±15% goal of the plan, and checkpointing's saving as the plan counts it."""
    out = tmp_path / "fsdp.json"
    cmd = [sys.executable, str(REPO / "bench" / "fsdp.py"), "--width", "256", "--depth", "6", "--length", "128",
           "--micro-batch", "8", "--steps", "2", "--layouts", "ddp", "fsdp", "fsdp:full", "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=1500, env=one_thread())
    rows = {(r["strategy"], r["activation_checkpointing"], r["world_size"]): r for r in json.loads(out.read_text())}
    layouts = [("ddp", "none"), ("fsdp", "none"), ("fsdp", "full")]
    assert sorted(rows) == sorted((s, c, n) for s, c in layouts for n in (1, 2, 4))
    for key, r in rows.items():
        assert r["peak_bytes"] == pytest.approx(r["planned_bytes"], rel=0.15), (key, r)
    # sharding, not noise: with the activations checkpointed the state is most of the peak, and a quarter of it at 4
    assert rows["fsdp", "full", 4]["peak_bytes"] < 0.6 * rows["fsdp", "full", 1]["peak_bytes"]
    for n in (1, 2, 4):
        plain, checkpointed = rows["fsdp", "none", n], rows["fsdp", "full", n]
        saving = plain["peak_bytes"] - checkpointed["peak_bytes"]
        assert saving == pytest.approx(plain["planned_bytes"] - checkpointed["planned_bytes"], rel=0.2), n


@pytest.mark.slow
def test_hrm_trains_and_evaluates_during_training_under_fsdp_like_ddp(tmp_path):
    """HRM calls its blocks several times per step and its evaluator calls model.predict, not forward: the
    sharded root is gathered for it (run.evaluate) and every rank takes part (run.evaluates)."""
    cfg = yaml.safe_load((REPO / "config" / "hrm_cpu.yaml").read_text())
    cfg["recipe"] |= {"global_batch": 16, "micro_batch": 8, "eval_every": 5, "eval_subset": 16, "checkpoint_every": 5}
    cfg["recipe"]["task"] |= {"train_size": 160, "eval_size": 16}  # all that 10 steps of 16 and the subset read
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    cfg |= {"suites": {"s": {"sweep": {"parallel.strategy": ["ddp", "fsdp"]}}}, "seeds": [0], "baseline": "cpu2",
            "hardware": {"cpu2": {"accelerator": "cpu", "devices_per_node": 2}}}  # fmt: skip
    cfg.pop("compare", None)
    matrix = resolve(cfg)
    curves = {}
    for variant in ("strategy-ddp", "strategy-fsdp"):
        spec = matrix.spec("s", variant, "cpu2", 0).to_dict() | {"run_dir": str(tmp_path / variant)}
        io.write_json(tmp_path / f"{variant}.json", spec)
        _run([*launcher(2), "-m", "hwsweep.run.train", str(tmp_path / f"{variant}.json")])
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
    assert devices({"world_size": 4, "gpu_type": "H100-80GB", "strategy": "hsdp"}) == "4 × H100-80GB, HSDP"
    assert devices({"world_size": 1, "gpu_type": "cpu"}) == "1 × cpu"  # a runs.csv from before the column
    runs, base = pd.DataFrame({"strategy": ["fsdp"]}), pd.DataFrame({"strategy": ["ddp"]})
    assert "parallel strategy: strategy fsdp vs ddp" in differences(runs, base)


# -- built on the meta device: the same initial weights at any layout -----------------------------------
def _layouts(small_config) -> dict:
    """Hardware entries of 1 and 4 CPU processes (4 also as 2 nodes x 2 for HSDP); a transformer whose shapes do
    not divide by 4 (vocabulary 18, width 36), so FSDP's shards are uneven."""
    cfg = small_config
    cfg["recipe"] |= {"global_batch": 16, "micro_batch": 4, "model": {"width": 36, "depth": 2, "heads": 2}}
    cfg["recipe"]["task"] |= {"vocab_size": 18, "length": 6}
    cfg["hardware"] = {"cpu1": {"accelerator": "cpu", "devices_per_node": 1},
                       "cpu4": {"accelerator": "cpu", "devices_per_node": 4},
                       "cpu2x2": {"accelerator": "cpu", "nodes": 2, "devices_per_node": 2}}  # fmt: skip
    cfg["suites"]["tiny"]["sweep"] = {"parallel.strategy": ["ddp", "fsdp", "hsdp"]}
    return cfg


@pytest.mark.slow
def test_a_model_built_on_meta_gets_the_unsharded_initial_weights_bitwise_under_fsdp_and_hsdp(tmp_path, small_config):
    """run.wrap on a meta-built model (the built-in family as the trainer builds it, and a user's model with an
    init function): FSDP over 4 processes and HSDP over 2 x 2 give, gathered, exactly DDP's weights at 1."""
    matrix = resolve(_layouts(small_config))
    found = {}
    for variant, hardware, n, built in [("strategy-ddp", "cpu1", 1, "built"), ("strategy-fsdp", "cpu4", 4, "meta"),
                                        ("strategy-hsdp", "cpu2x2", 4, "meta")]:  # fmt: skip
        spec = matrix.spec("tiny", variant, hardware, 0).to_dict() | {"run_dir": str(tmp_path / variant)}
        io.write_json(tmp_path / f"{variant}.json", spec)
        out = tmp_path / f"{variant}.pt"
        _run([*launcher(n), "-m", "runtime_initial_weights", str(tmp_path / f"{variant}.json"), str(out), built],
             helper_env())
        found[variant] = torch.load(out, weights_only=False)
    ddp = found["strategy-ddp"]
    assert ddp["family"]["tok.weight"].std() > 0.5 and ddp["own"]["scale"].abs().max() > 0.5  # drawn, not empty
    for sharded in ("strategy-fsdp", "strategy-hsdp"):
        for model in ("family", "own"):
            assert sorted(found[sharded][model]) == sorted(ddp[model])
            assert all(torch.equal(found[sharded][model][k], ddp[model][k]) for k in ddp[model]), (sharded, model)


def test_a_meta_module_without_an_initialiser_is_refused_naming_it():
    from hwsweep.run import weights

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(3, 3)
            self.gain = torch.nn.Parameter(torch.empty(3))

    with torch.device("meta"):
        model = Scaled()
    model.to_empty(device="cpu")
    with pytest.raises(TypeError) as err:
        weights.initialise(model, 0)
    assert str(err.value).startswith("run.wrap: gain (Scaled) has no initialiser; give Scaled a reset_parameters()")
    weights.initialise(model, 0, init=lambda m: torch.nn.init.ones_(m.gain) if isinstance(m, Scaled) else m.reset_parameters())
    assert torch.equal(model.gain, torch.ones(3)) and model.inner.weight.abs().max() > 0


# -- activation checkpointing: what it keeps, against the plan ------------------------------------------
def _activation_bytes_per_sample(family: str, task, model_cfg, mode: str, precision: str = "fp32") -> float:
    """Per sample, the growth of the peak bytes of one forward + backward from micro-batch 4 to 8, as torch's
    MemTracker counts every live tensor (weights, gradients, activations, the backward's temporaries)."""
    from types import SimpleNamespace

    from torch.distributed._tools.mem_tracker import MemTracker

    from hwsweep.models import families
    from hwsweep.run import recompute
    from hwsweep.run.reduce import block_units

    side = families.torch_side(family)
    peaks = {}
    for n in (4, 8):
        torch.manual_seed(0)
        model = side.build(SimpleNamespace(task=task, model=model_cfg))
        recompute.apply(block_units(model), mode)
        batch = tuple(t[:n] for t in side.tables(SimpleNamespace(task=task, model=model_cfg))[0])
        tracker = MemTracker()
        tracker.track_external(model)
        with tracker, torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision != "fp32"):
            model(*batch).backward()
        peaks[n] = sum(kinds.get("Total", 0) for kinds in tracker.get_tracker_snapshot("peak").values())
    return (peaks[8] - peaks[4]) / 4


@pytest.mark.parametrize("family, precision", [("transformer", "fp32"), ("transformer", "bf16-mixed"),
                                               ("deep_transformer", "fp32")])  # fmt: skip
def test_activation_checkpointing_saves_what_the_plan_counts(family, precision):
    """The plan's activations per sample under none, full and selective within 15% of what torch keeps, and the
    saving of full and selective against none within 15% of the plan's (a saving the plan overstates would let
    micro_batch auto pick a micro-batch that does not fit)."""
    from types import SimpleNamespace

    if family == "transformer":
        task = SimpleNamespace(name="sort", length=64, vocab_size=16, train_size=16, eval_size=8)
        model_cfg = SimpleNamespace(name="transformer", width=32, depth=3, heads=2, mlp_ratio=4)
        planned = lambda mode: footprint.activation_bytes_per_sample(model_cfg, task, precision, mode)  # noqa: E731
    else:
        from hwsweep.contracts.recipe import SudokuTask

        task = SudokuTask(name="sudoku", size=4, blanks=6, distinct_puzzles=4, augmentation=0, eval_views=0,
                          train_size=16, eval_size=8)  # fmt: skip
        model_cfg = SimpleNamespace(name="deep_transformer", width=64, heads=2, mlp_ratio=4, depth=4, puzzle_emb_ndim=0,
                                    positions="rope", loss="softmax_cross_entropy", embed_scale=True)  # fmt: skip
        planned = lambda mode: footprint.puzzle_activation_bytes_per_sample(model_cfg, task, mode)  # noqa: E731
    measured = {mode: _activation_bytes_per_sample(family, task, model_cfg, mode, precision)
                for mode in ("none", "full", "selective")}  # fmt: skip
    assert measured["full"] < measured["selective"] < 0.9 * measured["none"]
    if family != "transformer":  # the puzzle families' activations are a fitted upper bound (tests/models/test_hrm.py)
        assert all(value <= planned(mode) <= 1.4 * value for mode, value in measured.items()), measured
        return
    for mode, value in measured.items():
        assert planned(mode) == pytest.approx(value, rel=0.15), (mode, planned(mode), value)
    for mode in ("full", "selective"):
        saving = measured["none"] - measured[mode]
        assert planned("none") - planned(mode) == pytest.approx(saving, rel=0.15), (mode, saving)


# The model of the test below: 57M parameters, 217 MB (MiB) of fp32 weights, in 32 blocks (so that the two blocks a rank
# holds gathered, and a block's gradient and its reduce-scatter copy, are small beside its shard); well above the
# ~20 MB a rank's resident set grows by for a model of one narrow block (torch's code and buffers on first use).
BIG = {"width": 384, "depth": 32, "heads": 4}


@pytest.mark.slow
def test_a_model_too_big_for_a_ddp_rank_trains_under_fsdp_at_4_and_no_rank_ever_holds_its_weights(tmp_path, small_config):
    """The case FSDP is for, on CPU, taken literally: a transformer whose 4 processes may each use the size of its
    whole fp32 weights (W), with recipe.optimizer.name sgd (plain SGD: no state). The plan refuses DDP (a replica's
    weights and gradients are 2 W), and FSDP with AdamW too: a rank's quarter of the weights, gradients and two
    moments is 16 / 4 = 4 bytes per parameter, W itself, before anything is gathered (it names 8 devices). FSDP at
    4 with SGD trains a step (two micro-batches), and each rank's peak stays below W: the growth of its peak
    resident set over its resident set before the model was built (the interpreter, torch, the process group and
    the data come first, 250 MB here: the absolute peak, printed, is below W only for a model of about 1 GB and up,
    too slow for the suite). What the growth holds:
    - placed (built on the meta device, sharded, then given memory and values): the rank's quarter of the
      weights, and one module's tensors whole at a time while they are drawn, under W / 2;
    - trained: its quarter of the weights and of the gradients (8 / 4 bytes per parameter, W / 2), the two blocks
      gathered at a time (the one running and the next, prefetched), a block's gathered gradient and its
      reduce-scatter copy, the activations of one micro-batch, and what torch allocates on first use (autograd's
      and gloo's buffers); the whole model never, nor at the end (the final checkpoint stays sharded: "finished")."""
    cfg = small_config
    # global batch 8: 2 micro-batches per rank at 4, and 8 devices, which AdamW would need, divide it
    cfg["recipe"] |= {"global_batch": 8, "micro_batch": 1, "checkpoint_every": 100, "log_every": 1, "model": BIG,
                      "optimizer": {"name": "sgd", "lr": 0.01}}  # fmt: skip
    cfg["recipe"]["task"] |= {"vocab_size": 64, "length": 8}
    cfg["recipe"]["schedule"] = {"steps": 1, "warmup_steps": 0}
    r = resolve(cfg).cells[0].recipe
    weights = footprint.parameter_count(r.model, r.task) * footprint.FP32
    assert weights > 200e6
    cfg["hardware"] = {"cpu4": {"accelerator": "cpu", "devices_per_node": 4, "memory_gb": weights / GB}}
    cfg["baseline"] = "cpu4"
    with pytest.raises(ConfigError, match=r"^recipe.parallel.strategy: ddp at micro-batch 1 needs [\d.]+ GB per device, over the device's [\d.]+ GB .*; "
                       r"set parallel.strategy: fsdp, which needs [\d.]+ GB per device on this hardware's 4 devices$"):
        resolve(cfg)
    cfg["recipe"]["parallel"] = {"strategy": "fsdp"}
    adamw = copy.deepcopy(cfg)
    adamw["recipe"]["optimizer"]["name"] = "adamw"
    with pytest.raises(ConfigError, match=r"^recipe.parallel.strategy: fsdp at micro-batch 1 needs .*; it needs [\d.]+ GB "
                       r"per device on 8 devices"):  # fmt: skip
        resolve(adamw)
    spec = resolve(cfg).spec("tiny", "default", "cpu4", 0)
    assert spec.plan.est_memory_gb * GB < weights
    io.write_json(tmp_path / "spec.json", spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    # glibc hands freed large blocks back at once, from one arena (as bench/fsdp.py sets it): the peak is of live memory
    env = helper_env() | {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "1"}
    cmd = [*launcher(4), "-m", "runtime_memory", str(tmp_path / "spec.json"), str(tmp_path / "grown")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    grown = [json.loads((tmp_path / f"grown.rank{r}.json").read_text()) for r in range(4)]
    mb = lambda key: [round(g[key] / 2**20, 1) for g in grown]  # noqa: E731
    print({"weights MB": round(weights / 2**20, 1), "planned MB": round(spec.plan.est_memory_gb * GB / 2**20, 1),
           "placed MB": mb("placed"), "trained MB": mb("trained"), "before MB": mb("before"), "peak MB": mb("peak")})  # fmt: skip
    assert all(g["placed"] < weights / 2 for g in grown), grown
    assert all(g["trained"] < weights for g in grown), grown
    assert all(g["finished"] < weights for g in grown), grown  # nothing gathered whole at the end
    assert all(g["optimizer"] == "SGD" for g in grown), grown  # the recipe's, as the trainer builds it


@pytest.mark.slow
def test_fsdp_compiles_each_block_and_hsdp_trains_2_by_2_like_fsdp(tmp_path, small_config):
    """recipe.compile under FSDP compiles each block before sharding it (inductor, on CPU): it trains as eager
    does, up to the compiled kernels' last bits, and its final.pt has the same keys; HSDP over 2 nodes x 2
    processes, with full activation checkpointing, trains as FSDP does (the reduction order only; recomputing
    runs the same ops) and writes sharded checkpoints; the record says which checkpointing ran."""
    runs = {"eager": ("fsdp", False, 1, 2, "none"), "compiled": ("fsdp", True, 1, 2, "none"),
            "hsdp": ("hsdp", False, 2, 2, "full")}  # fmt: skip
    for name, (strategy, compiled, nodes, devices, checkpointing) in runs.items():
        cfg = _config(small_config, strategy, steps=8, memory_gb=None)
        cfg["recipe"] |= {"compile": compiled, "checkpoint_every": 4, "activation_checkpointing": checkpointing}
        cfg["hardware"]["gpus"] |= {"nodes": nodes, "devices_per_node": devices}
        spec = resolve(cfg).spec("tiny", "default", "gpus", 0).to_dict() | {"run_dir": str(tmp_path / name)}
        io.write_json(tmp_path / f"{name}.json", spec)
        _run([*launcher(nodes * devices), "-m", "hwsweep.run.train", str(tmp_path / f"{name}.json")])
    (eager, p_eager), (compiled, p_compiled), (hsdp, p_hsdp) = (_results(tmp_path, n) for n in runs)
    assert compiled["provenance"]["compile"] is True and eager["provenance"]["compile"] is False
    assert sorted(p_compiled) == sorted(p_eager) == sorted(p_hsdp)
    assert compiled["curves"]["loss"]["values"] == pytest.approx(eager["curves"]["loss"]["values"], rel=1e-3)
    assert hsdp["plan"]["strategy"] == "hsdp" and hsdp["plan"]["world_size"] == 4
    assert hsdp["provenance"]["activation_checkpointing"] == "full" and hsdp["spec"]["recipe"]["activation_checkpointing"] == "full"
    assert hsdp["curves"]["loss"]["values"] == pytest.approx(eager["curves"]["loss"]["values"], rel=1e-4)
    assert (tmp_path / "hsdp" / "checkpoints" / "step000000008" / ".metadata").is_file()


def test_under_fsdp_each_block_is_checkpointed_and_compiled_before_sharding_and_keeps_its_names(tmp_path):
    """What run.wrap does to a meta-built model with activation checkpointing and compile under FSDP: every block's
    forward is checkpointed and the block compiled in place (the root is not), the blocks, embeddings and head
    are FSDP units, and the state dict's names are the model's own (checkpoints do not change with the options)."""
    from types import SimpleNamespace

    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule

    from hwsweep.contracts.recipe import Parallel
    from hwsweep.models import families
    from hwsweep.run import recompute
    from hwsweep.run.device import select
    from hwsweep.run.reduce import prepare

    rec = SimpleNamespace(task=SimpleNamespace(name="sort", length=8, vocab_size=16),
                          model=SimpleNamespace(name="transformer", width=32, depth=3, heads=2, mlp_ratio=4))  # fmt: skip
    plain = families.torch_side("transformer").build(rec)
    with torch.device("meta"):
        model = families.torch_side("transformer").build(rec)
    recipe = SimpleNamespace(reproducibility="deterministic", parallel=Parallel("fsdp", True), compile=True,
                             activation_checkpointing="full")  # fmt: skip
    plan = SimpleNamespace(accumulation=1, precision="fp32", nodes=1, devices_per_node=1)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        reduction = prepare(model, recipe, plan, select("cpu", 0), seed=3)
        assert reduction.module is model and isinstance(model, FSDPModule)
        assert all(isinstance(u, FSDPModule) for u in [*model.blocks, model.tok, model.norm, model.head])
        assert all(b._compiled_call_impl is not None for b in model.blocks)
        # full: the block's own forward under checkpoint(), without selective's context
        assert all(b.forward.func is recompute._checkpointed and b.forward.args[1] == {} for b in model.blocks)
        assert model._compiled_call_impl is None and not model.tok.weight.is_meta
        assert sorted(model.state_dict()) == sorted(plain.state_dict())
    finally:
        dist.destroy_process_group()
