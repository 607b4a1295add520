"""A checkpointed stop, from the workers to the scheduler (hwsweep.run.preempt, hwsweep.run.launch): each attempt
of a train job in one log, the requeue of a SLURM job that stopped after a newer checkpoint, and a stop signal
that reaches every worker exactly once, whether the launcher passes it on or SLURM gives it to every process."""

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BIN, SMALL

from hwsweep.contracts import failure, io
from hwsweep.plan.config import resolve
from hwsweep.run import preempt, runner, stops


def spec_file(tmp_path: Path, seed: int = 0, resume_when: str | None = None) -> Path:
    """A run's spec.json in results/run/ (its checkpoints beside it); `resume_when`: a command's resume file."""
    spec = resolve(copy.deepcopy(SMALL)).spec("tiny", "default", "cpu1", seed).to_dict()
    spec["trainer"]["resume_when"] = resume_when
    path = tmp_path / "results/run/spec.json"
    io.write_json(path, spec)
    return path


def attempt_command(code: int, checkpoint: int | None = None, say: str = "training") -> list[str]:
    """A stand-in for one attempt: prints, writes checkpoint step<N>.pt beside spec.json's folder, exits `code`."""
    write = (f"import pathlib; p = pathlib.Path('results/run/checkpoints'); p.mkdir(exist_ok=True); "
             f"(p / 'step{checkpoint:09d}.pt').write_text('x'); ") if checkpoint is not None else ""  # fmt: skip
    return [sys.executable, "-c", f"{write}print({say!r}); raise SystemExit({code})"]


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """A stand-in scontrol on PATH that records its arguments: `show job` says $SCONTROL_STATE (RUNNING), `requeue`
    exits $SCONTROL_CODE (0)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol.calls"
    refusal = "echo 'Requested operation is presently disabled' >&2"
    code = "${SCONTROL_CODE:-0}"
    show = 'if [ "$1" = show ]; then echo "JobId=$4 JobState=${SCONTROL_STATE:-RUNNING}"; exit 0; fi'
    script = f"#!/bin/sh\necho \"$@\" >> '{calls}'\n{show}\n[ \"{code}\" = 0 ] || {refusal}\nexit {code}\n"
    (bin_dir / "scontrol").write_text(script)
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    return calls


def test_each_attempt_keeps_its_own_log_and_train_log_is_the_newest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec, log = spec_file(tmp_path), tmp_path / "logs/train.log"
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}

    def attempt(code: int, say: str) -> int:
        log.unlink(missing_ok=True)  # as snakemake does before each job
        return preempt.run_attempt(str(spec), log, attempt_command(code, say=say), env)

    assert attempt(3, "first: it broke") == 3 and attempt(0, "second: fine") == 0
    first, second = (preempt.attempt_log(log, n).read_text() for n in (1, 2))  # train.1.log, train.2.log
    assert "first: it broke" in first and "second: fine" in second and "first" not in second
    assert log.read_text() == second and first.startswith("==== hwsweep: attempt 1 (host ")
    assert [a for a, _, _ in preempt.attempts(log)] == [1, 2]
    attempt(1, "cannot open the dataset")
    assert failure.log_reason(log) == "cannot open the dataset"  # the newest attempt's reason

    spec = spec_file(tmp_path, seed=1)  # another config's run: the old run's attempts go, numbering starts over
    attempt(0, "new spec")
    assert [a for a, _, _ in preempt.attempts(log)] == [1] and "new spec" in log.read_text()
    assert not preempt.attempt_log(log, 2).exists()


def test_a_failed_attempt_says_its_one_line_on_stderr_for_snakemakes_console(tmp_path, monkeypatch, capfd):
    """The job's output goes to its log; the cause (escapes stripped) also goes to stderr, which snakemake shows."""
    monkeypatch.chdir(tmp_path)
    spec, log = spec_file(tmp_path), tmp_path / "logs/train.log"
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    message = "\\x1b[31mbatch of 7, expected 8\\x1b[0m"
    raises = [sys.executable, "-c", f"print('step 1: loss 0.5'); raise ValueError('{message}')"]
    assert preempt.run_attempt(str(spec), log, raises, env) == 1
    err = capfd.readouterr().err
    assert err.splitlines() == [f"hwsweep: {spec.parent}: train failed (exit 1): ValueError: batch of 7, expected 8 "
                                f"(log: {preempt.attempt_log(log, 1)})"]  # fmt: skip
    assert "\x1b" in log.read_text()  # the log keeps what the script printed
    assert preempt.run_attempt(str(spec), log, attempt_command(0), env) == 0
    assert capfd.readouterr().err == ""  # a run that trains says nothing there


