"""`hwsweep recommend`: SLURM's queue estimate (sbatch --test-only) read and asked as an argument vector, the
ranking by time to result with a fake queue and synthetic runs, the CLI with stand-in clients, and on the real test
cluster a partition filled by held jobs moving its options down the ranking."""

import os
import stat
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from fake_runs import write_run
from fake_slurm import CLUSTER, fake_sinfo

from hwsweep.cluster import queue, recommend, slurm
from hwsweep.plan import predictions
from hwsweep.plan.config import resolve

NOW = datetime(2026, 1, 1, 12, 0, 0)
ANSWER = "sbatch: Job 7 to start at {} using 2 processors on nodes l40s-1 in partition gpu-l40s\n"
# Hardware of the test cluster's shapes; fake GPUs have no CUDA, so accelerator cpu (as tests/cluster/test_slurm.py).
HARDWARE = {
    "h100x2": {"accelerator": "cpu", "devices_per_node": 2, "gres": "gpu:h100:2", "partition": "gpu-h100",
               "cpus_per_task": 2, "mem_mb": 2000, "runtime": 10},
    "l40sx2": {"accelerator": "cpu", "devices_per_node": 2, "gres": "gpu:l40s:2", "partition": "gpu-l40s",
               "cpus_per_task": 2, "mem_mb": 2000, "runtime": 10},
}  # fmt: skip


def config(small_config, hardware=HARDWARE):
    return small_config | {"hardware": hardware, "baseline": next(iter(hardware)), "seeds": [0]}


@pytest.mark.parametrize("text, seconds, note", [
    (ANSWER.format("2026-01-01T12:00:00"), 0.0, "starts now"),
    (ANSWER.format("2026-01-01T18:00:00"), 6 * 3600, "SLURM's backfill estimate: starts 2026-01-01T18:00:00"),
    (ANSWER.format("2026-03-01T12:00:00"), 59 * 86400,
     "starts 2026-03-01T12:00:00 at the earliest: too far out for the estimate to mean much"),
    (ANSWER.format("Unknown"), None, "SLURM gives no start time (Unknown)"),
    ("allocation failure: Requested node configuration is not available\n", None,
     "SLURM will not place it: allocation failure: Requested node configuration is not available"),
])  # fmt: skip
def test_sbatch_test_only_answers_read_as_a_wait(text, seconds, note):
    got = queue.parse(text, NOW)
    assert (got.seconds, got.note) == (seconds, note)


def fake_sbatch(folder: Path, answer: str, rc: int = 0) -> Path:
    """A `sbatch` first on PATH that writes its arguments (one a line) to args.txt and `answer` to stderr."""
    bin_dir = folder / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "answer.txt").write_text(answer)
    script = bin_dir / "sbatch"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{folder}/args.txt'\ncat '{bin_dir}/answer.txt' >&2\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_the_queue_is_asked_for_the_train_job_s_shape_as_an_argument_vector(tmp_path, monkeypatch, small_config):
    fake_sinfo(monkeypatch, tmp_path)
    fake_sbatch(tmp_path, ANSWER.format("2026-01-01T14:00:00"))
    hw = resolve(config(small_config)).hardware["h100x2"]
    got = queue.wait(hw, 10, now=NOW)
    assert got.seconds == 2 * 3600 and got.partition == "gpu-l40s"
    args = (tmp_path / "args.txt").read_text().splitlines()
    assert args[0] == "--test-only" and "--partition=gpu-h100" in args and "--gres=gpu:h100:2" in args
    assert {"--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--mem=2000", "--time=10", "--wrap=true"} <= set(args)


def test_a_missing_or_failing_sbatch_is_a_note_not_an_error(tmp_path, monkeypatch, small_config):
    hw = resolve(config(small_config)).hardware["h100x2"]
    system = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path))
    assert queue.wait(hw, 10).note == "no SLURM client here (sbatch not on PATH)"
    failing = fake_sbatch(tmp_path, "sbatch: error: Invalid partition name specified\n", rc=1)
    monkeypatch.setenv("PATH", f"{failing}{os.pathsep}{system}")
    got = queue.wait(hw, 10)
    assert got.seconds is None and got.note == "SLURM will not place it: Invalid partition name specified"


def waiter(waits: dict):
    """A queue that answers by partition: seconds to wait (None: will not place)."""
    def ask(hardware, minutes):
        seconds = waits.get(hardware.partition, 0.0)
        return queue.Wait(seconds, "starts now" if not seconds else "SLURM's backfill estimate: later")
    return ask


