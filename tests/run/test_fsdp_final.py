"""An FSDP run's ends, sharded: its final checkpoint stays sharded (final/, final.pt naming it), its evaluation runs
sharded over the training's processes, and `hwsweep export` writes the model whole only where asked."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import helper_env, launcher

from hwsweep import cli
from hwsweep.analysis import validation
from hwsweep.contracts import io
from hwsweep.contracts.hardware import GB
from hwsweep.contracts.spec import EVAL_RECORD, FINAL_CHECKPOINT, FINAL_SHARDS, TRAIN_RECORD, RunSpec
from hwsweep.models import footprint
from hwsweep.plan.config import resolve

# ~14M parameters, 57 MB of fp32 weights: far above the ~20 MB a rank's resident set moves by on its own
MODEL = {"width": 384, "depth": 8, "heads": 4}


def _spec(tmp_path, small_config, ranks: int = 2) -> tuple[RunSpec, float]:
    cfg = small_config
    cfg["recipe"] |= {"global_batch": 4, "micro_batch": 1, "checkpoint_every": 100, "log_every": 1, "model": MODEL,
                      "optimizer": {"name": "sgd", "lr": 0.01}, "parallel": {"strategy": "fsdp"}}  # fmt: skip
    cfg["recipe"]["task"] |= {"vocab_size": 64, "length": 8, "eval_size": 64}
    cfg["recipe"]["schedule"] = {"steps": 1, "warmup_steps": 0}
    cfg["hardware"] = {"cpu2": {"accelerator": "cpu", "devices_per_node": ranks}}
    cfg["baseline"] = "cpu2"
    spec = resolve(cfg).spec("tiny", "default", "cpu2", 0)
    spec = RunSpec.from_dict(spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    io.write_json(tmp_path / "run" / "spec.json", spec.to_dict())
    r = spec.recipe
    return spec, footprint.parameter_count(r.model, r.task) * footprint.FP32


def _evaluate(spec_path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.evaluate", str(spec_path), "--threads", "2"],
                          env=helper_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_an_fsdp_run_ends_sharded_is_evaluated_sharded_and_its_export_evaluates_alike(tmp_path, small_config):
    """2 CPU ranks train a 57 MB model one step and finish: no rank's peak resident set rises at the end by anything
    like the weights (the final checkpoint links the last sharded one: nothing is gathered); the evaluation runs on
    2 processes, each loading its shards, and its record says the peak per process;
    the export, evaluated by one process, gives the same metrics, and that process's peak (the model and the state
    it loads, whole) is above the sharded one's by more than half the weights."""
    spec, weights = _spec(tmp_path, small_config)
    run = tmp_path / "run"
    env = helper_env() | {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "1"}
    cmd = [*launcher(2), "-m", "runtime_memory", str(run / "spec.json"), str(tmp_path / "grown")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    grown = [json.loads((tmp_path / f"grown.rank{r}.json").read_text()) for r in range(2)]
    assert all(g["finished"] - g["trained"] < weights / 4 for g in grown), (weights, grown)
    final = torch.load(run / FINAL_CHECKPOINT, weights_only=False)
    assert (run / FINAL_CHECKPOINT).stat().st_size < validation.MANIFEST_BYTES and "model" not in final
    assert final["shards"] == FINAL_SHARDS and final["world_size"] == 2 and final["step"] == 1
    assert (run / FINAL_SHARDS / ".metadata").is_file() and validation.lost_checkpoint(spec) == ""

    out = _evaluate(run / "spec.json")
    assert "sharded over 2 processes" in out.stderr
    sharded = json.loads((run / EVAL_RECORD).read_text())
    assert sharded["processes"] == 2 and sharded["peak_memory_source"] == "host_rss"
    assert sharded["planned_memory_gb"] == spec.plan.est_memory_gb

    assert cli.main(["export", str(run)]) == 0
    exported = torch.load(run / "model.pt", weights_only=False)
    assert exported["step"] == 1 and exported["fingerprint"] == final["fingerprint"]
    assert sum(t.numel() for t in exported["model"].values()) * 4 == weights
    alone = tmp_path / "alone"  # the same weights, whole, evaluated by one process
    alone.mkdir()
    io.write_json(alone / "spec.json", spec.to_dict() | {"run_dir": str(alone)})
    shutil.copy(run / TRAIN_RECORD, alone / TRAIN_RECORD)
    shutil.copy(run / "model.pt", alone / FINAL_CHECKPOINT)
    _evaluate(alone / "spec.json")
    whole = json.loads((alone / EVAL_RECORD).read_text())
    assert whole["processes"] == 1 and whole["metrics"] == sharded["metrics"]
    assert (whole["peak_memory_gb"] - sharded["peak_memory_gb"]) * GB > weights / 2, (whole, sharded)


def test_export_of_a_run_without_a_final_checkpoint_says_so_in_one_line(tmp_path, capsys):
    assert cli.main(["export", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("hwsweep export: ") and "no final checkpoint; train the run first" in err


def test_a_sharded_final_checkpoint_without_its_shards_is_lost(tmp_path, small_config):
    """final.pt of a sharded run only names its shards: without the folder (or with one whose DCP metadata never
    came) the run cannot be evaluated and is said lost, so the workflow retrains it from its checkpoints."""
    spec, _ = _spec(tmp_path, small_config)
    run = tmp_path / "run"
    torch.save({"fingerprint": "x", "step": 1, "shards": FINAL_SHARDS, "model_key": "sharded.model", "world_size": 2},
               run / FINAL_CHECKPOINT)  # fmt: skip
    assert validation.lost_checkpoint(spec) == f"{run / FINAL_SHARDS}: the final checkpoint's shards are missing"
    (run / FINAL_SHARDS).mkdir()
    assert "are incomplete" in validation.lost_checkpoint(spec)
    (run / FINAL_SHARDS / ".metadata").write_bytes(b"x")
    assert validation.lost_checkpoint(spec) == ""