def test_a_stop_in_a_slurm_job_requeues_it_and_without_progress_only_so_many_times_in_a_row(tmp_path, scontrol,
                                                                                           monkeypatch):  # fmt: skip
    monkeypatch.setattr(preempt, "MAX_IDLE_REQUEUES", 2)
    spec, log = spec_file(tmp_path), tmp_path / "logs/train.log"
    env = os.environ | {"SLURM_JOB_ID": "4242"}
    # Progress (a checkpoint newer than any before): requeued in place, then it waits for SLURM to end it.
    code = preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=20), env, wait_for_end=0.1)
    assert scontrol.read_text().splitlines() == ["show job -o 4242", "requeue 4242"]
    assert code == 75  # SLURM did not end this attempt (the stand-in requeues nothing): the exit says so
    text = log.read_text()
    assert "attempt 1 (SLURM job 4242, host " in text and "requeueing SLURM job 4242" in text
    assert "SLURM did not end the requeued job" in text and preempt.IDLE_REQUEUE not in text

    # No newer checkpoint (a stop during start-up): requeued all the same, MAX_IDLE_REQUEUES times in a row.
    for n in (1, 2):
        scontrol.unlink()
        assert preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=20), env, wait_for_end=0.1) == 75
        assert scontrol.read_text().splitlines()[-1] == "requeue 4242"
        said = log.read_text()
        assert f"stopped without a newer checkpoint ({n} in a row, at most 2): it resumes from step 20" in said
        assert preempt.IDLE_REQUEUE in said
    scontrol.unlink()
    assert preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=20), env, wait_for_end=0.1) == 75
    assert not scontrol.exists()  # not even asked
    assert "not requeued: the 2 attempts before this one were requeued without one (at most 2 in a row)" in log.read_text()
    assert preempt.attempts(log)[-1] == (4, "4242", preempt.attempts(log)[0][2])
    # Progress again ends the streak.
    assert preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=30), env, wait_for_end=0.1) == 75
    assert preempt.idle_streak(log, 6) == 0

    # Any other exit is the job's; outside SLURM 75 is too.
    scontrol.unlink()
    assert preempt.run_attempt(str(spec), log, attempt_command(1, checkpoint=40), env) == 1
    bare = {k: v for k, v in env.items() if k != "SLURM_JOB_ID"}
    assert preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=50), bare) == 75
    assert not scontrol.exists()


def test_a_signalled_attempt_that_ends_otherwise_is_a_stop_and_a_stop_before_it_starts_starts_nothing(
        tmp_path, monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    spec, log = spec_file(tmp_path), tmp_path / "logs/train.log"
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    monkeypatch.setattr(stops, "received", [])
    # The wrapper is signalled while its command runs, and the command dies of the same signal (exit 143).
    dies = [sys.executable, "-c", f"import os, signal; os.kill(os.getppid(), signal.SIGTERM); "
                                  f"import time; time.sleep(0.5); os.kill(os.getpid(), signal.SIGTERM)"]  # fmt: skip
    assert preempt.run_attempt(str(spec), log, dies, env) == 75
    assert "stopped by SIGTERM; the attempt ended with exit -15: a stop, exit 75" in log.read_text()
    assert signal.getsignal(signal.SIGTERM) is not stops._note  # the caller's handlers are back
    # Signalled before the command starts: nothing is started (one attempt per wrapper process: its signals so far).
    stops.received[:] = [signal.SIGHUP]
    started = tmp_path / "started"
    assert preempt.run_attempt(str(spec), log, [sys.executable, "-c", f"open({str(started)!r}, 'w')"], env) == 75
    assert not started.exists() and "stopped by SIGHUP before the attempt started" in log.read_text()
    # Finished all the same: not a stop.
    stops.received.clear()
    finishes = [sys.executable, "-c", "import os, signal; os.kill(os.getppid(), signal.SIGINT)"]
    assert preempt.run_attempt(str(spec), log, finishes, env) == 0


def test_a_commands_own_resume_file_counts_as_progress(tmp_path, scontrol):
    spec, log = spec_file(tmp_path, resume_when="ckpt.pt"), tmp_path / "logs/train.log"
    writes = [sys.executable, "-c", "open('results/run/ckpt.pt', 'w').write('x'); raise SystemExit(75)"]
    code = preempt.run_attempt(str(spec), log, writes, os.environ | {"SLURM_JOB_ID": "9"}, wait_for_end=0.1)
    assert code == 75 and scontrol.read_text().splitlines()[-1] == "requeue 9"
    assert "stopped after its resume file; requeueing SLURM job 9" in log.read_text()


def test_a_cancelled_job_stays_cancelled(tmp_path, scontrol, monkeypatch):
    """`scancel` sends SIGTERM to the whole job: the trainer checkpoints and exits 75 as for a preemption, but the
    job is CANCELLED, and a requeue would undo the user's cancel."""
    monkeypatch.setenv("SCONTROL_STATE", "CANCELLED")
    spec, log = spec_file(tmp_path), tmp_path / "logs/train.log"
    code = preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=5), os.environ | {"SLURM_JOB_ID": "8"},
                                 wait_for_end=0.1)
    assert code == 75 and scontrol.read_text().splitlines() == ["show job -o 8"]
    assert "SLURM job 8 is CANCELLED: not requeued" in log.read_text()


