"""The accounting path against a real slurmdbd (tests/slurm/cluster.py's cluster with accounting: MariaDB and
slurmdbd beside the controller): `hwsweep profile install` still picks squeue, and `status` from a login node's view reads
jobs that have left squeue from sacct: one completed, one failed (the crash's cause from its log), one requeued
after a preemption and then cancelled, one at its time limit. The squeue-only path is test_slurm.py's (its cluster
keeps no accounting).

One sweep, its jobs side by side; the controller forgets an ended job MinJobAge (2 s) after its end, at its next
purge (every 60 s), so each job really leaves squeue before status is asked.
"""

import copy
import os
import subprocess
import sys
import time

import pytest
import yaml
from conftest import REPO, SMALL
from test_slurm import HARDWARE, WAITING, jobs_of, login_status, start_slurm, train_job, wait_for, with_profile

sys.path.insert(0, str(REPO / "tests" / "slurm"))
import cluster  # noqa: E402

from hwsweep.analysis.holders import newest_logged_job  # noqa: E402
from hwsweep.contracts import scheduler  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.timeout(1200)]

RUNS = {  # hardware name: (suite, entry)
    "ok": ("tiny", HARDWARE["cpu1"]),  # completes
    # CUDA asked for on a node without it: the launcher fails at once
    "crash": ("tiny", {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "L40S-48GB", "gres": "gpu:l40s:1",
                       "partition": "gpu-l40s", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 5}),
    "req": ("long", HARDWARE["cpu1"] | {"partition": "gpu-rtx"}),  # preempted once, then cancelled
    # A 1-minute limit with no signal ahead of it that the trainer stops at (SIGURG, ignored): SLURM ends it TIMEOUT
    "tlim": ("long", HARDWARE["cpu1"] | {"partition": "gpu-h100", "runtime": 1}),
}  # fmt: skip


@pytest.fixture(scope="module")
def accounted(tmp_path_factory):
    """The cluster with accounting (its own folder and ports, beside test_slurm's), the slurm profile installed as
    users install it; the clients' environment."""
    if os.geteuid() != 0 and not cluster.shutil.which("slurmdbd"):
        pytest.skip("needs root (to install and start SLURM, MariaDB and slurmdbd) or them installed")
    site = cluster.with_accounting(min_job_age=2)
    env = site.up()
    try:
        env, proc = with_profile(env, tmp_path_factory.mktemp("xdg"))
        assert "forgets an ended job after 2 s (MinJobAge)" in proc.stdout, proc.stdout  # the executor asks sacct
        yield env
    finally:
        if site.controller_up():
            subprocess.run(["scancel", "--user", "root"], env=env, check=False, timeout=30)
        site.down()


def test_the_profile_asks_squeue_even_where_the_cluster_keeps_accounting(accounted):
    """With sacct, snakemake-executor-plugin-slurm 2.8 never sees the end of a cancelled job ("CANCELLED by 0");
    `hwsweep status` reads sacct itself (below)."""
    profile = yaml.safe_load(open(f"{accounted['XDG_CONFIG_HOME']}/snakemake/slurm/config.yaml"))
    assert profile["slurm-status-command"] == "squeue"


def test_sacct_answers_nothing_for_a_job_it_never_saw(accounted, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", accounted["SLURM_CONF"])
    assert scheduler.accounted_jobs(["999999"]) == []


@pytest.fixture(scope="module")
def left_squeue(accounted, tmp_path_factory):
    """The sweep run until each of its jobs has ended (one run preempted, then cancelled, by this fixture), then
    waited for until squeue has forgotten every job of it: status.csv as a login node sees it then, each run's job
    (from its log) and snakemake's output."""
    folder = tmp_path_factory.mktemp("accounted")
    # No evaluation: each job trains alone, its time limit the hardware's runtime (an evaluated run's job also holds
    # its evaluation's minutes: workflow/rules/allocation.smk).
    cfg = copy.deepcopy(SMALL) | {"seeds": [0], "baseline": "ok", "hardware": {k: v for k, (_, v) in RUNS.items()},
                                  "evaluation": "none", "metrics": {"loss": {"goal": "min", "stage": "train"}}}  # fmt: skip
    cfg["recipe"] |= {"checkpoint_every": 10, "schedule": {"steps": 20, "warmup_steps": 2}}
    cfg["suites"]["long"] = {"overrides": {"schedule": {"steps": 10**6, "warmup_steps": 5}}}
    targets = [f"results/{suite}/default/{hw}/seed0/train.json" for hw, (suite, _) in RUNS.items()]
    proc = start_slurm(folder, cfg, accounted, "--retries", "0", "--keep-going", "--set-resources",
                       "train:slurm_extra='--signal=URG@1'", targets=targets)  # fmt: skip
    try:
        checkpoints = folder / "results/long/default/req/seed0/checkpoints"
        job = wait_for("req's train job", lambda: train_job(folder, "long", "req", accounted), timeout=300)
        wait_for("req's first checkpoint", lambda: list(checkpoints.glob("step*.pt")), timeout=300)
        subprocess.run(["scancel", "--signal=TERM", job["id"]], env=accounted, check=True, timeout=30)
        wait_for("req's requeue", lambda: train_job(folder, "long", "req", accounted, WAITING), timeout=120)
        second = folder / "logs/long/default/req/seed0/train.2.log"
        wait_for("req's second attempt", lambda: second.is_file() and "train:" in second.read_text(), timeout=300)
        subprocess.run(["scancel", job["id"]], env=accounted, check=True, timeout=30)
        # snakemake-executor-plugin-slurm 2.8 with sacct takes "CANCELLED by 0" for a live state and waits for the
        # cancelled job forever: once every job has ended, snakemake is stopped as its user would.
        live = lambda: [j for j in jobs_of(folder, accounted) if j["state"] in scheduler.LIVE]  # noqa: E731
        wait_for("every job's end", lambda: not live(), timeout=300)
        time.sleep(5)  # its last status checks
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_for("squeue to forget the sweep's jobs", lambda: not jobs_of(folder, accounted), timeout=240)
    frame, _ = login_status(folder, accounted)
    jobs = {hw: newest_logged_job(folder / f"logs/{suite}/default/{hw}/seed0/train.log") for hw, (suite, _) in RUNS.items()}
    return frame, jobs, (folder / "snakemake.err").read_text()


def test_status_reads_the_jobs_that_left_squeue_from_sacct(left_squeue):
    frame, jobs, err = left_squeue
    assert "Error in rule train" in err and "hardware=crash" in err and "Finished jobid" in err
    assert all(jobs.values()), jobs  # each attempt's log names its job
    assert frame.loc[("tiny", "ok"), "state"] == "done" and frame.loc[("tiny", "ok"), "scheduler"] == ""

    crash = frame.loc[("tiny", "crash")]
    job = jobs["crash"]
    assert crash.state == "failed" and crash.problem.startswith(f"SLURM job {job} FAILED, exit code 1:0: "), crash
    assert "no CUDA device is visible" in crash.problem and crash.scheduler.startswith(f"job {job} FAILED, on l40s-1")

    req = frame.loc[("long", "req")]
    job = jobs["req"]
    assert req.state == "failed" and req.problem.startswith(f"SLURM job {job} CANCELLED"), req
    assert req.scheduler.endswith("requeued 1 time"), req  # sacct's records of the job: one before the last

    tlim = frame.loc[("long", "tlim")]
    job = jobs["tlim"]
    assert tlim.state == "timeout" and tlim.problem.startswith(f"SLURM job {job} TIMEOUT"), tlim
    for row in frame.itertuples():
        assert "%|" not in row.problem and "<NO_" not in row.problem
