"""The workflow against a real SLURM controller (tests/slurm/cluster.py): the slurm profile as users install and
run it (`hwsweep profile install slurm`, `snakemake --profile slurm all`), multi-node torchrun through srun,
resources read back from the controller, preemption and time limits, and `status` from a login node's view.

One cluster per test session and two sweeps, each carrying several checks, run side by side (most of their time
is waiting: job start-up, SLURM's polls):
- the matrix sweep (`matrix`): resources, GRES per node, 2-node parity, the user's config replacing the default,
  the aggregate's shape against a local run, and which rules become SLURM jobs;
- the signals sweep (`signals`): a run preempted PREEMPTIONS times with no retry to spend, its uninterrupted
  twin, a 2-node run preempted once, a run signalled before its time limit, a run that fails, and `status`
  asked from a process namespace that sees no compute-node process, while jobs pend, run, wait after a
  preemption and fail.
"""

import copy
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from conftest import BIN, REPO, SMALL, snakemake_command, write_config

sys.path.insert(0, str(REPO / "tests" / "slurm"))
import cluster  # noqa: E402

# One worker (the cluster has fixed ports); a session fixture drives a whole sweep in its first test's setup.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.timeout(1800)]

# Fake-GPU nodes have no CUDA: the config says accelerator: cpu explicitly (and train.json records it).
HARDWARE = {
    "cpu1": {"accelerator": "cpu", "devices_per_node": 1, "partition": "cpu", "cpus_per_task": 1, "mem_mb": 1000,
             "runtime": 10},
    "h100x2": {"accelerator": "cpu", "devices_per_node": 2, "gres": "gpu:h100:2",
               "partition": "gpu-h100", "cpus_per_task": 2, "mem_mb": 2000, "runtime": 10},
    "h100x2n": {"accelerator": "cpu", "nodes": 2, "devices_per_node": 1, "gres": "gpu:h100:1",
                "partition": "gpu-h100", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 10},
    # GPUs by model, 2 per node on 2 nodes, while h100-1 has only 2 of its 4 free: SLURM must give 2 + 2.
    "g2n": {"accelerator": "cpu", "nodes": 2, "devices_per_node": 2, "gpu_type": "fake-h100", "memory_gb": 80,
            "gpu_model": "h100", "partition": "gpu-h100", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 10},
}  # fmt: skip


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """The test cluster, and the slurm profile installed as users install it, into a private XDG_CONFIG_HOME."""
    if os.geteuid() != 0 and not cluster.shutil.which("slurmctld"):
        pytest.skip("needs root (to install and start SLURM) or an installed SLURM")
    env, proc = with_profile(cluster.up(), tmp_path_factory.mktemp("xdg"))
    assert f"installed profile slurm: {env['XDG_CONFIG_HOME']}/snakemake/slurm/config.yaml" in proc.stdout
    # No accounting here: snakemake asks squeue (test_accounting.py's cluster keeps accounting: sacct)
    assert "\nslurm-status-command: squeue" in Path(env["XDG_CONFIG_HOME"], "snakemake/slurm/config.yaml").read_text()
    yield env
    if cluster.controller_up():  # a test may have stopped it; then scancel would retry for some 15 s
        subprocess.run(["scancel", "--user", "root"], env=env, check=False)
    cluster.down()


