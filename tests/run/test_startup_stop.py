"""A stop signal at any phase of an attempt's start-up is a preemption (hwsweep.run.stops): a real launch of the
built-in trainer (one process, and torchrun with two forked workers, gloo), held at each phase by the test hook
and signalled there, exits 75 and leaves no checkpoint of its own; the next attempt resumes from the newest
checkpoint or starts over, and the run ends bitwise equal to one never stopped."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import BIN, one_thread

from hwsweep.contracts import io
from hwsweep.contracts.spec import CHECKPOINT_DIR, FINAL_CHECKPOINT, TRAIN_RECORD
from hwsweep.plan.config import resolve
from hwsweep.run import launch, preempt, stops


def _spec(tmp_path: Path, small_config, hardware: str, name: str) -> Path:
    small_config["recipe"] |= {"checkpoint_every": 10, "log_every": 5}
    small_config["recipe"]["schedule"] = {"steps": 40, "warmup_steps": 5}
    spec = resolve(small_config).spec("tiny", "default", hardware, 0).to_dict() | {"run_dir": str(tmp_path / name)}
    io.write_json(tmp_path / f"{name}.json", spec)
    return tmp_path / f"{name}.json"


def _attempt(spec: Path, hold: str | None = None, after_checkpoint: bool = False) -> tuple[int, str]:
    """One launch; `hold` PHASE[:RANK]: held there and SIGTERM'd (the launcher passes it on); `after_checkpoint`:
    SIGTERM'd once the loop wrote a newer checkpoint. (exit code, output)."""
    flag = spec.parent / "held"
    env = one_thread() | ({stops.HOLD_AT: f"{hold.split(':')[0]}:{flag}:{hold.split(':')[1]}" if ":" in hold
                          else f"{hold}:{flag}"} if hold else {})  # fmt: skip
    for old in spec.parent.glob("held.*"):
        old.unlink()
    ckpts = Path(io.read_json(spec)["run_dir"]) / CHECKPOINT_DIR
    before = preempt.newest_checkpoint(ckpts.parent)
    proc = subprocess.Popen([str(BIN / "python"), "-m", "hwsweep.run.launch", str(spec), "--threads", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while (hold or after_checkpoint) and time.monotonic() < deadline and proc.poll() is None:
            if hold and list(spec.parent.glob("held.*")):
                break
            if after_checkpoint and preempt.newest_checkpoint(ckpts.parent) > before:
                break
            time.sleep(0.05)
        if hold or after_checkpoint:
            os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out


def _result(spec: Path) -> tuple[dict, dict]:
    run_dir = Path(io.read_json(spec)["run_dir"])
    return io.read_json(run_dir / TRAIN_RECORD), torch.load(run_dir / FINAL_CHECKPOINT, weights_only=False)


# phase (PHASE or PHASE:RANK held), what the launcher or a worker says of it; each is one attempt of the same run.
ONE = [("launcher", "stopped by SIGTERM before the workers' checkpoint"), ("start", "(start, rank 0, SIGTERM)"),
       ("data", "(data, rank 0, SIGTERM)"), (None, "after the checkpoint"), ("resume", "(resume, rank 0"),
       ("loop", "(loop, rank 0")]  # fmt: skip
TWO = [("agent", "stopped by SIGTERM during start-up (start)"), ("rendezvous:1", "during start-up (rendezvous)"),
       ("process_group", "during start-up (process_group)"), (None, "after the checkpoint"),
       ("model", "during start-up (model)")]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("hardware, phases", [("cpu1", ONE), ("cpu2", TWO)], ids=["one-process", "torchrun-2"])
def test_a_stop_at_each_phase_of_start_up_exits_75_and_the_run_ends_bitwise_as_if_never_stopped(
        tmp_path, small_config, hardware, phases):  # fmt: skip
    stopped, whole = _spec(tmp_path, small_config, hardware, "stopped"), _spec(tmp_path, small_config, hardware, "whole")
    run_dir = Path(io.read_json(stopped)["run_dir"])
    for phase, said in phases:
        newest = preempt.newest_checkpoint(run_dir)
        code, out = _attempt(stopped, hold=phase, after_checkpoint=phase is None)
        assert code == preempt.EXIT_PREEMPTED, (phase, out[-3000:])
        assert said in out and "SignalException" not in out, (phase, out[-3000:])
        if phase is not None:  # no checkpoint of its own; the next attempt resumes or starts over, as it says
            assert preempt.newest_checkpoint(run_dir) == newest, phase
            resumes = f"resumes from the checkpoint at step {newest}" if newest >= 0 else "starts over"
            assert resumes in out, (phase, out[-3000:])
        assert not (run_dir / TRAIN_RECORD).exists()
    assert _attempt(stopped)[0] == 0 and _attempt(whole)[0] == 0
    (cut, weights_cut), (full, weights_full) = _result(stopped), _result(whole)
    assert cut["curves"]["loss"]["values"] == full["curves"]["loss"]["values"]
    assert sorted(weights_cut) == sorted(weights_full)
    assert all(torch.equal(weights_cut[k], weights_full[k]) for k in weights_full if torch.is_tensor(weights_full[k]))
    assert cut["restarts"] == 1  # the one checkpointed stop; a stop during start-up adds no segment


def test_a_signal_before_the_agent_starts_or_a_worker_killed_by_it_is_75(tmp_path, monkeypatch):
    """The launcher signalled before it starts torchrun starts nothing; one whose agent or worker then ends in its
    own way (torchrun's SignalException: exit 1; a worker dead of the signal: -15) exits 75 all the same."""
    monkeypatch.setattr(stops, "received", [signal.SIGTERM])
    started = tmp_path / "started"
    touch = ["python3", "-c", f"open({str(started)!r}, 'w')"]
    assert launch.supervise(touch, dict(os.environ), 1, agent=False, run_dir=tmp_path) == 75
    assert not started.exists()
    stops.received.clear()
    for ends in ("import os, signal; os.kill(os.getppid(), signal.SIGTERM); import time; time.sleep(0.3); "
                 "raise SystemExit(1)", "import os, signal, time; os.kill(os.getppid(), signal.SIGTERM); "
                 "time.sleep(0.3); signal.signal(signal.SIGTERM, signal.SIG_DFL); os.kill(os.getpid(), 15)"):  # fmt: skip
        assert launch.supervise(["python3", "-c", ends], dict(os.environ), 1, agent=False, run_dir=tmp_path) == 75
        stops.received.clear()  # one launch per launcher process: the signals it got so far
    assert launch.supervise(["python3", "-c", "raise SystemExit(3)"], dict(os.environ), 1, agent=False) == 3
