"""The fast path of issue 12: tables indexed on the device, recipe.compile, the AdamW kernel, and the
planned vs measured peak memory of every run."""

import json
import subprocess
from types import SimpleNamespace

import pytest
import torch
import yaml
from conftest import BIN, REPO, launcher, one_thread
from torch.utils.data import TensorDataset

from hwsweep.contracts import io
from hwsweep.contracts.command import arguments, plan_values
from hwsweep.contracts.records import RunRecord, run_row
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import data
from hwsweep.run.runtime import Loader, table_placement

GLOBAL_BATCH, MICRO_BATCH, STEPS = 12, 3, 9  # 60 samples: the order wraps into a second epoch


def fake_run(rank: int, world_size: int, start: int):
    """What the Loader reads of a Run (no process group needed: it only cuts the global order)."""
    plan = SimpleNamespace(global_batch=GLOBAL_BATCH, micro_batch=MICRO_BATCH, steps=STEPS)
    return SimpleNamespace(seed=5, rank=rank, world_size=world_size, start=start, device=torch.device("cpu"),
                           plan=plan, recipe=SimpleNamespace(num_workers=0))  # fmt: skip


def table():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(50, 4, generator=g), torch.randint(0, 9, (50, 6), generator=g))


def micro_batches(loader, n):
    return [loader.next() for _ in range(n)]


@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize("start", [0, 4])
def test_device_tables_give_the_host_paths_micro_batches_bitwise(world_size, start):
    dataset = table()
    per_rank = (STEPS - start) * GLOBAL_BATCH // (world_size * MICRO_BATCH)
    for rank in range(world_size):
        run = fake_run(rank, world_size, start)
        on_device = Loader(run, dataset, {})
        on_host = Loader(run, dataset, {}, budget_bytes=0)  # nothing fits: the DataLoader path
        assert (on_device.placement, on_host.placement) == ("device", "host")
        fast, slow = micro_batches(on_device, per_rank), micro_batches(on_host, per_rank)
        sampler = data.GlobalBatchSampler(data.GlobalOrder(50, GLOBAL_BATCH, 5), rank, world_size, MICRO_BATCH,
                                          start, STEPS)  # fmt: skip
        expected = [tuple(t[idx] for t in dataset.tensors) for _, _, idx in sampler]
        assert len(expected) == per_rank
        for a, b, e in zip(fast, slow, expected, strict=True):
            assert all(torch.equal(x, y) and torch.equal(x, z) for x, y, z in zip(a, b, e, strict=True))
        with pytest.raises(StopIteration):
            on_device.next()
        peeked = Loader(run, dataset, {}).peek()
        assert all(torch.equal(x, y) for x, y in zip(peeked, expected[0]))


def test_a_table_over_the_budget_or_with_workers_goes_to_the_host_path():
    dataset = table()
    size = sum(t.nbytes for t in dataset.tensors)
    assert table_placement(dataset, 0, size) == "device"
    assert table_placement(dataset, 0, size - 1) == "host"
    assert table_placement(dataset, 2, float("inf")) == "host"  # workers: the DataLoader's business
    assert table_placement([1, 2, 3], 0, float("inf")) == "host"  # not a table


# -- the settings in the config ----------------------------------------------------------------------
def test_optimizer_kernel_resolves_and_a_bad_value_names_the_field(small_config):
    recipe = resolve(small_config).cells[0].recipe
    assert recipe.optimizer.kernel == "auto" and recipe.compile is False
    assert recipe.optimizer.resolved_kernel("cpu") == "for_loop"
    assert recipe.optimizer.resolved_kernel("cuda") == "fused"
    small_config["recipe"]["optimizer"] = {"kernel": "fast"}
    with pytest.raises(ConfigError) as e:
        resolve(small_config)
    assert "recipe.optimizer.kernel" in str(e.value) and "\n" not in str(e.value)



def test_a_command_gets_compile_as_a_plan_value(small_config):
    train_py = str(REPO / "examples" / "plain_ddp" / "train.py")
    small_config["trainer"] = {"command": ["python", train_py], "args": {"compile": "compile", "seed": "seed"}}
    small_config["metrics"] = {"loss": {"goal": "min"}}
    small_config["recipe"] = {k: v for k, v in small_config["recipe"].items() if k not in ("task", "model")}
    for compiled in (False, True):
        small_config["recipe"]["compile"] = compiled
        matrix = resolve(small_config)
        spec = matrix.spec("tiny", "default", "cpu1", 0)
        assert plan_values(spec)["compile"] is compiled
        flags = arguments(matrix.trainer.invocation, plan_values(spec), {})
        assert f"--compile={'true' if compiled else 'false'}" in flags