def with_profile(env: dict, xdg: Path) -> tuple[dict, subprocess.CompletedProcess]:
    """A cluster's clients' environment with the slurm profile installed as users install it (`hwsweep profile
    install slurm`), into `xdg` as XDG_CONFIG_HOME; and the install's output."""
    env = env | {"XDG_CONFIG_HOME": str(xdg), "PATH": f"{BIN}{os.pathsep}{env['PATH']}"}
    proc = subprocess.run(["hwsweep", "profile", "install", "slurm"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return env, proc


# Seconds before the first and between status checks (the profile's 20): each job's end is seen this
# much sooner. The controller keeps finished jobs MinJobAge (900 s) >= 3x this, as squeue needs.
STATUS_SECONDS = "1"


def slurm_command(workdir: Path, cfg: dict, *args: str, targets=("all",)) -> list[str]:
    """`snakemake --profile slurm all` as typed, run in `workdir` (its config written there); the tests add the
    Snakefile, their config and shorter status intervals."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = write_config(workdir, cfg)
    return ["snakemake", "--profile", "slurm", *targets,
            "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile", str(path),
            "--replace-workflow-config", "--slurm-init-seconds-before-status-checks", STATUS_SECONDS,
            "--seconds-between-status-checks", STATUS_SECONDS, "--slurm-keep-successful-logs", *args]  # fmt: skip


def start_slurm(workdir: Path, cfg: dict, env: dict, *args: str, targets=("all",)) -> subprocess.Popen:
    """slurm_command started in the background, its stderr in workdir/snakemake.err."""
    cmd = slurm_command(workdir, cfg, *args, targets=targets)
    err = open(workdir / "snakemake.err", "w")
    return subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env)


def finish(proc: subprocess.Popen, timeout: int = 600) -> tuple[int, str]:
    """Wait for start_slurm's snakemake (a hard timeout: on SIGTERM snakemake would wait for its jobs): its exit
    status and its stderr."""
    try:
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, Path(proc.args[proc.args.index("--directory") + 1], "snakemake.err").read_text()


def wait_for(what: str, found, timeout: float = 180):
    """Poll `found()` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := found():
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def jobs_of(workdir: Path, env: dict) -> list[dict]:
    """Every SLURM job the controller knows of the workflow in `workdir` (pending, running, ended): id, state,
    reason, restarts and the comment the executor sets (rule_<rule>_wildcards_<values>)."""
    fields = ("JobID", "State", "Reason", "RestartCnt", "Comment", "WorkDir")
    out = subprocess.run(["squeue", "-h", "-t", "all", "-O", ",".join(f"{f}:|" for f in fields)],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    names = ("id", "state", "reason", "restarts", "comment", "workdir")
    rows = [dict(zip(names, line.split("|"))) for line in out.splitlines()]
    return [r for r in rows if os.path.realpath(r["workdir"]) == os.path.realpath(workdir)]


WAITING = ("PENDING", "REQUEUED")  # a job back in the queue


def train_comments(suite: str, hardware: str) -> set[str]:
    """The comments of a job that trains the run (variant default, seed 0): its train rule's, or the run's group
    job's (train alone, or train and evaluate: workflow/rules/allocation.smk)."""
    group = f"rule_run_{suite}_default_{hardware}_seed0"
    return {f"rule_train_wildcards_{suite}_default_{hardware}_0", f"{group}_train", f"{group}_evaluate_train"}


def trains(comment: str) -> bool:
    return comment.startswith("rule_train_") or (comment.startswith("rule_run_") and comment.endswith("_train"))


def train_job(workdir: Path, suite: str, hardware: str, env: dict, states=("RUNNING",)) -> dict | None:
    """The newest train job of the run (variant default, seed 0) in `workdir`, if it is in one of `states`."""
    mine = [j for j in jobs_of(workdir, env) if j["comment"] in train_comments(suite, hardware)]
    newest = max(mine, key=lambda j: int(j["id"]), default=None)
    return newest if newest and newest["state"] in states else None


def scontrol_job(job_id: str, env: dict) -> dict:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, env=env, check=True)
    return dict(field.split("=", 1) for field in out.stdout.split() if "=" in field)


def seconds(duration: str) -> int:
    """SLURM's [days-]hours:minutes:seconds in seconds."""
    days, _, clock = duration.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def final_weights_equal(a: Path, b: Path) -> bool:
    import torch

    x, y = (torch.load(p / "final.pt", weights_only=False)["model"] for p in (a, b))
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def login_status(folder: Path, env: dict) -> tuple[pd.DataFrame, subprocess.CompletedProcess]:
    """`snakemake -f status` typed on a login node: in a PID namespace of its own, where no process of a job (the
    compute nodes' launchers and trainers) is visible; its status.csv by run (suite, hardware) and its output."""
    cmd, _ = snakemake_command(folder, None, "-f", "status", "--cores", "1")
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", *cmd], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = pd.read_csv(folder / "results/partial/status.csv", keep_default_na=False)
    return frame.set_index(["suite", "hardware"]), proc


# -- the signals sweep -----------------------------------------------------------------------------------------
# scancel --signal=TERM, each after the resumed attempt wrote a newer checkpoint: more stops than the retries
# (none), at about a minute each on the loaded 2-core test machine; HWSWEEP_SLURM_PREEMPTIONS=10 for a longer test.
PREEMPTIONS = int(os.environ.get("HWSWEEP_SLURM_PREEMPTIONS", "3"))
SIGNALS_HARDWARE = {
    "c1": HARDWARE["cpu1"],  # preempted again and again
    "c1b": HARDWARE["cpu1"] | {"partition": "gpu-l40s"},  # the same run, never interrupted: the reference
    "c1s": HARDWARE["cpu1"] | {"partition": "gpu-l40s"},  # signalled STARTUP_STOPS seconds into successive attempts
    "c1t": HARDWARE["cpu1"] | {"partition": "gpu-rtx"},  # signalled ahead of its time limit (suite long)
    # CUDA asked for on a node without it: fails. Pending first: the test holds l40s-1's GPUs.
    "l40s": {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "L40S-48GB", "gres": "gpu:l40s:1",
             "partition": "gpu-l40s", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 5},
    # Two nodes, one rank each (CPUs only, beside the matrix sweep's GPU jobs): preempted once.
    "n2": {"accelerator": "cpu", "nodes": 2, "devices_per_node": 1, "partition": "gpu-h100", "cpus_per_task": 1,
           "mem_mb": 1000, "runtime": 10},
}  # fmt: skip
SIGNALS_RUNS = [("tiny", "c1"), ("tiny", "c1b"), ("tiny", "c1s"), ("tiny", "l40s"), ("long", "c1t"), ("tiny", "n2")]


@dataclass
class Signals:
    folder: Path
    code: int = 0
    err: str = ""
    stop_seconds: list[float] = field(default_factory=list)  # from scancel to the job waiting in the queue again
    startup_stops: list[tuple] = field(default_factory=list)  # (seconds into the attempt, to the requeue) of c1s
    time_limit: dict = field(default_factory=dict)
    statuses: dict = field(default_factory=dict)  # moment -> (status.csv by suite and hardware, snakemake's output)
    untouched: tuple = ()  # the run files before and after a status
    asking: threading.Lock = field(default_factory=threading.Lock)  # one status at a time: it locks its outputs

    def status(self, moment: str, env: dict) -> None:
        with self.asking:
            self.statuses[moment] = login_status(self.folder, env)


def snapshot(folder: Path) -> dict:
    """Every file of the sweep that `status` does not own, with its size and time."""
    own = ("results/partial/", "logs/status.log", ".snakemake/")
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")
            if p.is_file() and not str(p.relative_to(folder)).startswith(own)}  # fmt: skip


def preempt(folder: Path, env: dict, result: Signals, hardware: str = "c1", times: int = PREEMPTIONS) -> None:
    """scancel --signal=TERM to the run's train job `times` times, each once the job (back from the queue) wrote a
    checkpoint newer than the last; seconds from each signal to the job waiting in the queue again."""
    checkpoints = folder / f"results/tiny/default/{hardware}/seed0/checkpoints"

    def newest():
        steps = [int("".join(c for c in p.name if c.isdigit())) for p in checkpoints.glob("step*.pt")]
        return max(steps, default=-1)

    last = -1
    for n in range(times):
        job = wait_for(f"{hardware}'s train job", lambda: train_job(folder, "tiny", hardware, env), timeout=300)
        wait_for(f"a checkpoint after step {last}", lambda: newest() > last, timeout=300)
        last = newest()
        start = time.monotonic()
        subprocess.run(["scancel", "--signal=TERM", job["id"]], env=env, check=True)  # job steps, not the batch shell
        waiting = wait_for("the requeue", lambda: train_job(folder, "tiny", hardware, env, WAITING), timeout=120)
        result.stop_seconds.append(time.monotonic() - start)
        assert waiting["id"] == job["id"] and int(waiting["restarts"]) == n + 1, waiting  # the same job, requeued
        last = newest()  # the stop's checkpoint: the next signal waits for one after it (a trainer that runs)
        if hardware == "c1" and n == 1:  # held while it waits: status from the login node says preempted, not failed
            subprocess.run(["scontrol", "hold", job["id"]], env=env, check=True)
            result.status("preempted", env)
            subprocess.run(["scontrol", "release", job["id"]], env=env, check=True)


STARTUP_STOPS = (1, 2, 5, 10)  # seconds into successive attempts of one run (issue 65): start-up, mostly


def startup_stops(folder: Path, env: dict, result: Signals, hardware: str = "c1s") -> None:
    """scancel --signal=TERM to the run's train job STARTUP_STOPS seconds after each attempt began (its attempt log
    appeared): each time the same job is back in the queue, one restart more, whatever phase the signal met."""
    logs = folder / f"logs/tiny/default/{hardware}/seed0"
    for n, delay in enumerate(STARTUP_STOPS):
        attempt = logs / f"train.{n + 1}.log"
        job = wait_for(f"{hardware}'s attempt {n + 1}", lambda: attempt.is_file()
                       and train_job(folder, "tiny", hardware, env), timeout=300)  # fmt: skip
        began = time.monotonic()
        time.sleep(delay)
        subprocess.run(["scancel", "--signal=TERM", job["id"]], env=env, check=True)
        waiting = wait_for("the requeue", lambda: train_job(folder, "tiny", hardware, env, WAITING), timeout=120)
        result.startup_stops.append((delay, time.monotonic() - began))
        assert waiting["id"] == job["id"] and int(waiting["restarts"]) == n + 1, (delay, waiting)


def pending_then_time_limit(folder: Path, env: dict, result: Signals, held: str) -> None:
    """status while l40s's job pends (l40s-1's GPUs held) and c1t's runs; then the GPUs go (l40s runs, and
    fails). c1t's job, once its trainer's bar has been redrawn, gets the nearest whole-minute limit at least 120 s
    away: SLURM's --signal=TERM@110 comes in 10-70 s (each second of it, c1t's trainer takes a core). The job
    must be back in the queue (requeued after its checkpoint) before the limit; it then gets 10 minutes, and is
    cancelled once its next attempt trains (its run is far longer than the test)."""
    wait_for("l40s pending, c1t running", lambda: train_job(folder, "tiny", "l40s", env, ("PENDING",))
             and train_job(folder, "long", "c1t", env), timeout=300)  # fmt: skip
    result.status("pending", env)
    subprocess.run(["scancel", held], env=env, check=True)
    log = folder / "logs/long/default/c1t/seed0/train.log"
    job = wait_for("c1t's train job", lambda: train_job(folder, "long", "c1t", env), timeout=300)
    # The bar redraws at most every 10 s off a terminal; the signal may come 10 s after the cut, so the cut waits for
    # the first redraw: the log's "two bar lines" check then cannot race the signal.
    wait_for("c1t's bar redrawn", lambda: log.is_file() and log.read_text().count("\ntrain:") >= 2, timeout=300)
    run_time = seconds(scontrol_job(job["id"], env)["RunTime"])
    minutes = -(-(run_time + 120) // 60)  # SLURM's limits are whole minutes
    subprocess.run(["scontrol", "update", f"JobId={job['id']}", f"TimeLimit={minutes}"], env=env, check=True)
    limit_at = time.monotonic() + minutes * 60 - run_time
    waiting = wait_for("c1t's requeue", lambda: train_job(folder, "long", "c1t", env, WAITING), timeout=300)
    result.time_limit = {"requeued_before_limit_s": limit_at - time.monotonic(), "job": waiting["id"],
                         "restarts": int(waiting["restarts"])}  # fmt: skip
    subprocess.run(["scontrol", "update", f"JobId={job['id']}", "TimeLimit=10"], env=env, check=True)
    second = log.with_name("train.2.log")
    wait_for("c1t's second attempt training", lambda: second.is_file() and "train:" in second.read_text(), timeout=300)
    result.time_limit["state_before_cancel"] = scontrol_job(job["id"], env)["JobState"]
    subprocess.run(["scancel", job["id"]], env=env, check=True)


@pytest.fixture(scope="session")
def signals(slurm, matrix, tmp_path_factory) -> Signals:
    """The signals sweep, driven to its end (with the matrix sweep running beside it): the runs' train jobs only
    (the evaluation and tables are the matrix sweep's), no retry to spend. While c1 is preempted, a thread asks
    status while a job pends, then cuts a time limit, and another preempts the 2-node run once."""
    folder = tmp_path_factory.mktemp("signals")
    cfg = SMALL | {"seeds": [0], "baseline": "c1", "hardware": SIGNALS_HARDWARE}
    cfg["recipe"] = SMALL["recipe"] | {"reproducibility": "strict", "checkpoint_every": 10,
                                       "schedule": {"steps": 400 + 50 * PREEMPTIONS, "warmup_steps": 5}}  # fmt: skip
    long = {"overrides": {"schedule": {"steps": 10**6, "warmup_steps": 5}}}
    cfg["suites"] = {"tiny": SMALL["suites"]["tiny"], "long": long}
    result, failures = Signals(folder), []
    held = cluster.hold_gpus("l40s-1")
    targets = [f"results/{suite}/default/{hw}/seed0/train.json" for suite, hw in SIGNALS_RUNS]
    proc = start_slurm(folder, cfg, slurm, "--retries", "0", "--set-resources", "train:slurm_extra='--signal=TERM@110'",
                       targets=targets)  # fmt: skip
    try:

        def beside(work, *args):
            try:
                work(folder, slurm, result, *args)
            except BaseException as e:  # noqa: BLE001 - raised again below, in the test's thread
                failures.append(e)

        others = [threading.Thread(target=beside, args=(pending_then_time_limit, held)),
                  threading.Thread(target=beside, args=(preempt, "n2", 1)),
                  threading.Thread(target=beside, args=(startup_stops,))]  # fmt: skip
        for other in others:
            other.start()
        preempt(folder, slurm, result)
        for other in others:
            other.join(timeout=900)
        if failures:
            raise failures[0]
        result.code, result.err = finish(proc, timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["scancel", held], env=slurm, check=False)
    before = snapshot(folder)
    result.status("ended", slurm)
    result.untouched = (before, snapshot(folder))
    return result


def record(folder: Path, hardware: str) -> dict:
    return json.loads((folder / f"results/tiny/default/{hardware}/seed0/train.json").read_text())


def test_a_run_preempted_again_and_again_requeues_itself_and_finishes_bitwise_without_a_retry(signals, slurm):
    """--retries 0, PREEMPTIONS signals: each stop is a checkpoint and a requeue of the same job, never a failure;
    the run ends with the weights of its uninterrupted twin; every attempt is in its log."""
    folder = signals.folder
    cut, whole = record(folder, "c1"), record(folder, "c1b")
    assert cut["restarts"] == PREEMPTIONS and whole["restarts"] == 0, (cut["restarts"], signals.err[-3000:])
    assert 0 < cut["resumed_from_step"] < cut["plan"]["steps"]
    assert cut["curves"] == whole["curves"]
    assert final_weights_equal(folder / "results/tiny/default/c1/seed0", folder / "results/tiny/default/c1b/seed0")
    logs = sorted((folder / "logs/tiny/default/c1/seed0").glob("train.*.log"), key=lambda p: int(p.name.split(".")[1]))
    assert [p.name for p in logs] == [f"train.{n}.log" for n in range(1, PREEMPTIONS + 2)]  # every attempt kept
    texts = [p.read_text() for p in logs]
    assert all(t.startswith(f"==== hwsweep: attempt {n} (SLURM job ") for n, t in enumerate(texts, 1))
    assert texts[-1] == (folder / "logs/tiny/default/c1/seed0/train.log").read_text()  # train.log: the newest
    for text in texts[:-1]:  # each stopped attempt: one signal, a checkpoint, a requeue
        assert "(signals received: SIGTERM)" in text and "requeueing SLURM job" in text, text[-3000:]
    for text in texts:
        assert "SignalException" not in text and "ChildFailedError" not in text  # torchrun's agent took no part
    # Seconds from the signal to the job back in the queue (the old path waited 30-60 s for torchrun's agent).
    assert max(signals.stop_seconds) < 30, signals.stop_seconds
    (job,) = {j["id"] for j in jobs_of(folder, slurm) if j["comment"] in train_comments("tiny", "c1")}  # requeued
    assert scontrol_job(job, slurm)["JobState"] == "COMPLETED"


def test_a_signal_at_1_2_5_and_10_s_into_successive_attempts_requeues_each_and_finishes_bitwise(signals, slurm):
    """Issue 65: a stop during start-up (imports, rendezvous, data, model) is a preemption like one in the loop: exit
    75 and a requeue of the same job, no retry spent (--retries 0), the next attempt resuming from the newest
    checkpoint or starting over; never exit 143. The run ends with its uninterrupted twin's weights."""
    folder = signals.folder
    assert [d for d, _ in signals.startup_stops] == list(STARTUP_STOPS), signals.startup_stops
    cut, whole = record(folder, "c1s"), record(folder, "c1b")
    assert cut["curves"] == whole["curves"], signals.err[-3000:]
    assert final_weights_equal(folder / "results/tiny/default/c1s/seed0", folder / "results/tiny/default/c1b/seed0")
    logs = folder / "logs/tiny/default/c1s/seed0"
    texts = [(logs / f"train.{n}.log").read_text() for n in range(1, len(STARTUP_STOPS) + 2)]
    for text in texts[:-1]:
        assert "requeueing SLURM job" in text and "exit code 143" not in text, text[-3000:]
        assert "stopped by SIGTERM" in text or "(signals received: SIGTERM)" in text, text[-3000:]  # who said it
    assert "stop requested; checkpoint at step" not in texts[0], texts[0][-3000:]  # 1 s in: not yet in the loop
    (job,) = {j["id"] for j in jobs_of(folder, slurm) if j["comment"] in train_comments("tiny", "c1s")}  # requeued
    assert scontrol_job(job, slurm)["JobState"] == "COMPLETED"


def test_a_two_node_run_preempted_requeues_and_resumes_to_the_bits_of_one_node(signals):
    """Both nodes' launchers get SLURM's signal, their workers stop at one step, each node exits 75, the job
    requeues and resumes: the same weights as the one-node run never interrupted (strict reproducibility)."""
    folder = signals.folder
    two, whole = record(folder, "n2"), record(folder, "c1b")
    assert two["restarts"] == 1 and two["plan"]["nodes"] == 2 and two["curves"] == whole["curves"]
    assert final_weights_equal(folder / "results/tiny/default/n2/seed0", folder / "results/tiny/default/c1b/seed0")
    first = (folder / "logs/tiny/default/n2/seed0/train.1.log").read_text()
    for node in (0, 1):
        assert f"[node {node}]: every worker stopped after the checkpoint at step" in first, first[-3000:]
    assert "requeueing SLURM job" in first and "SignalException" not in first


def test_the_time_limit_signal_requeues_the_run_before_its_limit(signals, slurm):
    """SLURM's --signal=TERM@110 ahead of the limit: checkpoint, exit 75 and requeue before the limit (not
    FAILED, not TIMEOUT); the next attempt resumes from that checkpoint."""
    limit = signals.time_limit
    assert limit["requeued_before_limit_s"] > 0 and limit["restarts"] == 1, limit
    assert limit["state_before_cancel"] == "RUNNING", limit  # the next attempt runs in the same job
    first, second = ((signals.folder / f"logs/long/default/c1t/seed0/train.{n}.log").read_text() for n in (1, 2))
    assert "exiting 75" in first and "every worker stopped after the checkpoint at step" in first, first[-3000:]
    # srun passes output on by whole lines: the bar's redraws are lines, so the log showed the run as it trained
    assert "\r" not in first and first.count("\ntrain:") >= 2, first[-3000:]
    said = first.split("requeueing SLURM job")[0].rsplit("stopped after the checkpoint at step ", 1)[1]
    step = int(said.split(";")[0])
    assert "resumed from " in second and f"(step {step})" in second  # the banner: resumed there
    assert list((signals.folder / "results/long/default/c1t/seed0/checkpoints").glob("step*.pt"))
    assert scontrol_job(limit["job"], slurm)["JobState"] == "CANCELLED"  # by the test, not TIMEOUT or FAILED


def test_a_failing_job_is_reported_and_the_others_finish(signals):
    assert signals.code != 0
    assert "Error in rule train" in signals.err and "hardware=l40s" in signals.err
    assert (signals.folder / "results/tiny/default/c1b/seed0/train.json").exists()
    assert "no CUDA device is visible" in (signals.folder / "logs/tiny/default/l40s/seed0/train.log").read_text()


def test_status_from_a_login_node_asks_slurm(signals):
    """What no process on a login node shows: a pending job (and why), a running one (and where), one waiting
    after its preemption, one failed (SLURM's state and exit code, then the cause), never progress output."""
    pending, _ = signals.statuses["pending"]
    l40s, c1b, c1 = ("tiny", "l40s"), ("tiny", "c1b"), ("tiny", "c1")
    assert pending.loc[l40s, "state"] == "pending" and "PENDING (Resources)" in pending.loc[l40s, "scheduler"]
    c1t = ("long", "c1t")
    assert pending.loc[c1t, "state"] == "running" and "RUNNING, on rtx-1" in pending.loc[c1t, "scheduler"]
    assert pending.loc[("long", "c1")].state == "missing"  # never submitted: not a target of this sweep
    preempted, _ = signals.statuses["preempted"]
    assert preempted.loc[c1, "state"] == "preempted", preempted.loc[c1].to_dict()
    assert "PENDING (JobHeld" in preempted.loc[c1, "scheduler"] and "requeued 2 times" in preempted.loc[c1, "scheduler"]
    ended, proc = signals.statuses["ended"]
    assert ended.loc[c1, "state"] == "trained" and ended.loc[c1b, "state"] == "trained"  # evaluation not asked for
    assert "the next all: " not in proc.stderr and "rewrit" not in proc.stderr, proc.stderr[-3000:]  # no repair claimed
    assert ended.loc[l40s, "state"] == "failed"
    problem = ended.loc[l40s, "problem"]
    assert problem.startswith("SLURM job ") and "FAILED, exit code 1:0: " in problem
    assert "no CUDA device is visible" in ended.loc[l40s, "problem"]
    cancelled = ended.loc[c1t]
    assert cancelled.state == "failed" and "CANCELLED" in cancelled.problem and "requeued 1 time" in cancelled.scheduler
    for frame, _ in signals.statuses.values():
        assert not frame.problem.str.contains("%|", regex=False).any() and not frame.problem.str.contains("<NO_").any()
    before, after = signals.untouched
    assert before == after  # status wrote results/partial/ and nothing else


# -- the matrix sweep ------------------------------------------------------------------------------------------
@dataclass
class Matrix:
    folder: Path
    cfg: dict
    proc: subprocess.Popen
    local: subprocess.Popen
    held: str
    done: tuple | None = None

    def wait(self, slurm) -> tuple[int, str, int, str]:
        if self.done is None:
            try:
                code, err = finish(self.proc, timeout=900)
                _, local_err = self.local.communicate(timeout=900)
            finally:
                for p in (self.proc, self.local):
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                subprocess.run(["scancel", self.held], env=slurm, check=False)
            self.done = (code, err, self.local.returncode, local_err)
        return self.done


@pytest.fixture(scope="session")
def matrix(slurm, tmp_path_factory) -> Matrix:
    """The matrix sweep, started (in a folder that also holds the default config/config.yaml) and left running in
    the background; its local twin (the same matrix, multi-node left out, on the local executor) beside it, niced.
    Tests that read it wait for both."""
    folder = tmp_path_factory.mktemp("matrix")
    (folder / "slurm/config").mkdir(parents=True)
    (folder / "slurm/config/config.yaml").write_text((REPO / "config/config.yaml").read_text())
    cfg = SMALL | {"hardware": HARDWARE, "baseline": "cpu1", "seeds": [0]}
    cfg["recipe"] = SMALL["recipe"] | {"reproducibility": "strict", "global_batch": 32, "micro_batch": 8,
                                       "schedule": {"steps": 40, "warmup_steps": 5}}  # fmt: skip
    local_cfg = cfg | {"hardware": {k: v for k, v in HARDWARE.items() if v.get("nodes", 1) == 1}}
    (folder / "local").mkdir()
    cmd, env = snakemake_command(folder / "local", local_cfg, "--cores", "2")
    held = cluster.hold_gpus("h100-1", count=2)
    local = subprocess.Popen(["nice", "-n", "19", *cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    proc = start_slurm(folder / "slurm", cfg, slurm, "--retries", "0")
    run = Matrix(folder, cfg, proc, local, held)
    yield run
    run.wait(slurm)


@pytest.fixture(scope="session")
def matrix_done(matrix, slurm) -> Path:
    code, err, local_code, local_err = matrix.wait(slurm)
    assert code == 0, err[-4000:]
    assert local_code == 0, local_err[-4000:]
    return matrix.folder / "slurm"


def test_jobs_compute_from_the_replacing_config_with_a_default_config_present(matrix_done, matrix):
    """--replace-workflow-config is not forwarded to jobs: they must still use the user's config alone, not
    config/config.yaml merged back in (other suites, hardware and recipe keys: optimizer, precision...)."""
    assert sorted(p.name for p in (matrix_done / "results").iterdir() if p.is_dir()) == ["tiny"]
    rec = json.loads((matrix_done / "results/tiny/default/cpu1/seed0/train.json").read_text())
    assert rec["provenance"]["env"]["SLURM_JOB_ID"]  # ran as a SLURM job
    assert rec["spec"]["recipe"]["optimizer"] == json.loads((matrix_done / "results/tiny/default/cpu1/seed0/spec.json")
                                                            .read_text())["recipe"]["optimizer"]  # fmt: skip
    assert len(pd.read_csv(matrix_done / "results/comparison.csv")) == len(matrix.cfg["hardware"])


def test_matrix_runs_on_slurm_with_the_intended_resources(matrix_done, matrix, slurm):
    run = matrix_done / "results/tiny/default"
    records = {hw: json.loads((run / f"{hw}/seed0/train.json").read_text()) for hw in HARDWARE}
    expected = {"cpu1": ("cpu", "1", None), "h100x2": ("gpu-h100", "1", "gpu:h100:2"),
                "h100x2n": ("gpu-h100", "2", "gpu:h100:1"), "g2n": ("gpu-h100", "2", "gpu:h100:2")}  # fmt: skip
    for hw, rec in records.items():
        assert rec["plan"]["accelerator"] == "cpu"  # said explicitly, recorded
        job = scontrol_job(rec["provenance"]["env"]["SLURM_JOB_ID"], slurm)
        partition, nodes, gres = expected[hw]
        assert job["Partition"] == partition and job["NumNodes"] == nodes
        assert int(job["NumCPUs"]) >= HARDWARE[hw]["cpus_per_task"] * int(nodes)
        if gres:
            assert gres in job.get("TresPerNode", ""), job
    assert len(records["h100x2"]["provenance"]["env"]["CUDA_VISIBLE_DEVICES"].split(",")) == 2  # GRES bound

    # The 2-node run: one torchrun per node, world size = nodes x devices, same bits as one node.
    two = records["h100x2n"]
    assert two["plan"]["world_size"] == 2 and two["plan"]["nodes"] == 2
    assert sorted(two["provenance"]["devices"]) == ["h100-1:" + two["provenance"]["devices"][0].split(":")[1],
                                                    "h100-2:" + two["provenance"]["devices"][0].split(":")[1]]  # fmt: skip
    log = (matrix_done / "logs/tiny/default/h100x2n/seed0/train.log").read_text()
    assert "--node_rank 0" in log and "--node_rank 1" in log and "[node 0]" in log and "[node 1]" in log
    assert two["curves"] == records["h100x2"]["curves"] == records["cpu1"]["curves"] == records["g2n"]["curves"]

    # The aggregate has the shape of a local run of the same matrix (multi-node left out locally).
    on_slurm = pd.read_csv(matrix_done / "results/comparison.csv")
    local = pd.read_csv(matrix.folder / "local/results/comparison.csv")
    assert list(on_slurm.columns) == list(local.columns) and len(on_slurm) == len(local) + 2


def test_gpus_are_asked_per_node_and_each_node_sees_its_ranks_gpus(matrix_done, slurm):
    """The 2-node gpu_model entry while h100-1 has 2 of its 4 GPUs taken: 2 GPUs on each node, never 4 for the
    job (which SLURM may place 1 + 3); the launcher checks them on every node."""
    rec = json.loads((matrix_done / "results/tiny/default/g2n/seed0/train.json").read_text())
    job = scontrol_job(rec["provenance"]["env"]["SLURM_JOB_ID"], slurm)
    assert "gres:gpu:h100:2" in job.get("TresPerNode", "") and "gpu" not in job.get("TresPerJob", ""), job
    log = (matrix_done / "logs/tiny/default/g2n/seed0/train.log").read_text()
    for node in (0, 1):
        assert f"[node {node}]: 2 GPU(s) visible" in log, log[-3000:]


def test_each_run_queues_once_and_nothing_else_queues(matrix_done, slurm):
    """The rules that take seconds (aggregate, tables, plots, combine) run on the submit host, and a run's
    evaluation runs in its train job's allocation: a sweep queues one SLURM job per run, nothing else. The
    evaluation ran in that job (its record names it), after the training."""
    comments = sorted(j["comment"] for j in jobs_of(matrix_done, slurm))
    runs = [f"tiny_default_{hw}_seed0" for hw in HARDWARE]
    assert comments == sorted(f"rule_run_{run}_evaluate_train" for run in runs)
    for hw in HARDWARE:
        job = json.loads((matrix_done / f"results/tiny/default/{hw}/seed0/train.json").read_text())["provenance"]
        logs = matrix_done / f".snakemake/slurm_logs/group_run_tiny_default_{hw}_seed0_evaluate_train"
        text = (logs / f"{job['env']['SLURM_JOB_ID']}.log").read_text()
        assert text.index("rule train:") < text.index("rule evaluate:"), text[-3000:]


# -- no sweep --------------------------------------------------------------------------------------------------
def hwsweep_resources(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["hwsweep", "resources", "--configfile", str(REPO / "config/config.yaml")],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip


def test_resources_on_a_drained_node_and_a_node_whose_gpus_are_all_allocated(slurm, matrix_done, tmp_path):
    """After the sweeps (whose jobs would change the counts)."""
    cluster.drain("h100-2", "test")
    job = cluster.hold_gpus("h100-1")
    try:
        proc = hwsweep_resources(slurm)
    finally:
        subprocess.run(["scancel", job], env=slurm, check=False)
        cluster.resume("h100-2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert ("partition gpu-h100: h100 = H100-80GB, 8 GPUs on 2 nodes: 0 idle, 4 allocated, 4 drained or down "
            "[h100-2: drained (test)]") in lines  # fmt: skip
    assert "  busy now: h100x1, h100x2, h100x4, h100x8-2n" in lines
    assert "partition gpu-l40s: l40s = L40S-48GB, 2 GPUs on 1 node: 2 idle, 0 allocated, 0 drained or down" in lines
    assert any(line.startswith("partition cpu (default): CPU only, 8 CPUs on 1 node") for line in lines)
    assert "  note: rtx6000 is not in the catalog: add memory_gb (GB per GPU) to its hardware entry" in lines
    assert any(line.startswith("  l40sx2: {accelerator: cuda, nodes: 1, devices_per_node: 2, gpu_type: L40S-48GB, "
                               "partition: gpu-l40s, gres: 'gpu:l40s:2'") for line in lines)  # fmt: skip

    # A client whose controller does not answer: one line, and its wait on the controller under 5 s (sinfo alone
    # would retry ~10 s). The wait is the command's seconds less those of the same command where no SLURM client
    # is on PATH, timed beside it under the same load: the interpreter's start and the config's reading are not the
    # controller's (the whole command once took 5.19 s against the client's 4 s timeout, 3 workers on 2 cores).
    dead = tmp_path / "slurm.conf"
    dead.write_text(cluster.conf_path().read_text().replace(f"SlurmctldPort={cluster.CTLD_PORT}", "SlurmctldPort=1"))
    start = time.monotonic()
    proc = hwsweep_resources(slurm | {"SLURM_CONF": str(dead)})
    seconds = time.monotonic() - start
    alone = tmp_path / "bin"
    alone.mkdir()
    (alone / "hwsweep").symlink_to(BIN / "hwsweep")
    start = time.monotonic()
    asks_nobody = hwsweep_resources(slurm | {"PATH": str(alone)})
    own = time.monotonic() - start
    assert asks_nobody.returncode == 1 and "no SLURM client: sinfo is not on PATH" in asks_nobody.stderr
    assert seconds - own < 5 and proc.returncode == 1, (seconds, own)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("hwsweep resources: no answer from the SLURM controller")


def test_a_killed_snakemakes_running_job_gets_no_second_job_and_its_record_is_taken(slurm, tmp_path):
    """The login node's snakemake dies (kill -9) while a train job runs; `--unlock`, then the same command again:
    it refuses in one line naming the job (never a second job for the run), `status` says no snakemake waits
    for it; once the job has ended, the command again takes its record as it is (no train job) and finishes."""
    folder = tmp_path / "killed"
    cfg = copy.deepcopy(SMALL) | {"hardware": {"cpu1": HARDWARE["cpu1"]}, "baseline": "cpu1", "seeds": [0]}
    cfg["recipe"]["schedule"] = {"steps": 400, "warmup_steps": 5}
    first = start_slurm(folder, cfg, slurm)
    job = wait_for("the train job", lambda: train_job(folder, "tiny", "cpu1", slurm), timeout=300)
    # Held (SUSPENDED, a state SLURM resumes from) once its attempt holds the run's lease, until the checks below
    # are made, however fast it would train.
    wait_for("the attempt's lease", lambda: (folder / "results/tiny/default/cpu1/seed0/lease.json").exists())
    subprocess.run(["scontrol", "suspend", job["id"]], env=slurm, check=True, capture_output=True, timeout=60)
    first.kill()  # as a dropped ssh session or the login node's OOM killer does
    first.wait()
    unlock = subprocess.run(slurm_command(folder, cfg, "--unlock"), cwd=folder, capture_output=True, text=True,
                            env=slurm, timeout=300)  # fmt: skip
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    again = subprocess.run(slurm_command(folder, cfg), cwd=folder, capture_output=True, text=True, env=slurm,
                           timeout=300)  # fmt: skip
    assert again.returncode != 0
    said = [line for line in again.stderr.splitlines() if "is still being trained" in line]
    assert len(said) == 1 and f"SLURM job {job['id']} (" in said[0] and f"scancel {job['id']}" in said[0], again.stderr
    found = [j for j in jobs_of(folder, slurm) if trains(j["comment"])]
    assert [j["id"] for j in found] == [job["id"]]  # one job for the run, the first
    frame, _ = login_status(folder, slurm)
    assert frame.loc[("tiny", "cpu1"), "state"] in ("running", "pending", "preempted")
    assert frame.loc[("tiny", "cpu1"), "problem"].startswith("no snakemake waits for it"), frame.to_dict()

    subprocess.run(["scontrol", "resume", job["id"]], env=slurm, check=True, capture_output=True, timeout=60)
    wait_for("the first job's end", lambda: not train_job(folder, "tiny", "cpu1", slurm, ("RUNNING", *WAITING)),
             timeout=900)  # fmt: skip
    record = folder / "results/tiny/default/cpu1/seed0/train.json"
    assert record.exists()
    made = record.read_bytes()
    last = subprocess.run(slurm_command(folder, cfg), cwd=folder, capture_output=True, text=True, env=slurm,
                          timeout=900)  # fmt: skip
    assert last.returncode == 0, last.stderr[-3000:]
    found = [j for j in jobs_of(folder, slurm) if trains(j["comment"])]
    assert [j["id"] for j in found] == [job["id"]] and record.read_bytes() == made  # its record, as it was made
    data = json.loads(made)
    assert data["restarts"] == 0 and data["provenance"]["env"]["SLURM_JOB_ID"] == job["id"]
    assert (folder / "results/tiny/default/cpu1/seed0/eval.json").exists()
    logs = sorted((folder / "logs/tiny/default/cpu1/seed0").glob("train.*.log"))
    assert [p.name for p in logs] == ["train.1.log"] and f"SLURM job {job['id']}" in logs[0].read_text().splitlines()[0]


def test_down_stops_the_daemons_and_leaves_no_client_config_behind(slurm, matrix_done, signals):
    """Last: it stops the session's cluster."""
    files = cluster.DEFAULT.pid_files()
    pids = {f.name: cluster.pid_of(f) for f in files if "slurmdbd" not in f.name and "mariadbd" not in f.name}
    assert all(map(cluster.alive, pids.values())), "every daemon must leave a PID file to be stopped by"
    cluster.down()
    assert not any(map(cluster.alive, pids.values()))
    # Its slurmds saw their own /run/slurm: the machine's is untouched (a link there would send every other
    # cluster's job steps here).
    shared = Path("/run/slurm/conf")
    assert not (shared.is_symlink() and os.readlink(shared).startswith(str(cluster.ROOT)))
