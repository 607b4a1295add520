"""The workflow against a real SLURM controller (tests/slurm/cluster.py): the slurm profile as
users install and run it (`hwsweep profile install slurm`, `snakemake --profile slurm all`),
multi-node torchrun through srun, resources read back from the controller."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import BIN, REPO, snakemake_command, write_config

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import cluster  # noqa: E402

pytestmark = pytest.mark.slow

# Fake-GPU nodes have no CUDA: the config says accelerator: cpu explicitly (and train.json records it).
HARDWARE = {
    "cpu1": {"accelerator": "cpu", "devices_per_node": 1, "partition": "cpu", "cpus_per_task": 1, "mem_mb": 1000,
             "runtime": 10},
    "h100x2": {"accelerator": "cpu", "devices_per_node": 2, "gres": "gpu:h100:2",
               "partition": "gpu-h100", "cpus_per_task": 2, "mem_mb": 2000, "runtime": 10},
    "h100x2n": {"accelerator": "cpu", "nodes": 2, "devices_per_node": 1, "gres": "gpu:h100:1",
                "partition": "gpu-h100", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 10},
}  # fmt: skip


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The test cluster, and the slurm profile installed as users install it, into a private XDG_CONFIG_HOME."""
    if os.geteuid() != 0 and not cluster.shutil.which("slurmctld"):
        pytest.skip("needs root (to install and start SLURM) or an installed SLURM")
    env = cluster.up() | {"XDG_CONFIG_HOME": str(tmp_path_factory.mktemp("xdg"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(["hwsweep", "profile", "install", "slurm"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"installed profile slurm: {env['XDG_CONFIG_HOME']}/snakemake/slurm/config.yaml" in proc.stdout
    yield env
    if cluster.controller_up():  # a test may have stopped it; then scancel would retry for some 15 s
        subprocess.run(["scancel", "--user", "root"], env=env, check=False)
    cluster.down()


# Seconds before the first and between status checks (the profile's 20): each job's end is seen this
# much sooner. The controller keeps finished jobs MinJobAge (900 s) >= 3x this, as squeue needs.
STATUS_SECONDS = "1"


def run_slurm(workdir: Path, cfg: dict, env: dict, *args: str, timeout: int = 900):
    """`snakemake --profile slurm all` as typed, run in `workdir`; the tests add the Snakefile, their
    config and shorter status intervals."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = write_config(workdir, cfg)
    cmd = ["snakemake", "--profile", "slurm", "all",
           "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile", str(path),
           "--replace-workflow-config", "--slurm-init-seconds-before-status-checks", STATUS_SECONDS,
           "--seconds-between-status-checks", STATUS_SECONDS, *args]  # fmt: skip
    # A hard timeout: on SIGTERM snakemake would wait for its jobs.
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env)


def start_slurm(workdir: Path, cfg: dict, env: dict, *args: str, targets=("all",)) -> subprocess.Popen:
    """run_slurm's command, started in the background (its output in workdir/snakemake.err); `targets`
    instead of all: the signal tests need the train jobs only, not the small jobs after them."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = write_config(workdir, cfg)
    cmd = ["snakemake", "--profile", "slurm", *targets,
           "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile", str(path),
           "--replace-workflow-config", "--slurm-init-seconds-before-status-checks", STATUS_SECONDS,
           "--seconds-between-status-checks", STATUS_SECONDS, "--slurm-keep-successful-logs", *args]  # fmt: skip
    err = open(workdir / "snakemake.err", "w")
    return subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env)


def finish(proc: subprocess.Popen, timeout: int = 300) -> tuple[int, str]:
    """Wait for start_slurm's snakemake: its exit status and its stderr."""
    try:
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, Path(proc.args[proc.args.index("--directory") + 1], "snakemake.err").read_text()


def wait_for(what: str, found, timeout: float = 120):
    """Poll `found()` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := found():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def running_train_job(hardware: str, env: dict) -> str | None:
    """The SLURM id of the running train job of `hardware` (seed 0), from the comment the executor sets."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i %k"], capture_output=True, text=True,
                         env=env).stdout  # fmt: skip
    ids = [line.split()[0] for line in out.splitlines() if line.split()[-1].startswith("rule_train_")
           and line.split()[-1].endswith(f"_{hardware}_0")]  # fmt: skip
    return ids[0] if ids else None


def slurm_log(workdir: Path, job: str) -> Path:
    """The batch output of SLURM job `job` (the executor names it by the job id)."""
    (path,) = (workdir / ".snakemake/slurm_logs").rglob(f"{job}.log")
    return path


def final_weights_equal(a: Path, b: Path) -> bool:
    import torch

    x, y = (torch.load(p / "final.pt", weights_only=False)["model"] for p in (a, b))
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_jobs_compute_from_the_replacing_config_with_a_default_config_present(tmp_path, small_config, slurm):
    """--replace-workflow-config is not forwarded to jobs: they must still use the user's config alone, not
    config/config.yaml merged back in (other suites, hardware and recipe keys: optimizer, precision...)."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text((REPO / "config/config.yaml").read_text())
    cfg = small_config | {"seeds": [0], "baseline": "c1", "hardware": {"c1": HARDWARE["cpu1"]}}
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    proc = run_slurm(tmp_path, cfg, slurm, "--retries", "0", timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sorted(p.name for p in (tmp_path / "results").iterdir() if p.is_dir()) == ["tiny"]
    record = json.loads((tmp_path / "results/tiny/default/c1/seed0/train.json").read_text())
    assert record["provenance"]["env"]["SLURM_JOB_ID"]  # ran as a SLURM job
    assert len(pd.read_csv(tmp_path / "results/comparison.csv")) == 1


# Two identical entries on different partitions: one is interrupted, the other is the uninterrupted reference.
ONE_NODE = {"c1": HARDWARE["cpu1"], "c1b": HARDWARE["cpu1"] | {"partition": "gpu-l40s"}}


def test_scancel_signal_term_checkpoints_a_one_node_run_and_the_retry_resumes_bitwise(tmp_path, small_config, slurm):
    cfg = small_config | {"seeds": [0], "baseline": "c1", "hardware": ONE_NODE}
    cfg["recipe"] |= {"reproducibility": "strict", "checkpoint_every": 20}
    cfg["recipe"]["schedule"] = {"steps": 600, "warmup_steps": 5}
    proc = start_slurm(tmp_path, cfg, slurm, "--retries", "1",
                       targets=[f"results/tiny/default/{hw}/seed0/train.json" for hw in ONE_NODE])  # fmt: skip
    try:
        run = tmp_path / "results/tiny/default/c1/seed0"
        wait_for("a checkpoint", lambda: list((run / "checkpoints").glob("step*.pt")), timeout=150)
        job = wait_for("the train job", lambda: running_train_job("c1", slurm))
        subprocess.run(["scancel", "--signal=TERM", job], env=slurm, check=True)  # job steps only, not the batch shell
        code, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, err[-4000:]
    assert "failed" in slurm_log(tmp_path, job).read_text()  # the signalled attempt stopped; the retry resumed
    cut, whole = (json.loads((tmp_path / f"results/tiny/default/{hw}/seed0/train.json").read_text()) for hw in ONE_NODE)
    assert cut["restarts"] == 1 and 0 < cut["resumed_from_step"] < 600 and whole["restarts"] == 0
    assert cut["curves"] == whole["curves"]
    assert final_weights_equal(run, tmp_path / "results/tiny/default/c1b/seed0")


def test_a_one_node_run_gets_its_checkpoint_signal_before_the_time_limit(tmp_path, small_config, slurm):
    """The signal 110 s before the time limit (the profile's slurm_extra, which gives 180): the trainer checkpoints
    and exits 75 before the limit, it is not killed at the limit (TIMEOUT). SLURM sends the signal once, to the
    job steps there are then: the limit is cut short only once the trainer runs, as a job's start (the snakemake
    in the job) takes seconds to a minute on a loaded machine. The lead covers torchrun's own stop: its agent
    waits up to 30 s for a worker after SIGTERM and 30 s more after SIGKILL (CI once took the whole 60 s with
    a 50 s lead, and the job ran into its limit)."""
    cfg = small_config | {"seeds": [0], "baseline": "c1", "hardware": {"c1": HARDWARE["cpu1"] | {"runtime": 10}}}
    cfg["recipe"] |= {"checkpoint_every": 1000000}
    cfg["recipe"]["schedule"] = {"steps": 1000000, "warmup_steps": 5}
    proc = start_slurm(tmp_path, cfg, slurm, "--retries", "0", "--set-resources", "train:slurm_extra='--signal=TERM@110'",
                       targets=["results/tiny/default/c1/seed0/train.json"])  # fmt: skip
    try:
        log = tmp_path / "logs/tiny/default/c1/seed0/train.log"
        job = wait_for("the train job", lambda: running_train_job("c1", slurm), timeout=300)
        wait_for("the trainer's first steps", lambda: log.is_file() and "train:" in log.read_text(), timeout=300)
        # A limit in whole minutes (SLURM's unit) at least 140 s from now: the signal (110 s before it, or up to
        # 60 s earlier at SLURM's resolution) comes while the trainer runs.
        minutes = -(-(seconds(scontrol_job(job, slurm)["RunTime"]) + 140) // 60)
        subprocess.run(["scontrol", "update", f"JobId={job}", f"TimeLimit={minutes}"], env=slurm, check=True)
        code, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code != 0, err[-3000:]  # the attempt stopped and no retry was allowed
    assert "exiting 75" in log.read_text(), log.read_text()[-3000:]
    state = scontrol_job(job, slurm)
    assert state["JobState"] != "TIMEOUT" and seconds(state["RunTime"]) < minutes * 60, state  # before the limit
    assert list((tmp_path / "results/tiny/default/c1/seed0/checkpoints").glob("step*.pt"))


def seconds(duration: str) -> int:
    """SLURM's [days-]hours:minutes:seconds in seconds."""
    days, _, clock = duration.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def test_gpus_are_asked_per_node_and_each_node_sees_its_ranks_gpus(tmp_path, small_config, slurm):
    """A 2-node gpu_model entry while h100-1 has 2 of its 4 GPUs taken: 2 GPUs on each node, never 4 for the
    job (which SLURM may place 1 + 3); the launcher checks them on every node."""
    entry = {"accelerator": "cpu", "nodes": 2, "devices_per_node": 2, "gpu_type": "fake-h100", "memory_gb": 80,
             "gpu_model": "h100", "partition": "gpu-h100", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 10}  # fmt: skip
    cfg = small_config | {"seeds": [0], "baseline": "g2n", "hardware": {"g2n": entry}}
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    held = cluster.hold_gpus("h100-1", count=2)
    try:
        proc = run_slurm(tmp_path, cfg, slurm, "--retries", "0", timeout=600)
    finally:
        subprocess.run(["scancel", held], env=slurm, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    record = json.loads((tmp_path / "results/tiny/default/g2n/seed0/train.json").read_text())
    job = scontrol_job(record["provenance"]["env"]["SLURM_JOB_ID"], slurm)
    assert "gres:gpu:h100:2" in job.get("TresPerNode", "") and "gpu" not in job.get("TresPerJob", ""), job
    log = (tmp_path / "logs/tiny/default/g2n/seed0/train.log").read_text()
    for node in (0, 1):
        assert f"[node {node}]: 2 GPU(s) visible" in log, log[-3000:]


def scontrol_job(job_id: str, env: dict) -> dict:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, env=env, check=True)
    return dict(field.split("=", 1) for field in out.stdout.split() if "=" in field)


def test_matrix_runs_on_slurm_with_the_intended_resources(tmp_path, small_config, slurm):
    # One seed: resources, GRES and the bits of one node against two are properties of each run.
    cfg = small_config | {"hardware": HARDWARE, "baseline": "cpu1", "seeds": [0]}
    cfg["recipe"] |= {"reproducibility": "strict", "global_batch": 32, "micro_batch": 8}
    cfg["recipe"]["schedule"] = {"steps": 40, "warmup_steps": 5}
    # The same matrix on the local executor (multi-node left out), whose aggregate's shape is compared
    # below. It runs meanwhile, niced: on the CPU the SLURM jobs leave while snakemake waits for its polls.
    local_cfg = cfg | {"hardware": {k: v for k, v in HARDWARE.items() if k != "h100x2n"}}
    (tmp_path / "local").mkdir()
    cmd, env = snakemake_command(tmp_path / "local", local_cfg, "--cores", "2")
    local_run = subprocess.Popen(["nice", "-n", "19", *cmd], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        proc = run_slurm(tmp_path / "slurm", cfg, slurm)
        _, local_err = local_run.communicate(timeout=900)
    finally:
        if local_run.poll() is None:
            local_run.kill()
            local_run.wait()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert local_run.returncode == 0, local_err[-4000:]

    run = tmp_path / "slurm/results/tiny/default"
    records = {hw: json.loads((run / f"{hw}/seed0/train.json").read_text()) for hw in HARDWARE}
    expected = {"cpu1": ("cpu", "1", None), "h100x2": ("gpu-h100", "1", "gpu:h100:2"),
                "h100x2n": ("gpu-h100", "2", "gpu:h100:1")}  # fmt: skip
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
    log = (tmp_path / "slurm/logs/tiny/default/h100x2n/seed0/train.log").read_text()
    assert "--node_rank 0" in log and "--node_rank 1" in log and "[node 0]" in log and "[node 1]" in log
    assert two["curves"] == records["h100x2"]["curves"] == records["cpu1"]["curves"]

    # The aggregate has the shape of a local run of the same matrix (multi-node left out locally).
    on_slurm = pd.read_csv(tmp_path / "slurm/results/comparison.csv")
    local = pd.read_csv(tmp_path / "local/results/comparison.csv")
    assert list(on_slurm.columns) == list(local.columns) and len(on_slurm) == len(local) + 1


def test_a_failing_job_is_reported_and_the_others_finish(tmp_path, small_config, slurm):
    cfg = small_config | {"seeds": [0], "baseline": "cpu1"}
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    cfg["hardware"] = {
        "cpu1": HARDWARE["cpu1"],
        # CUDA asked for on a node without it: this job fails, every retry too.
        "l40s": {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "L40S-48GB", "gres": "gpu:l40s:1",
                 "partition": "gpu-l40s", "cpus_per_task": 1, "mem_mb": 1000, "runtime": 5},
    }  # fmt: skip
    proc = run_slurm(tmp_path, cfg, slurm, "--retries", "1", timeout=600)
    assert proc.returncode != 0
    assert "Error in rule train" in proc.stderr and "hardware=l40s" in proc.stderr
    assert (tmp_path / "results/tiny/default/cpu1/seed0/eval.json").exists()
    assert "no CUDA device is visible" in (tmp_path / "logs/tiny/default/l40s/seed0/train.log").read_text()


def hwsweep_resources(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["hwsweep", "resources", "--configfile", str(REPO / "config/config.yaml")],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip


def test_resources_on_a_drained_node_and_a_node_whose_gpus_are_all_allocated(slurm, tmp_path):
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

    # A client whose controller does not answer: one line, in under 5 s (sinfo alone would retry ~10 s).
    dead = tmp_path / "slurm.conf"
    dead.write_text(cluster.conf_path().read_text().replace(f"SlurmctldPort={cluster.CTLD_PORT}", "SlurmctldPort=1"))
    start = time.monotonic()
    proc = hwsweep_resources(slurm | {"SLURM_CONF": str(dead)})
    assert time.monotonic() - start < 5 and proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("hwsweep resources: no answer from the SLURM controller")


def test_down_stops_the_daemons_and_leaves_no_client_config_behind(slurm):
    files = [cluster.ROOT / "slurmctld.pid", cluster.MUNGE_PID, *(cluster.ROOT / f"slurmd-{n}.pid" for n in cluster.NODES)]
    pids = [cluster._pid(f) for f in files]
    assert all(cluster._alive(p) for p in pids), "every daemon must leave a PID file to be stopped by"
    cluster.down()
    assert not any(cluster._alive(p) for p in pids)
    # A leftover configless cache would stall every later SLURM client (and snakemake's start) by ~10 s.
    assert not (cluster.CONFIG_CACHE.is_symlink() and os.readlink(cluster.CONFIG_CACHE).startswith(str(cluster.ROOT)))