def test_a_long_queue_moves_the_faster_hardware_down_and_the_advice_names_the_wait(tmp_path, small_config):
    """h100x2 runs each step 2x faster (measured), but waits 6 h: l40sx2 starts now and finishes first."""
    cfg = config(small_config)
    matrix = resolve(cfg)
    write_run(tmp_path, matrix.spec("tiny", "default", "h100x2", 0), 0.5)
    write_run(tmp_path, matrix.spec("tiny", "default", "l40sx2", 0), 1.0)
    nodes = slurm.parse_sinfo(CLUSTER)
    free = recommend.outcomes(cfg, nodes, ("tiny", "default"), tmp_path, waiter=waiter({}))
    mine = [o.option.name for o in free if o.option.entry is None]
    assert mine == ["h100x2", "l40sx2"] and free[0].step.basis.startswith(("measured", "scaled"))
    busy = recommend.outcomes(cfg, nodes, ("tiny", "default"), tmp_path, waiter=waiter({"gpu-h100": 6 * 3600}))
    assert [o.option.name for o in busy if o.option.entry is None] == ["l40sx2", "h100x2"]
    assert all(o.option.hardware.partition != "gpu-h100" for o in busy[:2])  # every H100 option waits
    text = "\n".join(recommend.lines(busy, ("tiny", "default"), NOW))
    assert "waits ~6.0 h in the queue" in recommend.advice(busy) and "finishes first" in recommend.advice(busy)
    assert "measured here: 1 run(s)" in text and "~6.0 h" in text
    # the cluster's entries to paste: valid hardware entries of the config, with a runtime for the queue
    pasted = yaml.safe_load("\n".join(text.split("the cluster offers):\n")[1].splitlines()))
    assert pasted and all(entry["runtime"] >= 10 for entry in pasted.values())
    resolve(cfg | {"hardware": pasted, "baseline": next(iter(pasted))})
    # a recorded prediction per option, read back
    predictions.append(recommend.records(busy, NOW), tmp_path / "p.csv")
    rows = predictions.read(tmp_path / "p.csv")
    assert [r["hardware"] for r in rows] == [o.option.name for o in busy] and rows[0]["rank"] == "1"
    h100 = next(r for r in rows if r["hardware"] == "h100x2")
    assert h100["basis"] == "measured here" and float(h100["wait_seconds"]) == 6 * 3600


def test_an_option_slurm_will_not_place_ranks_last_with_its_reason(tmp_path, small_config):
    cfg = config(small_config)
    no = {"gpu-l40s": None}
    ranked = recommend.outcomes(cfg, slurm.parse_sinfo(CLUSTER), None, tmp_path, waiter=waiter(no))
    assert ranked[-1].option.hardware.partition == "gpu-l40s" and ranked[-1].to_result is None
    text = "\n".join(recommend.lines(ranked, ("tiny", "default"), NOW))
    assert "no start" in text and f"  {ranked[-1].option.name}: {ranked[-1].wait.note}" in text


def test_the_cli_ranks_and_records(tmp_path, monkeypatch, small_config):
    env = fake_sinfo(monkeypatch, tmp_path)
    env["PATH"] = f"{fake_sbatch(tmp_path, ANSWER.format('2000-01-01T00:00:00'))}{os.pathsep}{env['PATH']}"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config(small_config)))
    proc = subprocess.run([sys.executable, "-m", "hwsweep.cli", "recommend", "--configfile", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("one run of tiny[default] (60 steps) per option, soonest result first")
    assert "advice: " in proc.stdout and "catalog only" in proc.stdout
    assert len(predictions.read(tmp_path / "results/predictions.csv")) == proc.stdout.count("catalog only")
    bad = subprocess.run([sys.executable, "-m", "hwsweep.cli", "recommend", "--configfile", str(path), "--suite", "x"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.startswith("hwsweep config error: no cell x[*]")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_held_gpus_move_a_partition_down_the_ranking_on_the_real_cluster(tmp_path, small_config):
    sys.path.insert(0, str(REPO / "tests" / "slurm"))
    import cluster

    if os.geteuid() != 0 and not cluster.shutil.which("slurmctld"):
        pytest.skip("needs root (to install and start SLURM) or an installed SLURM")
    site = cluster.Cluster(cluster.ROOT.with_name(f"{cluster.ROOT.name}-recommend"), cluster.PORT + 100)
    env = site.up()
    try:
        os.environ["SLURM_CONF"] = env["SLURM_CONF"]
        cfg, cell = config(small_config), ("tiny", "default")
        before = recommend.outcomes(cfg, slurm.read_nodes(), cell, tmp_path)
        assert all(o.wait.known and o.wait.seconds < 60 for o in before), [o.wait for o in before]
        assert [o.option.name for o in before if o.option.entry is None] == ["h100x2", "l40sx2"]  # a tie: by name
        for node in ("h100-1", "h100-2"):
            site.hold_gpus(node)
        after = recommend.outcomes(cfg, slurm.read_nodes(), cell, tmp_path)
        assert [o.option.name for o in after if o.option.entry is None] == ["l40sx2", "h100x2"]
        h100 = next(o for o in after if o.option.name == "h100x2")
        assert h100.wait.seconds > 3600 and "SLURM's backfill estimate" in h100.wait.note  # the held jobs' 2 h limit
        assert after[0].option.hardware.partition == "gpu-l40s"
        text = "\n".join(recommend.lines(after, cell, datetime.now()))
        assert "waits ~" in recommend.advice(after) and f"h100x2: {h100.wait.note}" in text
    finally:
        os.environ.pop("SLURM_CONF", None)
        if site.controller_up():
            subprocess.run(["scancel", "--user", "root"], env=env, check=False, timeout=30)
        site.down()
