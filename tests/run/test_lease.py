"""One live writer per run folder (hwsweep.contracts.lease, hwsweep.analysis.holders, hwsweep.run.preempt): a
run's lease names its holder, whoever finds it asks whether that holder still lives (a SLURM job's state, a
process of this machine by pid and start time, another machine's heartbeat), a second writer is refused in one
line, a dead holder's lease is taken over, and every attempt's log survives attempts that end in any order."""

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from conftest import SMALL

from hwsweep.analysis import holders, status
from hwsweep.contracts import lease
from hwsweep.contracts.host import process_start
from hwsweep.contracts.scheduler import NoCluster, SchedulerError
from hwsweep.plan.config import resolve
from hwsweep.run import preempt


def _state(answer):
    """A stand-in for scheduler.job_state: a state, or SchedulerError with the given words."""

    def ask(job):
        if isinstance(answer, Exception):
            raise answer
        return answer

    return ask


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def _lease_of(proc, run_dir, **changes):
    held = replace(lease.this_process(1, env={}), pid=proc.pid, start=process_start(proc.pid), **changes)
    (run_dir / lease.LEASE_FILE).write_text(json.dumps(held.__dict__))
    return held


def test_a_process_of_this_machine_holds_while_it_lives_and_not_a_pid_used_again(tmp_path, sleeper):
    held = _lease_of(sleeper, tmp_path)
    assert lease.holder(lease.read(tmp_path), tmp_path) == f"pid {sleeper.pid} on this machine"
    assert lease.holder(replace(held, start=held.start - 1), tmp_path) is None  # the pid names another process now
    sleeper.kill()
    sleeper.wait()
    assert lease.holder(held, tmp_path) is None


def test_a_slurm_job_holds_while_slurm_has_it_waiting_or_running(tmp_path):
    held = replace(lease.this_process(1, env={"SLURM_JOB_ID": "42"}), host="node7")
    for state in ("RUNNING", "PENDING", "REQUEUED", "PREEMPTED", "SUSPENDED", "COMPLETING"):
        assert lease.holder(held, tmp_path, _state(state)) == f"SLURM job 42 ({state})"
    for state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
        assert lease.holder(held, tmp_path, _state(state)) is None
    forgotten = SchedulerError("scontrol failed: slurm_load_jobs error: Invalid job id specified")
    assert lease.holder(held, tmp_path, _state(forgotten)) is None
    # A controller that does not answer: taken as alive, and said so (two writers are worse than a wait).
    silent = SchedulerError("no answer from the SLURM controller within 4 s (scontrol)")
    assert "SLURM cannot be asked: no answer" in lease.holder(held, tmp_path, _state(silent))
    # No SLURM here at all (the sweep copied off its cluster): the lease's heartbeat in this folder decides.
    (tmp_path / lease.LEASE_FILE).write_text("{}")
    elsewhere = _state(NoCluster("no SLURM client: scontrol is not on PATH; run this on a cluster login node"))
    assert lease.holder(held, tmp_path, elsewhere).startswith("SLURM job 42 (alive ")
    old = time.time() - lease.DEAD_AFTER_S - 1
    os.utime(tmp_path / lease.LEASE_FILE, (old, old))
    assert lease.holder(held, tmp_path, elsewhere) is None


def test_another_machines_process_holds_while_its_heartbeat_is_fresh(tmp_path):
    held = replace(lease.this_process(1, env={}), host="elsewhere", pid=123)
    (tmp_path / lease.LEASE_FILE).write_text(json.dumps(held.__dict__))
    assert lease.holder(held, tmp_path).startswith("pid 123 on elsewhere (alive ")
    old = time.time() - lease.DEAD_AFTER_S - 1
    os.utime(tmp_path / lease.LEASE_FILE, (old, old))
    assert lease.holder(held, tmp_path) is None


