"""A run stopped by a signal after its checkpoint (preempted, or near its time limit), from the workers to the
scheduler, and each attempt of a train job in the run's log.

- A worker (hwsweep.run.runtime) that stops at a signal writes the step it checkpointed into the folder its
  launcher names in STOPPED_DIR, one file per local rank, and exits 0, so torchrun's agent ends at once and
  without a failure report; the launcher (hwsweep.run.launch) exits EXIT_PREEMPTED (75) when every rank of
  its node said so.
- The train rule runs its command through `python -m hwsweep.run.preempt SPEC LOG -- COMMAND...`, which holds
  the run's lease while COMMAND runs (hwsweep.contracts.lease: a second writer of the same run folder is refused
  with one line and exit EXIT_HELD), keeps each attempt's output in a file of its own (train.1.log, train.2.log,
  ...; train.log is the newest attempt's, whatever order attempts end in), headed by a marker line (attempt
  number, SLURM job, host, spec, time), and, in a SLURM job, answers a COMMAND that
  exits 75 with `scontrol requeue $SLURM_JOB_ID`: the same job waits in the queue and resumes from the newest
  checkpoint (or starts over where there is none), the slurm executor keeps polling the same job id, and no
  snakemake retry is spent. A stop signal at any moment of the attempt is such a stop (hwsweep.run.stops): this
  wrapper catches it from its first moment, and an attempt it saw signalled that ended otherwise than 0 is one.
  A stop without a newer checkpoint requeues too, but at most MAX_IDLE_REQUEUES times in a row (counted from
  the attempt logs), so a run that cannot progress does not requeue forever; then, and outside SLURM, it
  exits 75 (a failure to snakemake, which spends a retry).
- A run its user stopped for good (`hwsweep stop`, hwsweep.contracts.stopped) is refused at once, in one line,
  with EXIT_STOPPED: snakemake fails the job (and each retry) quickly.
- An attempt that fails says its one line (hwsweep.contracts.failure, the line `status` shows) on this process's
  stderr too, which is snakemake's console: the cause stands right above snakemake's "Error in rule train".
Torch-free: it runs before and around torchrun.
"""

from __future__ import annotations

from hwsweep.run import stops

if __name__ == "__main__":  # before the imports below: a stop from the first moment is a preemption
    stops.catch()

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from hwsweep.contracts import lease, scheduler, stopped
from hwsweep.contracts.failure import ATTEMPT, attempt_line, log_reason
from hwsweep.contracts.spec import CHECKPOINT_DIR, CHECKPOINTS, RunSpec, sha256

from hwsweep.run.stops import EXIT_PREEMPTED, STOP_SIGNALS, STOPPED_DIR  # noqa: F401 - their old home

EXIT_HELD = 73  # EX_CANTCREAT: another live writer (a job, a process) holds the run's folder; nothing was started
EXIT_STOPPED = stopped.EXIT_STOPPED  # the run is stopped for good (hwsweep stop): not an attempt
SPEC_SHORT = 12  # hex digits of the spec's sha256 a marker shows: attempts of another spec start a new log
MAX_IDLE_REQUEUES = 10  # requeues in a row of attempts stopped without a newer checkpoint
IDLE_REQUEUE = "requeue without progress"  # what the log of such an attempt says


# -- the workers and the launcher ------------------------------------------------------------------------------
def stopped_exit(step: int) -> int:
    """A worker stopping after its checkpoint at `step`: the exit code it should end with. Under
    hwsweep's launcher it leaves a note for it and exits 0 (torchrun's agent would otherwise report every
    rank as failed and take its time doing so); elsewhere (torchrun by hand) it exits 75 itself."""
    folder = os.environ.get(STOPPED_DIR)
    if not folder:
        return EXIT_PREEMPTED
    Path(folder, os.environ.get("LOCAL_RANK", "0")).write_text(f"{step}\n")
    return 0


def stopped_step(folder: str, ranks: int) -> int | None:
    """The step every one of this node's `ranks` workers stopped at after its checkpoint, if each left
    its note; None otherwise (a worker that finished, failed or was killed)."""
    steps = set()
    for rank in range(ranks):
        try:
            steps.add(int(Path(folder, str(rank)).read_text()))
        except (OSError, ValueError):
            return None
    return steps.pop() if len(steps) == 1 else None


# -- the train job's attempts ----------------------------------------------------------------------------------
def newest_checkpoint(run_dir: Path) -> int:
    """The step of the newest checkpoint in the run's checkpoints folder (files step<N>.pt or sharded
    folders step<N>/); -1 when there is none."""
    steps = [int(m.group(1)) for p in (run_dir / CHECKPOINT_DIR).glob(CHECKPOINTS)
             if (m := re.fullmatch(r"step(\d+)(\.pt)?", p.name))]  # fmt: skip
    return max(steps, default=-1)