def test_a_refused_requeue_leaves_exit_75_and_says_why(tmp_path, scontrol, monkeypatch):
    monkeypatch.setenv("SCONTROL_CODE", "1")
    spec, log = spec_file(tmp_path), tmp_path / "logs/train.log"
    code = preempt.run_attempt(str(spec), log, attempt_command(75, checkpoint=5), os.environ | {"SLURM_JOB_ID": "7"})
    assert code == 75 and "scontrol requeue 7 refused: Requested operation is presently disabled" in log.read_text()


def test_the_launcher_exits_75_only_when_every_rank_stopped_after_its_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv(preempt.STOPPED_DIR, str(tmp_path))
    for rank in (0, 1):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        assert preempt.stopped_exit(40) == 0  # the worker exits 0: torchrun's agent reports no failure
        assert preempt.stopped_step(str(tmp_path), 3) is None  # rank 2 has not said so
    assert preempt.stopped_step(str(tmp_path), 2) == 40
    monkeypatch.delenv(preempt.STOPPED_DIR)
    assert preempt.stopped_exit(40) == preempt.EXIT_PREEMPTED  # torchrun by hand: the worker's own exit


def test_newest_checkpoint_reads_files_and_sharded_folders(tmp_path):
    folder = tmp_path / "checkpoints"
    assert preempt.newest_checkpoint(tmp_path) == -1
    folder.mkdir()
    (folder / "step000000090.pt").write_text("x")
    (folder / "step100").mkdir()  # a sharded checkpoint's folder, not zero-padded
    (folder / ".step200.tmp").write_text("x")  # a checkpoint being written
    assert preempt.newest_checkpoint(tmp_path) == 100


def test_progress_bars_and_torchruns_summary_are_never_a_reason():
    lines = ["train:  79%|███████▉ | 473/600 [00:10<00:02, 45.20it/s, loss=0.1]",
             "Failures:", "  <NO_OTHER_FAILURES>",
             "hwsweep: stop requested; checkpoint at step 470, exiting 75 (signals received: SIGTERM)",
             "train:  80%|████████ | 480/600 [00:10<00:02]"]  # fmt: skip
    assert failure.reason(lines).startswith("hwsweep: stop requested; checkpoint at step 470")
    assert failure.reason(["train:  79%|███████▉ | 473/"]) is None


def _launcher_spec(tmp_path, small_config) -> Path:
    small_config["recipe"] |= {"checkpoint_every": 10}
    small_config["recipe"]["schedule"] = {"steps": 100000, "warmup_steps": 5}
    spec = resolve(small_config).spec("tiny", "default", "cpu2", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    io.write_json(tmp_path / "spec.json", spec)
    return tmp_path / "spec.json"


@pytest.mark.slow
@pytest.mark.parametrize("in_slurm_step", [False, True])
def test_a_stop_signal_reaches_each_worker_once_and_the_launcher_exits_75_within_seconds(tmp_path, small_config,
                                                                                        in_slurm_step):  # fmt: skip
    """Locally the launcher passes SIGTERM to the workers; in a SLURM job step SLURM signals every process of
    the step (launcher, torchrun's agent, workers) at once and the launcher passes nothing on. Either way each
    worker gets it once, torchrun's agent neither stops on it nor reports a failure, and the job's exit is 75."""
    spec = _launcher_spec(tmp_path, small_config)
    env = os.environ | ({"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "1"} if in_slurm_step else {})
    cmd = [str(BIN / "python"), "-m", "hwsweep.run.launch", str(spec), "--threads", "2"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            process_group=0)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not list((tmp_path / "run/checkpoints").glob("step*.pt")) and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = runner.descendants(runner.descendants(proc.pid, depth=1)[0], depth=1)
        assert len(workers) == 2, workers
        start = time.monotonic()
        for pid in [proc.pid] + runner.descendants(proc.pid) if in_slurm_step else [proc.pid]:
            os.kill(pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        seconds = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == preempt.EXIT_PREEMPTED, out[-3000:]
    assert "(signals received: SIGTERM)" in out, out[-3000:]  # once, not "SIGTERM, SIGTERM"
    said = "SLURM gave it to every process of the job step" if in_slurm_step else "SIGTERM: passed to the 2 worker(s)"
    assert said in out and "every worker stopped after the checkpoint at step" in out, out[-3000:]
    assert "SignalException" not in out and "ChildFailedError" not in out, out[-3000:]  # the agent just ended
    assert seconds < 30, (seconds, out[-3000:])  # torchrun's own stop took 30-60 s more
