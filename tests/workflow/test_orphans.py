"""No orphans: killing the workflow leaves no training process on the node, and a rendezvous that
cannot complete fails within launch.RENDEZVOUS_TIMEOUT."""

import copy
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BIN, REPO, SMALL, run_processes, workers, write_config

pytestmark = pytest.mark.slow

RUN = "results/tiny/default/cpu2/seed0"


SCRIPT = """
import time
for step in range(1, 10**9):
    print(f"step {step}: loss {1 / step}", flush=True)
    time.sleep(0.05)
"""


def _start(tmp_path, command=False):
    """snakemake training one long run on 2 CPU processes in tmp_path (the built-in trainer, or a
    command under torchrun), returned once both workers train."""
    cfg = copy.deepcopy(SMALL)
    cfg["recipe"]["schedule"] = {"steps": 100000, "warmup_steps": 5}  # still training when killed
    cfg["hardware"] = {"cpu2": {"accelerator": "cpu", "devices_per_node": 2}}
    cfg |= {"baseline": "cpu2", "seeds": [0]}
    if command:
        (tmp_path / "script.py").write_text(SCRIPT)
        for key in ("task", "model"):
            cfg["recipe"].pop(key)
        cfg |= {"trainer": {"command": ["python", "script.py"], "args": {"steps": "steps"}},
                "metrics": {"loss": {"goal": "min"}}, "evaluation": "none"}  # fmt: skip
    path = write_config(tmp_path, cfg)
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
           str(path), "--replace-workflow-config", "--cores", "2", f"{RUN}/train.json"]  # fmt: skip
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    worker, progress = ("script.py", "step 3:") if command else ("hwsweep.run.train", "train:")
    while time.monotonic() < deadline:  # training runs: both workers are up and the log shows steps
        log = tmp_path / "logs/tiny/default/cpu2/seed0/train.log"
        if len(workers(tmp_path, worker)) == 2 and log.exists() and progress in log.read_text():
            return proc
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"training never started: {run_processes(tmp_path)}")


def _gone_within(workdir, seconds) -> list:
    deadline = time.monotonic() + seconds
    while (left := run_processes(workdir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


KILLS = {
    "SIGKILL of the process group": lambda pid: os.killpg(pid, signal.SIGKILL),
    "SIGKILL of snakemake alone": lambda pid: os.kill(pid, signal.SIGKILL),
    "SIGTERM of the process group": lambda pid: os.killpg(pid, signal.SIGTERM),
    "Ctrl-C (SIGINT to the process group)": lambda pid: os.killpg(pid, signal.SIGINT),
}


@pytest.mark.parametrize("how", list(KILLS))
def test_killing_the_workflow_leaves_no_training_process(tmp_path, how):
    _kill_and_check(tmp_path, _start(tmp_path), how)


@pytest.mark.parametrize("how", ["SIGKILL of the process group", "SIGKILL of snakemake alone"])
def test_killing_the_workflow_leaves_no_process_of_a_users_command(tmp_path, how):
    _kill_and_check(tmp_path, _start(tmp_path, command=True), how)


def _kill_and_check(tmp_path, proc, how):
    before = run_processes(tmp_path)
    assert any("hwsweep.run.launch" in c for _, c in before) and any("torchrun" in c for _, c in before), before
    KILLS[how](proc.pid)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"snakemake still runs 120 s after {how}")
    left = _gone_within(tmp_path, 40)
    for pid, _ in left:  # leave nothing behind for the next test, whatever the verdict
        os.kill(pid, signal.SIGKILL)
    assert left == [], left
    assert not (tmp_path / RUN / "train.json").exists()


def test_a_rendezvous_that_cannot_complete_fails_in_bounded_time(tmp_path, monkeypatch):
    """Node 0 of two waits for a node that never starts: torchrun gives up after RENDEZVOUS_TIMEOUT."""
    from hwsweep.plan.config import resolve
    from hwsweep.run import launch, tether

    cfg = copy.deepcopy(SMALL)
    cfg["hardware"] = {"two": {"accelerator": "cpu", "nodes": 2, "devices_per_node": 1}}
    cfg["baseline"] = "two"
    spec = resolve(cfg).spec("tiny", "default", "two", 0)
    monkeypatch.setattr(launch, "RENDEZVOUS_TIMEOUT", 5)
    monkeypatch.setenv("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1")  # srun's: the node that launched the step
    env = {"SLURM_NODEID": "0", "SLURM_NNODES": "2", "SLURM_JOB_ID": str(os.getpid())}
    cmd = launch.torchrun_command(spec, env) + tether.tethered(["true"])
    assert "timeout=5" in cmd
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})  # fmt: skip
    assert proc.returncode != 0 and 5 <= time.monotonic() - t0 < 60, proc.stderr[-2000:]
    joined = re.search(r"Timed out after \d+ seconds waiting for clients\. 1/2 clients joined", proc.stderr)
    assert joined, proc.stderr[-2000:]
