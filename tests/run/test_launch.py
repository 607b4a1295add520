"""The launcher's check at the start of a run: each node sees the GPUs its ranks need (issue 25); the command it
starts."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import one_thread

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
    torchrun keeps the agent also for one. Under torchrun the trainer's workers are forked from the agent, which
    imports torch for them (hwsweep.run.torchrun)."""
    if launch:
        small_config["trainer"] = {"launch": launch}
    run = spec(small_config, accelerator="cpu", nodes=1, devices_per_node=devices, gpu_model=None, gpu_type="cpu",
               partition="cpu")  # fmt: skip
    cmd = command_line(run, "spec.json", 2, {})
    program = ["-m", "hwsweep.run.train", "spec.json", "--threads", "2"]
    if devices == 1 and launch != "torchrun":
        assert cmd == [sys.executable, "-u", *program]
    else:
        assert cmd[:3] == [sys.executable, "-m", "hwsweep.run.torchrun"]
        assert cmd[-len(program) - 2 :] == ["--start-method", "fork", *program]
        assert cmd[cmd.index("--nproc_per_node") + 1] == str(devices)


def test_the_built_in_trainer_s_gpu_workers_start_anew_each_tethered_to_the_agent(small_config):
    """A GPU run is not forked (a CUDA context does not survive a fork; not yet measured on a GPU)."""
    run = spec(small_config, nodes=1, devices_per_node=2)
    assert run.plan.accelerator == "cuda"
    cmd = command_line(run, "spec.json", 2, {})
    program = [sys.executable, "-u", "-m", "hwsweep.run.train", "spec.json", "--threads", "2"]
    assert "--start-method" not in cmd and cmd[-len(program) - 2 :] == ["-m", "hwsweep.run.tether", *program]


def test_the_built_in_trainer_cannot_be_launched_plain(small_config):
    small_config["trainer"] = {"launch": "plain"}
    with pytest.raises(ConfigError, match="^trainer.launch: plain is for a command that starts its own workers"):
        resolve(small_config)


WORKER = """
import ctypes, json, os, signal, sys, time
from hwsweep.run import startup

IMPORTED_BY = os.getpid()

if __name__ == "__main__":
    rank = int(os.environ["RANK"])
    if sys.argv[1:] in (["fail"], ["interrupt"]):
        if rank == 0:
            raise ValueError("boom at rank 0") if sys.argv[1] == "fail" else KeyboardInterrupt
        time.sleep(120)  # the agent stops it once rank 0 failed
    pdeathsig = ctypes.c_int()
    ctypes.CDLL("libc.so.6").prctl(2, ctypes.byref(pdeathsig))  # PR_GET_PDEATHSIG
    uptime = float(open("/proc/uptime").read().split()[0])
    print(json.dumps({
        "rank": rank, "argv": sys.argv[1:], "comm": open("/proc/self/comm").read().strip(), "parent": os.getppid(),
        "imported_by": sys.modules["worker"].IMPORTED_BY, "pdeathsig": pdeathsig.value,
        "write_through": [sys.stdout.write_through, sys.stderr.write_through],
        "handlers": {s.name: repr(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                                                                  signal.SIGUSR2, signal.SIGQUIT)},
        "age": startup.process_age(), "own_age": uptime - startup.start_ticks() / os.sysconf("SC_CLK_TCK"),
        "agent_age": uptime - startup.start_ticks(os.getppid()) / os.sysconf("SC_CLK_TCK"),
    }), flush=True)
"""


def _agent(tmp_path, *args):
    """torchrun's agent as hwsweep.run.launch starts it (stop signals ignored, --signals-to-handle SIGQUIT), its 2
    workers forked to run tmp_path/worker.py as a module."""
    from hwsweep.run import launch, tether

    (tmp_path / "worker.py").write_text(WORKER)
    cmd = [sys.executable, "-m", "hwsweep.run.torchrun", *launch.AGENT_SIGNALS, "--standalone", "--nnodes", "1",
           "--nproc_per_node", "2", "--start-method", "fork", "-m", "worker", *args]  # fmt: skip
    env = {k: v for k, v in one_thread().items() if k != "PYTHONUNBUFFERED"}  # the agent's output buffered
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=tether.agent_preexec())  # fmt: skip
    out, err = proc.communicate(timeout=300)
    return proc, out, err