def progress(spec_path: str) -> tuple[int, int]:
    """What a stop must have moved for the run to resume further on: the newest checkpoint's step (the runtime's
    checkpoints), and the newest time a user's command wrote its own resume file (trainer.resume.when)."""
    run_dir = Path(spec_path).parent
    when = RunSpec.load(spec_path).trainer.resume_when
    written = [p.stat().st_mtime_ns for p in run_dir.glob(when)] if when else []
    return newest_checkpoint(run_dir), max(written, default=0)


def attempt_log(log: Path, attempt: int) -> Path:
    """Where attempt `attempt` of a run keeps its output: train.log -> train.<attempt>.log."""
    return log.with_name(f"{log.stem}.{attempt}{log.suffix}")


def attempts(log: Path) -> list[tuple[int, str | None, str]]:
    """(attempt, SLURM job id or None, spec hash) of each attempt log kept beside `log`, oldest first."""
    found = []
    for path in log.parent.glob(f"{log.stem}.*{log.suffix}"):
        number = path.name[len(log.stem) + 1 : -len(log.suffix) or None]
        try:
            with open(path, errors="replace") as f:
                first = f.readline()
        except OSError:
            continue
        if number.isdigit() and (m := ATTEMPT.match(first)):
            found.append((int(number), m["job"], m["spec"]))
    return sorted(found)


