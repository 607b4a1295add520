"""`hwsweep stop RUN`: the run's mark (who, when), its SLURM train job cancelled, every later attempt refused at once
with a code that is not 75, `status` saying so, and `--undo`; names checked against the config. SLURM is given here
as squeue's records and a stand-in scancel; tests/cluster/test_slurm.py stops a run on the real cluster."""

import os
import subprocess
import sys

import pytest
from conftest import BIN, write_config

from hwsweep import cli
from hwsweep.analysis.holders import Scheduler
from hwsweep.analysis.status import write_status
from hwsweep.contracts import io, scheduler, stopped
from hwsweep.plan.config import resolve
from hwsweep.run import preempt

RUN = "tiny/default/cpu1/seed1"


@pytest.fixture
def sweep(tmp_path, monkeypatch, small_config):
    """A sweep folder with the config, the run's spec.json, a stand-in scancel recording its arguments, and squeue
    saying the run's train job 555 runs."""
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path, small_config)
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 1)
    io.write_json(spec.path("spec.json"), spec.to_dict())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scancel").write_text(f"#!/bin/sh\necho \"$@\" >> '{tmp_path / 'scancel.calls'}'\n")
    (bin_dir / "scancel").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    job = scheduler.Job(id="555", state="RUNNING", comment=scheduler.job_comment("train", spec), workdir=str(tmp_path))
    other = scheduler.Job(id="556", state="RUNNING", comment=scheduler.job_comment("train", resolve(small_config).spec(
        "tiny", "default", "cpu1", 0)), workdir=str(tmp_path))  # fmt: skip
    # its group job under SLURM (train and evaluate in one allocation: workflow/rules/allocation.smk), requeued
    group = scheduler.Job(id="554", state="PENDING", comment="rule_run_tiny_default_cpu1_seed1_evaluate_train",
                          workdir=str(tmp_path))  # fmt: skip
    monkeypatch.setattr(scheduler, "my_jobs", lambda timeout=0: [job, other, group])
    return config, spec, tmp_path / "scancel.calls", resolve(small_config)


def test_a_stopped_run_is_cancelled_refuses_every_attempt_and_status_says_who_stopped_it(sweep, capsys):
    config, spec, calls, matrix = sweep
    assert cli.run(["stop", RUN, "--configfile", str(config)]) == 0
    assert calls.read_text().split() == ["555", "554"]  # its own jobs, not seed 0's
    mark = stopped.read(spec.run_dir)
    assert mark.run == RUN and mark.cancelled == ("555", "554") and "@" in mark.who and mark.when
    assert "cancelled SLURM job" in capsys.readouterr().out

    started = spec.run_dir + "/started"
    command = [sys.executable, "-c", f"open({started!r}, 'w')"]
    log = spec.log_path("train.log")
    for _ in range(2):  # the attempt snakemake retries refuses as fast
        assert preempt.run_attempt(spec.path("spec.json"), log, command, {"SLURM_JOB_ID": "557"}) == stopped.EXIT_STOPPED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith(f"hwsweep: run {RUN} is stopped for good (hwsweep stop by ")
    assert f"hwsweep stop --undo {RUN}" in err[0] and stopped.EXIT_STOPPED != preempt.EXIT_PREEMPTED
    assert not os.path.exists(started) and not preempt.attempts(log)  # nothing started, no attempt counted

    rows = write_status(matrix, scheduler=Scheduler(ask=lambda: [], accounted=lambda ids: []))
    rows = rows[rows.hardware == "cpu1"].set_index("seed")
    assert rows.loc[1, "state"] == "stopped" and rows.loc[0, "state"] != "stopped"
    assert rows.loc[1, "problem"].startswith(f"hwsweep stop by {mark.who} at {mark.when}; `hwsweep stop --undo")

    assert cli.run(["stop", RUN, "--configfile", str(config)]) == 0 and "already stopped" in capsys.readouterr().out
    assert cli.run(["stop", "--undo", RUN, "--configfile", str(config)]) == 0
    assert stopped.read(spec.run_dir) is None and "may run again" in capsys.readouterr().out
    assert preempt.run_attempt(spec.path("spec.json"), log, command, {}) == 0 and os.path.exists(started)


def test_names_that_are_no_run_of_the_config_are_refused_and_nothing_is_stopped(sweep, capsys):
    config, spec, calls, _ = sweep
    for bad in ("tiny/default/cpu1/seed9", "tiny/default/cpu1", "nosuch/default/cpu1/seed1", "../x"):
        assert cli.run(["stop", RUN, bad, "--configfile", str(config)]) == 2
        assert f"not a run of {config}: {bad} (a run is named SUITE/VARIANT/HARDWARE/seedN" in capsys.readouterr().err
    assert stopped.read(spec.run_dir) is None and not calls.exists()


def test_the_command_line_has_stop():
    out = subprocess.run([str(BIN / "hwsweep"), "stop", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--undo" in out.stdout, out.stderr
