"""The runtime API under real torchrun (gloo, CPU), through examples/runtime_api/train.py:
strict parity across world sizes, resume after SIGTERM, the data order of any dataset."""

import json
import subprocess

import pytest
import torch
import yaml
from conftest import BIN, REPO, helper_env, launcher, one_thread, stopped_after_a_checkpoint

from hwsweep.contracts import io
from hwsweep.plan.config import resolve
from hwsweep.run.runtime import EXIT_PREEMPTED

pytestmark = pytest.mark.slow
EXAMPLE = REPO / "examples" / "runtime_api"


def example_spec(tmp_path, hardware: str, name: str, steps: int = 60) -> list[str]:
    """The command that runs the example on `hardware` as hwsweep's train job does (hwsweep.run.launch:
    torchrun under the command runner), its spec written beside."""
    cfg = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    cfg["recipe"] |= {"checkpoint_every": 10, "schedule": {"steps": steps, "warmup_steps": 5}}
    cfg["recipe"]["args"] = {"hidden": 32, "eval_every": 30}
    spec = resolve(cfg, config_dir=EXAMPLE).spec("runtime_api", "default", hardware, 3).to_dict()
    spec["run_dir"] = str(tmp_path / name)
    io.write_json(tmp_path / f"{name}.json", spec)
    return [str(BIN / "python"), "-m", "hwsweep.run.launch", str(tmp_path / f"{name}.json"), "--threads", "2"]