def _link_newest(own: Path, log: Path) -> None:
    """Make `log` (train.log) name the attempt's own file: a new hard link put in its place in one rename (never a
    write through the old one, which an earlier attempt's file may share), else a copy renamed into place."""
    temporary = log.with_name(f".{log.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    try:
        os.link(own, temporary)
    except OSError:  # a file system without hard links: train.log is a copy, made again as the attempt goes on
        shutil.copyfile(own, temporary)
    os.replace(temporary, log)


def _begin(log: Path, spec_hash: str, job: str | None) -> int:
    """Open the attempt: its own file train.<n>.log below the earlier attempts' (of the same spec: attempts of an
    older config's run are removed, that run is over), claimed by an exclusive create so two attempts never share
    a number, and `log` (train.log, the rule's log, which snakemake deletes before each job) the same file, so it
    shows the newest attempt and removing it loses nothing. Returns the attempt's number."""
    earlier = attempts(log)
    if earlier and earlier[-1][2] != spec_hash:
        for number, _, _ in earlier:
            attempt_log(log, number).unlink(missing_ok=True)
        earlier = []
    attempt = earlier[-1][0] + 1 if earlier else 1
    log.parent.mkdir(parents=True, exist_ok=True)
    while True:
        line = attempt_line(attempt, job, socket.gethostname(), spec_hash, time.strftime("%Y-%m-%d %H:%M:%S %z"))
        try:
            with open(attempt_log(log, attempt), "x") as f:
                f.write(line + "\n")
            break
        except FileExistsError:  # taken meanwhile (an attempt log without a marker line counts too)
            attempt += 1
    _link_newest(attempt_log(log, attempt), log)
    return attempt


class AttemptLog:
    """The attempt's own file and the run's log (the same file by a hard link, else a copy kept up to date). Only
    the newest attempt touches the run's log: an older one that ends later leaves it to the newer."""

    def __init__(self, own: Path, log: Path):
        self.own, self.log = own, log

    def newest(self) -> bool:
        numbers = [n for n, _, _ in attempts(self.log)]
        return not numbers or attempt_log(self.log, max(numbers)) == self.own

    def sync(self) -> None:
        if not self.newest():
            return
        if not (self.log.exists() and os.path.samefile(self.own, self.log)):
            _link_newest(self.own, self.log)

    def say(self, line: str) -> None:
        with open(self.own, "a") as f:
            f.write(f"hwsweep.run.preempt: {line}\n")
        self.sync()


def requeue(job: str, log: AttemptLog, why: str, idle: bool = False) -> bool:
    """Ask SLURM to put this job back in the queue (it keeps its id; SLURM ends this attempt); whether it
    accepted. Only a job that still runs: the signal came from --signal or `scancel --signal`; a job being
    cancelled (`scancel`) stays cancelled, and one SLURM preempts it requeues (or cancels) itself. A refusal
    (a site's JobRequeue=0 with --no-requeue, a controller that does not answer) is said in the log. `why`: the
    stop, as the log says it before the requeue; `idle`: the stop wrote no newer checkpoint (IDLE_REQUEUE)."""
    try:
        state = scheduler.job_state(job)
    except scheduler.SchedulerError as e:
        log.say(f"not requeued: {e}")
        return False
    if state != "RUNNING":
        log.say(f"{why}; SLURM job {job} is {state}: not requeued (SLURM ends or requeues it)")
        return False
    log.say(f"{why}; requeueing SLURM job {job} (scontrol requeue{', a ' + IDLE_REQUEUE if idle else ''}): it "
            "spends no retry")  # fmt: skip
    try:
        proc = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.say(f"scontrol requeue {job} failed ({e})")
        return False
    if proc.returncode != 0:
        log.say(f"scontrol requeue {job} refused: {(proc.stderr or proc.stdout).strip()}")
    return proc.returncode == 0


def idle_streak(log: Path, attempt: int) -> int:
    """How many attempts right before `attempt` were requeued without a newer checkpoint, in a row."""
    streak = 0
    for number in range(attempt - 1, 0, -1):
        try:
            text = attempt_log(log, number).read_text(errors="replace")
        except OSError:
            break
        if IDLE_REQUEUE not in text:
            break
        streak += 1
    return streak


def run_attempt(spec_path: str, log: Path, command: list[str], env: dict | None = None,
                wait_for_end: float = 600) -> int:  # fmt: skip
    """One attempt of a train job: COMMAND with its output in the attempt's log; its exit code. A stop (75, or any
    end but 0 after a stop signal here) in a SLURM job requeues the job instead (after a newer checkpoint; without
    one, MAX_IDLE_REQUEUES times in a row at most), then waits for SLURM to end this attempt (at most
    `wait_for_end` seconds, then 75). A stop signal for this process is only noted: COMMAND gets it too (SLURM
    signals the whole job step; locally it shares this process group), and this attempt ends when COMMAND does.
    A run stopped for good (hwsweep stop) is refused in one line with EXIT_STOPPED."""
    env = dict(os.environ if env is None else env)
    mark = stopped.read(Path(spec_path).parent)
    if mark is not None:
        print(f"hwsweep: {mark.refusal()}", file=sys.stderr, flush=True)
        return EXIT_STOPPED
    spec_hash = sha256(Path(spec_path).read_text())[:SPEC_SHORT]
    job = env.get("SLURM_JOB_ID")
    try:
        with lease.held(Path(spec_path).parent, attempt=len(attempts(log)) + 1, env=env):
            return _attempt(spec_path, log, command, env, spec_hash, job, wait_for_end)
    except lease.Held as e:
        print(f"hwsweep: {e}", file=sys.stderr, flush=True)
        return EXIT_HELD


def _attempt(spec_path: str, log: Path, command: list[str], env: dict, spec_hash: str, job: str | None,
             wait_for_end: float) -> int:  # fmt: skip
    number = _begin(log, spec_hash, job)
    out = AttemptLog(attempt_log(log, number), log)
    before = progress(spec_path)
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    stops.catch()  # default again in COMMAND (exec resets caught signals)
    try:
        if stops.received:
            out.say(f"stopped by {stops.names()} before the attempt started")
            code = EXIT_PREEMPTED
        else:
            with open(out.own, "ab") as f:
                code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
        if stops.received and code not in (0, EXIT_PREEMPTED):
            out.say(f"stopped by {stops.names()}; the attempt ended with exit {code}: a stop, exit {EXIT_PREEMPTED}")
            code = EXIT_PREEMPTED
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    out.sync()
    if code != EXIT_PREEMPTED or not job:
        return _said(code, spec_path, out.own)
    after = progress(spec_path)
    moved = any(a > b for a, b in zip(after, before))
    if moved:
        why = f"stopped after {f'the checkpoint at step {after[0]}' if after[0] > before[0] else 'its resume file'}"
    else:
        streak = idle_streak(log, number)
        resume = f"it resumes from step {after[0]}" if after[0] >= 0 else "it starts over (no checkpoint yet)"
        if streak >= MAX_IDLE_REQUEUES:
            out.say(f"stopped without a newer checkpoint again; not requeued: the {streak} attempts before this one "
                    f"were requeued without one (at most {MAX_IDLE_REQUEUES} in a row); exit {code}")  # fmt: skip
            return _said(code, spec_path, out.own)
        why = f"stopped without a newer checkpoint ({streak + 1} in a row, at most {MAX_IDLE_REQUEUES}): {resume}"
    if not requeue(job, out, why, idle=not moved):
        return _said(code, spec_path, out.own)
    # SLURM now ends this attempt (SIGTERM to the batch script) and starts the job again: returning first
    # would let the job's snakemake report a missing output.
    time.sleep(wait_for_end)
    out.say(f"SLURM did not end the requeued job within {wait_for_end:.0f} s; exit {code}")
    return code


def _said(code: int, spec_path: str, own: Path) -> int:
    """`code`, with the failure's one line said on stderr first when it is one: the console of the snakemake that
    runs the train job shows the job's stderr, not its log."""
    if code != 0:
        run = Path(spec_path).parent
        print(f"hwsweep: {run}: train failed (exit {code}): {log_reason(own)} (log: {own})", file=sys.stderr,
              flush=True)  # fmt: skip
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep.run.preempt", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="the run's spec.json (its folder holds the checkpoints)")
    parser.add_argument("log", type=Path, help="the run's train log (the newest attempt's; train.<n>.log: attempt n)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command of one attempt")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    return run_attempt(args.spec, args.log, command)


if __name__ == "__main__":
    sys.exit(main())