@pytest.mark.slow
def test_a_forked_worker_runs_its_module_as_a_new_tethered_interpreter_would(tmp_path):
    """What `python -m hwsweep.run.tether python -u -m MODULE` gives a started worker, a forked one has too: the
    module as __main__ with its arguments (its imports made once, by the agent), death with the agent (SIGKILL),
    the stop signals the agent ignores caught again (hwsweep.run.stops), unbuffered output; and its
    name, and a startup counted from the agent's start."""
    proc, out, err = _agent(tmp_path, "--threads", "1")
    assert proc.returncode == 0, err[-3000:]
    seen = sorted((json.loads(line) for line in out.splitlines() if line.startswith("{")), key=lambda s: s["rank"])
    assert [s["rank"] for s in seen] == [0, 1], out
    for s in seen:
        assert s["argv"] == ["--threads", "1"] and s["comm"] == f"hwsweep-rank{s['rank']}"
        assert s["parent"] == s["imported_by"] == proc.pid and s["pdeathsig"] == signal.SIGKILL
        assert s["write_through"] == [True, True]
        # the stop signals the agent ignores caught again, from the fork on (hwsweep.run.stops: a stop at any moment
        # of start-up is a preemption), SIGQUIT left as it is
        caught = {name: handler for name, handler in s["handlers"].items() if name != "SIGQUIT"}
        assert sorted(caught) == ["SIGHUP", "SIGINT", "SIGTERM", "SIGUSR2"], s
        assert all(h.startswith("<function _note ") for h in caught.values()), s
        assert s["handlers"]["SIGQUIT"] == "<Handlers.SIG_DFL: 0>", s
        # /proc's clock has 10 ms ticks; the agent imported torch before the fork
        assert abs(s["age"] - s["agent_age"]) <= 0.05 and s["age"] > s["own_age"], s


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fail", "interrupt"])
def test_a_forked_worker_s_exception_ends_it_as_it_would_a_started_one_and_the_agent_stops_the_others(tmp_path, how):
    """An exception: the worker's own traceback (where a started worker prints it, not only in torch's log) and
    status 1; KeyboardInterrupt: its traceback and death by SIGINT, as CPython ends (torch's wrapper of a function
    worker would call it a success)."""
    proc, out, err = _agent(tmp_path, how)
    assert proc.returncode == 1
    raised = "\nValueError: boom at rank 0\n" if how == "fail" else "\nKeyboardInterrupt\n"
    assert raised in err and "rank      : 0" in err, err[-3000:]  # the traceback, then torchrun's summary
    assert ("exitcode  : 1 " if how == "fail" else "exitcode  : -2 ") in err, err[-3000:]


def test_the_cuda_driver_loaded_in_the_agent_means_workers_start_anew(tmp_path):
    from argparse import Namespace

    from hwsweep.run import torchrun

    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libtorch_cpu.so\n")
    assert not torchrun.device_driver_loaded(str(maps)) and not torchrun.device_driver_loaded()  # this CPU host
    maps.write_text(maps.read_text() + "7f02-7f03 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libcuda.so.560.35.03\n")
    assert torchrun.device_driver_loaded(str(maps)) and torchrun.device_driver_loaded(str(tmp_path / "none"))
    args = torchrun.started_anew(Namespace(training_script="hwsweep.run.train", training_script_args=["s.json"]))
    assert [args.training_script, *args.training_script_args] == [
        "hwsweep.run.tether", sys.executable, "-u", "-m", "hwsweep.run.train", "s.json"]
