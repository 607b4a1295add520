"""A sweep outlives its snakemake and its folder (issue 64): a finished sweep copied into a fresh clone (its files
all new, in any order, with or without .snakemake/) runs no train or evaluate job and keeps its records byte for
byte; a changed suite is named stale in one line; runs made on two machines meet in one sweep and one report,
with the provenance of each; a run that a process no snakemake waits for still trains gets no second writer."""

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import BIN, REPO, snakemake, write_config

from hwsweep.contracts import lease

pytestmark = pytest.mark.slow

JOBS = re.compile(r"^(?:local)?rule (\w+):", re.M)


def records(folder: Path) -> dict[str, str]:
    """sha256 of every record and spec of every run of the sweep."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.glob("results/*/*/*/seed*/*.json"))}  # fmt: skip


def fresh_clone(finished: Path, root: Path, metadata: bool) -> Path:
    """A new checkout of the workflow at `root` (every file written now) with the finished sweep's results/ and
    logs/ copied in file by file, times not kept (the newest last: each run's spec.json, as a harvest that copies
    folders in name order leaves it), and its .snakemake/ or not."""
    root.mkdir(parents=True)
    for part in ("Snakefile", "workflow", "profiles"):
        (shutil.copytree if (REPO / part).is_dir() else shutil.copyfile)(REPO / part, root / part)
    shutil.copyfile(finished / "config.yaml", root / "config.yaml")
    for part in ("results", "logs") + ((".snakemake",) if metadata else ()):
        shutil.copytree(finished / part, root / part, copy_function=shutil.copyfile)
    time.sleep(0.05)
    for spec in root.glob("results/*/*/*/seed*/spec.json"):
        spec.touch()
    return root


def clone_snakemake(root: Path, *args: str, python: Path = BIN) -> subprocess.CompletedProcess:
    """snakemake as a user runs it in a clone: its own Snakefile, the config in the folder, no --directory."""
    cmd = [str(python / "snakemake"), "--configfile", "config.yaml", "--replace-workflow-config", "--cores", "2", *args]
    env = os.environ | {"PATH": f"{python}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.parametrize("metadata", [True, False], ids=["with .snakemake", "without .snakemake"])
def test_a_finished_sweep_in_a_fresh_clone_runs_no_train_or_evaluate_job_and_keeps_its_records(
        finished_two_suites, tmp_path, metadata):  # fmt: skip
    root = fresh_clone(finished_two_suites, tmp_path / "clone", metadata)
    logs = list(finished_two_suites.glob("logs/*/*/*/seed*/train.*.log"))
    assert logs and not [p for p in logs if "RuntimeWarning" in p.read_text()]  # forked workers warn of nothing
    before = records(root)
    assert len(before) == 4 * 4  # spec, tracking, train and eval of each of the 4 runs
    # Another interpreter's path (a venv elsewhere, another machine) changes the jobs' parameters, not the runs.
    other_python = tmp_path / "venv-elsewhere"
    other_python.symlink_to(BIN)
    dry = clone_snakemake(root, "-n", "all", python=other_python)
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = set(JOBS.findall(dry.stdout))
    assert not jobs & {"train", "evaluate"}, dry.stdout[-3000:]
    proc = clone_snakemake(root, "all", python=other_python)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not set(JOBS.findall(proc.stdout + proc.stderr)) & {"train", "evaluate"}
    assert records(root) == before
    assert not list(root.glob("logs/*/*/*/seed*/evaluate.log")) or all(
        p.read_bytes() == (finished_two_suites / p.relative_to(root)).read_bytes()
        for p in root.glob("logs/*/*/*/seed*/*.log"))  # fmt: skip


def test_a_changed_suite_is_named_stale_in_one_line_and_only_its_runs_are_retrained(finished_two_suites, tmp_path):
    root = fresh_clone(finished_two_suites, tmp_path / "clone", metadata=False)
    cfg = yaml.safe_load((root / "config.yaml").read_text())
    cfg["suites"]["other"]["overrides"]["optimizer"] = {"lr": 0.001}
    write_config(root, cfg)
    dry = clone_snakemake(root, "-n", "all")
    assert dry.returncode == 0, dry.stderr[-3000:]
    stale = [line for line in dry.stderr.splitlines() if "is stale" in line]
    assert len(stale) == 2 and all(line.startswith("hwsweep: results/other/") for line in stale), dry.stderr
    assert "recipe.optimizer.lr 0.003 -> 0.001" in stale[0] and "would move aside (train.json -> train.json.stale" in stale[0]
    trains = re.findall(r"rule train:.*?wildcards: suite=(\w+)", dry.stdout, flags=re.S)
    assert sorted(trains) == ["other", "other"], dry.stdout[-3000:]
    assert not list(root.glob("results/*/*/*/seed*/*.stale"))  # a dry run moves nothing


def _without(folder: Path, hardware: str) -> None:
    for part in ("results", "logs", "benchmarks"):
        for run in folder.glob(f"{part}/*/*/{hardware}"):
            shutil.rmtree(run)
    for table in folder.glob("results/*/*.csv"):
        table.unlink()


def _made_on(folder: Path, hardware: str, host: str, torch: str) -> None:
    """What another machine's records say of where they were made."""
    for path in folder.glob(f"results/*/*/{hardware}/seed*/train.json"):
        data = json.loads(path.read_text())
        data["provenance"] |= {"host": host, "torch": torch}
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def hwsweep(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hwsweep"), *args, "--configfile", "config.yaml"], cwd=root, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_runs_made_on_two_machines_meet_in_one_sweep_with_each_runs_provenance(finished_two_suites, tmp_path):
    here = fresh_clone(finished_two_suites, tmp_path / "here", metadata=True)
    there = fresh_clone(finished_two_suites, tmp_path / "gpu-box", metadata=False)
    _without(here, "cpu2")  # this machine made cpu1's runs, the other cpu2's
    _without(there, "cpu1")
    _made_on(there, "cpu2", "gpu-box", "2.13.0+cu129")
    theirs = records(there)

    proc = hwsweep(here, "import", str(there / "results"), "--dry-run")
    assert proc.returncode == 0 and not (here / "results/tiny/default/cpu2").exists(), proc.stderr
    proc = hwsweep(here, "import", str(there))
    assert proc.returncode == 0, proc.stderr
    imported = [line for line in proc.stdout.splitlines() if line.startswith("imported ")]
    assert len(imported) == 2 and all("host gpu-box" in line and "torch 2.13.0+cu129" in line for line in imported)
    assert "2 run(s) imported, 0 already here" in proc.stderr
    assert {k: v for k, v in records(here).items() if "/cpu2/" in k and "tracking" not in k} == {
        k: v for k, v in theirs.items() if "tracking" not in k}  # fmt: skip
    assert list(here.glob("logs/*/default/cpu2/seed0/train.*.log"))  # each attempt's log came along

    proc = clone_snakemake(here, "all")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not set(JOBS.findall(proc.stdout + proc.stderr)) & {"train", "evaluate"}
    runs = pd.read_csv(here / "results/tiny/runs.csv")
    assert dict(zip(runs.hardware, runs.host)) == {"cpu1": socket.gethostname(), "cpu2": "gpu-box"}
    assert dict(zip(runs.hardware, runs.torch))["cpu2"] == "2.13.0+cu129"
    report = clone_snakemake(here, "--report", "report.html")
    assert report.returncode == 0 and (here / "report.html").exists(), report.stderr[-3000:]

    # Importing again changes nothing; runs of another spec are refused in one line each, never imported.
    again = hwsweep(here, "import", str(there))
    assert again.returncode == 0 and "0 run(s) imported, 2 already here" in again.stderr
    for path in there.glob("results/*/*/*/seed*/train.json"):  # made with another learning rate
        data = json.loads(path.read_text())
        data["spec"]["recipe"]["optimizer"]["lr"] = data["plan"]["lr"] = 0.01
        path.write_text(json.dumps(data))
    shutil.rmtree(here / "results/tiny/default/cpu2")
    proc = hwsweep(here, "import", str(there))
    refused = sorted(line for line in proc.stderr.splitlines() if "made from another spec" in line)
    assert [line.split(": ")[1] for line in refused] == [f"{there}/results/{suite}/default/cpu2/seed0"
                                                          for suite in ("other", "tiny")], proc.stderr  # fmt: skip
    assert all("(recipe.optimizer.lr 0.01 -> 0.003)" in line and "not imported" in line for line in refused)
    assert proc.returncode == 1 and "nothing of" in proc.stderr
    assert not (here / "results/tiny/default/cpu2/seed0/train.json").exists()


def test_a_run_a_killed_snakemakes_trainer_still_writes_gets_no_second_writer(finished_two_suites, tmp_path):
    root = fresh_clone(finished_two_suites, tmp_path / "clone", metadata=True)
    run = root / "results/tiny/default/cpu2/seed0"
    for name in ("train.json", "eval.json"):  # its training was cut off: the next all would start it again
        (run / name).unlink()
    attempts = sorted(root.glob("logs/tiny/default/cpu2/seed0/train.*.log"))
    # A trainer left running by a snakemake that was killed: it holds the run's lease, its snakemake is gone.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from hwsweep.contracts import lease\n"
         "with lease.held(sys.argv[1], 1):\n    print('held', flush=True); time.sleep(300)", str(run)],
        env=os.environ | {lease.SNAKEMAKE_ENV: "vm:999999:1"}, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = clone_snakemake(root, "all")
        assert proc.returncode != 0
        lines = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep: ")]
        assert lines[0] == (f"hwsweep: results/tiny/default/cpu2/seed0 is still being trained by pid {holder.pid} "
                            "on this machine, which no snakemake waits for; wait for it to end (`snakemake status` "
                            f"shows it) or stop it (kill {holder.pid} on {lease.read(run).host})")  # fmt: skip
        assert "nothing was started" in lines[1]
        assert sorted(root.glob("logs/tiny/default/cpu2/seed0/train.*.log")) == attempts  # no attempt began
        assert not (run / "train.json").exists()
        status = clone_snakemake(root, "-f", "status")
        rows = pd.read_csv(root / "results/partial/status.csv").query("hardware == 'cpu2' and suite == 'tiny'")
        assert rows.state.iloc[0] == "running", status.stderr[-2000:]
        assert rows.problem.iloc[0].startswith("no snakemake waits for it"), rows.problem.iloc[0]
    finally:
        holder.kill()
        holder.wait()
    dry = clone_snakemake(root, "-n", "all")  # its holder is gone: the run is trained again, resuming
    assert dry.returncode == 0 and "train" in JOBS.findall(dry.stdout), dry.stdout[-3000:] + dry.stderr[-2000:]
