"""The launcher's check at the start of a run: each node sees the GPUs its ranks need (issue 25); the command it
starts."""

import sys

import pytest

from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run.launch import command_line, gpu_shortage

TWO_NODES = {"accelerator": "cuda", "nodes": 2, "devices_per_node": 2, "gpu_type": "H100-80GB", "gpu_model": "h100",
             "partition": "gpu-h100"}  # fmt: skip


def spec(small_config, **entry):
    small_config["hardware"]["g"] = {k: v for k, v in (TWO_NODES | entry).items() if v is not None}
    return resolve(small_config).spec("tiny", "default", "g", 0)


def test_gpu_model_asks_gpus_per_node_never_per_job(small_config):
    hw = spec(small_config).hardware
    assert hw.slurm_gres == "gpu:h100:2" and hw.gpus_per_node == 2
    other = spec(small_config, gpu_model=None, gres="gpu:h100:2").hardware
    assert other.slurm_gres == "gpu:h100:2" and other.gpus_per_node == 2


def test_a_node_with_fewer_gpus_than_its_ranks_is_refused_in_one_line(small_config):
    run = spec(small_config)
    line = gpu_shortage(run, {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "h100-2", "CUDA_VISIBLE_DEVICES": "3"})
    assert line.startswith("hwsweep.run.launch: node h100-2: hardware g plans 2 GPU(s) here (2 rank(s)), 1 visible "
                           "(CUDA_VISIBLE_DEVICES=3); ask GPUs per node")  # fmt: skip
    assert "\n" not in line
    assert "SLURM_GPUS_ON_NODE=1" in gpu_shortage(run, {"SLURM_JOB_ID": "7", "SLURM_GPUS_ON_NODE": "1"})


@pytest.mark.parametrize("env", [
    {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0,1"},  # enough
    {"SLURM_JOB_ID": "7", "SLURM_STEP_GPUS": "2,3"},
    {"CUDA_VISIBLE_DEVICES": "0"},  # not a SLURM job: placement checked this machine before any job
    {"SLURM_JOB_ID": "7"},  # nothing says: torch finds out
])  # fmt: skip
def test_enough_gpus_or_no_word_on_them_passes(small_config, env):
    assert gpu_shortage(spec(small_config), env) is None


def test_a_cpu_entry_without_gpus_needs_none(small_config):
    run = spec(small_config, accelerator="cpu", gpu_model=None, gpu_type="cpu", partition="cpu")
    assert gpu_shortage(run, {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": ""}) is None


def test_a_run_folder_on_a_full_disk_is_refused_before_torchrun_and_stale_temporaries_are_removed(
        small_config, tmp_path, small_disk, capsys, monkeypatch):  # fmt: skip
    from conftest import fill

    from hwsweep.contracts import io
    from hwsweep.contracts.spec import canonical_json
    from hwsweep.run import launch

    disk = small_disk(tmp_path / "disk", 2)
    run = resolve(small_config).spec("tiny", "default", "cpu1", 0)
    run = type(run).from_dict(run.to_dict() | {"run_dir": str(disk / "run")})
    (disk / "run/checkpoints").mkdir(parents=True)
    stale = [disk / "run/checkpoints/.step000000025.pt.a1b2c3.tmp", disk / "run/.final.pt.a1b2c3.tmp"]
    for path in stale:
        path.write_bytes(b"")
    io.write_text(tmp_path / "spec.json", canonical_json(run))
    filler = fill(disk)
    with pytest.raises(SystemExit) as end:
        launch.main([str(tmp_path / "spec.json")])
    assert str(end.value.code).startswith(f"hwsweep: {disk / 'run'}: no space left on device (0 bytes free")
    assert all(p.exists() for p in stale) and "torchrun" not in capsys.readouterr().out  # nothing started or touched
    filler.unlink()
    kept = disk / "run/checkpoints/step000000020.pt"
    kept.write_text("x")
    monkeypatch.setattr(launch, "supervise", lambda cmd, env, *rest: 0)  # stop where torchrun would start
    assert launch.main([str(tmp_path / "spec.json")]) == 0
    assert not any(p.exists() for p in stale) and kept.exists()
    assert "removed 2 temporary file(s) a killed write left" in capsys.readouterr().out


def test_an_evaluation_whose_run_folder_is_read_only_is_refused_before_it_loads_anything(small_config, tmp_path,
                                                                                         read_only):  # fmt: skip
    from hwsweep.contracts import io
    from hwsweep.contracts.spec import canonical_json
    from hwsweep.run import evaluate

    run = resolve(small_config).spec("tiny", "default", "cpu1", 0)
    run = type(run).from_dict(run.to_dict() | {"run_dir": str(tmp_path / "results/run")})
    io.write_text(tmp_path / "spec.json", canonical_json(run))
    (tmp_path / "results/run").mkdir(parents=True)
    read_only(tmp_path / "results")
    with pytest.raises(SystemExit) as end:  # no final.pt or train.json here: it stops before it reads them
        evaluate.main([str(tmp_path / "spec.json")])
    assert str(end.value.code) == (f"hwsweep: {tmp_path / 'results/run'}: read-only file system; remount it read-write "
                                   "or work in a writable copy, then run snakemake again (finished work is kept)")  # fmt: skip


@pytest.mark.parametrize("launch", [None, "auto", "torchrun"])
@pytest.mark.parametrize("devices", [1, 2])
def test_the_built_in_trainer_runs_under_torchrun_from_two_processes_or_as_its_launch_says(small_config, launch,
                                                                                          devices):  # fmt: skip
    """auto (the default) starts a one-process run plainly: no torchrun agent, a second interpreter importing torch;
    torchrun keeps the agent also for one."""
    if launch:
        small_config["trainer"] = {"launch": launch}
    run = spec(small_config, accelerator="cpu", nodes=1, devices_per_node=devices, gpu_model=None, gpu_type="cpu",
               partition="cpu")  # fmt: skip
    cmd = command_line(run, "spec.json", 2, {})
    program = [sys.executable, "-u", "-m", "hwsweep.run.train", "spec.json", "--threads", "2"]
    if devices == 1 and launch != "torchrun":
        assert cmd == program
    else:
        assert cmd[:3] == [sys.executable, "-m", "hwsweep.run.torchrun"] and cmd[-len(program) - 2 :] == ["-m", "hwsweep.run.tether",
                                                                                              *program]  # fmt: skip
        assert cmd[cmd.index("--nproc_per_node") + 1] == str(devices)


def test_the_built_in_trainer_cannot_be_launched_plain(small_config):
    small_config["trainer"] = {"launch": "plain"}
    with pytest.raises(ConfigError, match="^trainer.launch: plain is for a command that starts its own workers"):
        resolve(small_config)