def launch(cmd):
    return subprocess.Popen(cmd, env=one_thread(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(tmp_path, cmd, name):
    proc = launch(cmd)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    record = json.loads((tmp_path / name / "train.json").read_text())
    return record, torch.load(tmp_path / name / "final.pt", weights_only=False)["model"]


def same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_strict_runtime_script_is_bitwise_equal_at_world_sizes_1_and_2(tmp_path):
    (rec1, w1), (rec2, w2) = (finished(tmp_path, example_spec(tmp_path, hw, hw), hw) for hw in ("cpu1", "cpu2"))
    assert rec1["plan"]["accumulation"] == 4 and rec2["plan"]["accumulation"] == 2
    assert rec1["curves"]["loss"] == rec2["curves"]["loss"] and len(rec1["curves"]["loss"]["values"]) == 60
    assert rec1["curves"]["val_acc"]["steps"] == [30, 60] and rec1["metrics"] == rec2["metrics"]
    assert same_weights(w1, w2)
    assert rec1["curves"]["loss"]["values"][-1] < rec1["curves"]["loss"]["values"][0]
    assert rec2["trainer"] == "command" and rec2["data_order"]["sampler"] == "global-order"
    assert len(rec2["provenance"]["devices"]) == 2
    lines = (tmp_path / "cpu2" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"step": 1, "loss": rec2["curves"]["loss"]["values"][0]}


def test_sigterm_checkpoints_at_an_agreed_step_and_the_rerun_resumes_bitwise(tmp_path):
    # The signal follows the first checkpoint (step 10) within some 20 steps; 600 leave seconds to spare.
    steps = 600
    cmd = example_spec(tmp_path, "cpu2", "cut", steps=steps)
    proc = launch(cmd)
    out, cut_at = stopped_after_a_checkpoint(proc, tmp_path / "cut" / "checkpoints")  # 'exiting 75' in its output
    assert proc.returncode == EXIT_PREEMPTED, out[-3000:]
    assert not (tmp_path / "cut" / "train.json").exists()
    assert 0 < cut_at < steps

    cut, wc = finished(tmp_path, cmd, "cut")  # the rerun resumes on its own
    whole, ww = finished(tmp_path, example_spec(tmp_path, "cpu2", "whole", steps=steps), "whole")
    assert cut["restarts"] == 1 and cut["resumed_from_step"] == cut_at and whole["restarts"] == 0
    assert cut["curves"]["loss"] == whole["curves"]["loss"] and cut["metrics"] == whole["metrics"]
    assert same_weights(wc, ww)


def test_any_dataset_gives_the_same_global_batches_and_draws_at_world_sizes_1_and_2(tmp_path, small_config):
    """With 0 or 2 workers, on 1 or 2 processes: the same samples and the same random draws
    inside the dataset for every micro-batch place of every step."""
    seen = {}
    for workers in (0, 2):
        small_config["recipe"] |= {"num_workers": workers, "global_batch": 16, "micro_batch": 4}
        small_config["recipe"]["schedule"] = {"steps": 30, "warmup_steps": 2}  # 2.4 epochs of 200 samples
        matrix = resolve(small_config)
        for hw, n in (("cpu1", 1), ("cpu2", 2)):
            name = f"{hw}-w{workers}"
            spec = matrix.spec("tiny", "default", hw, 0).to_dict() | {"run_dir": str(tmp_path / name)}
            io.write_json(tmp_path / f"{name}.json", spec)
            cmd = [*launcher(n), "-m", "runtime_batches", str(tmp_path / f"{name}.json"), str(tmp_path / name)]
            proc = subprocess.run(cmd, env=helper_env(), capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
            seen[name] = {}
            for r in range(n):
                seen[name] |= json.loads((tmp_path / f"{name}.rank{r}.json").read_text())
            assert json.loads((tmp_path / name / "train.json").read_text())["data_order"]["num_workers"] == workers
    reference = seen["cpu1-w0"]
    assert len(reference) == 30 * 4 and all(other == reference for other in seen.values())
    first_epoch = [i for step in range(12) for j in range(4) for i in reference[f"{step}/{j}"][0]]
    assert sorted(first_epoch) == sorted(set(first_epoch)) and len(first_epoch) == 192  # no sample twice
    draws = [x for ids, noise in reference.values() for x in noise]
    assert len(set(draws)) == len(draws)  # every micro-batch draws afresh (not one seed reused)


def test_periodic_evaluation_adds_curves_and_leaves_training_alone(tmp_path, small_config):
    small_config["recipe"]["schedule"] = {"steps": 25, "warmup_steps": 2}
    records = {}
    for every in (0, 10):
        small_config["recipe"] |= {"eval_every": every, "eval_subset": 100}
        spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict()
        spec["run_dir"] = str(tmp_path / f"e{every}")
        io.write_json(tmp_path / f"e{every}.json", spec)
        cmd = [*launcher(1), "-m", "hwsweep.run.train",
               str(tmp_path / f"e{every}.json")]  # fmt: skip
        proc = subprocess.run(cmd, env=one_thread(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        records[every] = json.loads((tmp_path / f"e{every}" / "train.json").read_text())
    curves = records[10]["curves"]
    assert set(curves) == {"loss", "eval_token_accuracy", "eval_exact_accuracy"}
    assert set(records[0]["curves"]) == {"loss"}
    assert curves["eval_token_accuracy"]["steps"] == [10, 20, 25]  # every eval_every steps and at the last
    assert all(0 < v <= 1 for v in curves["eval_token_accuracy"]["values"])
    assert curves["loss"] == records[0]["curves"]["loss"]  # evaluating did not change training
    rec = records[0]  # FLOPs counted on a real micro-batch; MFU against the catalog's (measured) cpu peak per thread
    assert rec["flops_per_step"] > 0 and 0 < rec["mfu"] < 1
    assert rec["tflops_per_device"] * 1e12 == pytest.approx(rec["flops_per_step"] * rec["samples_per_second"] / 32)


SPENDING = """
import os, sys, torch
from torch.utils.data import TensorDataset
from hwsweep import runtime

run = runtime.init(sys.argv[1])
loader = run.loader(TensorDataset(torch.ones(64, 1)))
model = run.wrap(torch.nn.Linear(1, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
run.resume(model=model, optimizer=optimizer)
for step in run.steps():
    for (x,) in run.accumulate(loader):
        run.backward(model(x).pow(2).mean())
    run.optimizer_step(optimizer)
    run.spend_flops(1000 * (step + 1))  # a step's work that grows: its mean is 1000 x (steps + 1) / 2
    if step + 1 == int(os.environ.get("DIE_AFTER", 0)):
        os._exit(9)  # killed between checkpoints: the steps after the last one are trained again
run.finish()
"""


def test_flops_spent_step_by_step_are_recorded_as_their_mean_across_a_kill_and_resume(tmp_path, small_config):
    """run.spend_flops: the record's flops_per_step is the mean of what the steps spent (HRM's ACT), counted once
    per step though a kill between checkpoints trains some steps twice."""
    small_config["recipe"] |= {"checkpoint_every": 5, "log_every": 2, "schedule": {"steps": 10, "warmup_steps": 1}}
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    io.write_json(tmp_path / "spec.json", spec)
    (tmp_path / "spend.py").write_text(SPENDING)
    cmd = [str(BIN / "python"), str(tmp_path / "spend.py"), str(tmp_path / "spec.json")]
    killed = subprocess.run(cmd, env=one_thread() | {"DIE_AFTER": "7"}, capture_output=True, text=True, timeout=300)
    assert killed.returncode == 9 and not (tmp_path / "run" / "train.json").exists(), killed.stderr[-2000:]
    proc = subprocess.run(cmd, env=one_thread(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["resumed_from_step"] == 5
    assert record["flops_per_step"] == 1000 * 11 / 2