# -- real runs -------------------------------------------------------------------------------------------
def train(tmp_path, cfg, name: str, hardware: str = "cpu1") -> dict:
    spec = resolve(cfg).spec("tiny", "default", hardware, 0).to_dict() | {"run_dir": str(tmp_path / name)}
    io.write_json(tmp_path / f"{name}.json", spec)
    n = spec["plan"]["devices_per_node"]
    cmd = [*launcher(n), "-m", "hwsweep.run.train", str(tmp_path / f"{name}.json")]
    proc = subprocess.run(cmd, env=one_thread(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((tmp_path / name / "train.json").read_text())


@pytest.mark.slow
def test_compile_trains_close_to_eager_and_says_so(tmp_path, small_config):
    """recipe.compile trains as eager does, up to the compiled kernels' last bits, and the record says so; the
    eager run's record is also the check of what a CPU record holds."""
    small_config["recipe"]["schedule"] = {"steps": 12, "warmup_steps": 2}
    small_config["recipe"] |= {"reproducibility": "strict"}
    eager = train(tmp_path, small_config, "eager", "cpu2")
    # A CPU record has the placement, the AdamW kernel and the planned vs the measured peak memory
    assert eager["data_order"]["placement"] == "device"
    assert eager["provenance"]["optimizer_kernel"] == "for_loop" and eager["provenance"]["compile"] is False
    assert eager["planned_memory_gb"] == eager["plan"]["est_memory_gb"] and eager["planned_memory_gb"] > 0
    # Host RSS of a process that imported torch: more than 50 MB, less than the machine.
    assert eager["peak_memory_source"] == "host_rss" and 0.05 < eager["peak_memory_gb"] < 1024
    row = run_row(RunRecord.from_dict(eager), None, [])
    assert (row["planned_memory_gb"], row["peak_memory_gb"]) == (eager["planned_memory_gb"], eager["peak_memory_gb"])
    assert row["peak_memory_source"] == "host_rss"
    small_config["recipe"] |= {"compile": True}
    compiled = train(tmp_path, small_config, "compiled", "cpu2")
    assert compiled["provenance"]["compile"] is True and compiled["spec"]["recipe"]["compile"] is True
    a, b = eager["curves"]["loss"]["values"], compiled["curves"]["loss"]["values"]
    assert len(a) == len(b) == 12 and b[-1] < b[0]
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-3


@pytest.mark.slow
def test_a_command_trainers_record_has_its_largest_processs_peak(tmp_path):
    example = REPO / "examples" / "plain_ddp"
    cfg = yaml.safe_load((example / "config.yaml").read_text())
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    cfg["recipe"]["args"] = {"hidden": 16, "eval_every": 10}
    spec = resolve(cfg, config_dir=example).spec("plain_ddp", "hidden-32", "cpu1", 0).to_dict()
    spec["run_dir"] = str(tmp_path / "run")
    io.write_json(tmp_path / "spec.json", spec)
    cmd = [str(BIN / "python"), "-m", "hwsweep.run.launch", str(tmp_path / "spec.json"), "--threads", "1"]
    proc = subprocess.run(cmd, env=one_thread(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rec = json.loads((tmp_path / "run" / "train.json").read_text())
    assert rec["trainer"] == "command" and rec["planned_memory_gb"] is None  # a user's model: no estimate
    assert rec["peak_memory_source"] == "host_rss" and 0.05 < rec["peak_memory_gb"] < 1024  # torch was imported


ONE_PROCESS = """
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from hwsweep.run.device import select
from hwsweep.run.reduce import StandardReduction, make_reduction

dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=0, world_size=1)
weights = []
for reduction in ("local", "ddp"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    r = make_reduction("deterministic", model, 2, select("cpu", 0))
    if reduction == "ddp":  # what world size 1 ran before
        r.model = DistributedDataParallel(model)
    assert isinstance(r, StandardReduction)
    assert isinstance(r.model, DistributedDataParallel) == (reduction == "ddp")
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        for last in (False, True):
            with r.micro_step(last):
                x = torch.randn(16, 8, generator=g)
                r.backward(torch.nn.functional.cross_entropy(r.model(x), (x[:, 0] > 0).long()), scaler)
        opt.step()
        opt.zero_grad(set_to_none=True)
    weights.append([p.detach().clone() for p in model.parameters()])
dist.destroy_process_group()
print("bitwise" if all(torch.equal(a, b) for a, b in zip(*weights, strict=True)) else "different")
"""


@pytest.mark.slow
def test_one_process_trains_without_ddp_bitwise_as_ddp_did(tmp_path):
    """World size 1 skips DDP (its all-reduce of one rank is a copy): the same gradients, bit for bit. In a
    process of its own (a file store, no port), so no process group outlives the test in pytest's process."""
    proc = subprocess.run([str(BIN / "python"), "-c", ONE_PROCESS, str(tmp_path / "store")], capture_output=True,
                          text=True, timeout=120, env=one_thread())  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "bitwise"