def test_a_second_writer_is_refused_a_dead_holders_lease_taken_over_and_the_own_job_continues(tmp_path, sleeper):
    _lease_of(sleeper, tmp_path)
    with pytest.raises(lease.Held, match=rf"being trained by pid {sleeper.pid} on this machine .*kill {sleeper.pid}"):
        lease.acquire(tmp_path, 1, env={})
    sleeper.kill()
    sleeper.wait()
    mine = lease.acquire(tmp_path, 2, env={})  # its holder died (kill -9 leaves the lease behind)
    assert lease.read(tmp_path) == mine and mine.pid == os.getpid()
    lease.release(tmp_path, mine)
    assert lease.read(tmp_path) is None
    # An attempt of the same SLURM job (requeued after a preemption) takes its job's lease over, whatever it says.
    job = {"SLURM_JOB_ID": "77"}
    first = lease.acquire(tmp_path, 1, env=job, job_state=_state("RUNNING"))
    again = lease.acquire(tmp_path, 2, env=job, job_state=_state("RUNNING"))
    assert first.job == again.job == "77" and lease.read(tmp_path) == again
    with pytest.raises(lease.Held, match="SLURM job 77 .RUNNING.*scancel 77"):
        lease.acquire(tmp_path, 1, env={"SLURM_JOB_ID": "78"}, job_state=_state("RUNNING"))


def test_a_lease_is_renewed_while_held_and_given_back_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "HEARTBEAT_S", 0.05)
    with lease.held(tmp_path, 1, env={}):
        os.utime(tmp_path / lease.LEASE_FILE, (1000, 1000))
        time.sleep(0.5)
        assert time.time() - (tmp_path / lease.LEASE_FILE).stat().st_mtime < 5
    assert not (tmp_path / lease.LEASE_FILE).exists()


def test_the_train_wrapper_refuses_a_second_writer_in_one_line_and_starts_nothing(tmp_path, sleeper, monkeypatch,
                                                                                  capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "results/run/spec.json"
    spec.parent.mkdir(parents=True)
    spec.write_text(json.dumps(resolve(json.loads(json.dumps(SMALL))).spec("tiny", "default", "cpu1", 0).to_dict()))
    _lease_of(sleeper, spec.parent)
    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    code = preempt.run_attempt(str(spec), tmp_path / "logs/train.log", command, env=env)
    assert code == preempt.EXIT_HELD and not marker.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pid {sleeper.pid}" in err[0] and "does not start a second writer" in err[0]
    assert not (tmp_path / "logs/train.log").exists()  # the live writer's log is not touched either


def test_every_attempts_log_is_kept_whatever_order_attempts_end_in(tmp_path):
    log = tmp_path / "train.log"
    first = preempt.AttemptLog(preempt.attempt_log(log, preempt._begin(log, "abc", None)), log)
    second = preempt.AttemptLog(preempt.attempt_log(log, preempt._begin(log, "abc", None)), log)
    assert (first.own.name, second.own.name) == ("train.1.log", "train.2.log")
    first.say("the first attempt's last words")  # ends after the second began: train.log stays the second's
    second.say("the second attempt's words")
    first.say("the first attempt, later still")
    assert "later still" in first.own.read_text() and "second attempt" not in first.own.read_text()
    assert "first attempt" not in second.own.read_text() and os.path.samefile(log, second.own)
    # An attempt number is claimed once, even where a file without a marker holds it.
    (tmp_path / "train.3.log").write_text("not an attempt log")
    assert preempt._begin(log, "abc", None) == 4 and (tmp_path / "train.3.log").read_text() == "not an attempt log"


def test_live_writers_names_each_run_with_its_writer_and_the_fix(tmp_path, sleeper, monkeypatch):
    monkeypatch.chdir(tmp_path)
    matrix = resolve(json.loads(json.dumps(SMALL)))
    specs = [matrix.spec(r.suite, r.variant, r.hardware, r.seed) for r in matrix.runs()]
    assert holders.live_writers(specs) == []
    busy = tmp_path / specs[1].run_dir
    busy.mkdir(parents=True)
    _lease_of(sleeper, busy, snakemake=f"{socket.gethostname()}:999999:1")
    (line,) = holders.live_writers(specs)
    assert line.startswith(f"{specs[1].run_dir} is still being trained by pid {sleeper.pid} on this machine")
    assert f"kill {sleeper.pid}" in line
    # status: the run's snakemake is gone (pid 999999 never ran), so nothing waits for it.
    assert status.unwaited(specs[1]).startswith("no snakemake waits for it")
    _lease_of(sleeper, busy, snakemake=lease.snakemake_mark())  # this process stands for a live snakemake
    assert status.unwaited(specs[1]) == ""
    _lease_of(sleeper, busy, snakemake="login2:55:1")  # a snakemake on another machine: not known here
    assert status.unwaited(specs[1]) == "" and status.unwaited(specs[0]) == ""  # no lease: nothing known
