"""Progress of a sweep: which runs are done, trained, stale, corrupt, failed or missing (as
hwsweep.analysis.validation judges them, the same judgement `all` acts on), and a partial aggregate of what has
finished, for watching a long sweep (`snakemake status`).

Where the runs are SLURM jobs, the scheduler says where a run without a record is (one `squeue`, and `sacct`
for a job the controller has forgotten, where the cluster keeps accounting): pending (with SLURM's reason),
preempted (requeued after its checkpoint, waiting to resume), running (on which nodes), failed (SLURM's state
and exit code, then the cause from the log) or timeout; the scheduler column says it as SLURM does. Without a
scheduler, a run whose launcher runs on this node is running. It reads only: the next `all` moves a corrupt
record aside (hwsweep.analysis.quarantine), not this; the repairs column names what that `all` will set right
and what earlier ones did; the tracking column, which tracker did not take what a run sent it, as its records
say. It writes results/partial/ and nothing else."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd

from hwsweep.analysis import quarantine
from hwsweep.analysis.aggregate import aggregate, prices_of
from hwsweep.analysis.validation import DONE, FAILED, MISSING, TRAINED, run_state
from hwsweep.contracts import failure, host, io
from hwsweep.contracts.scheduler import SQUEUE, Job, SchedulerError, accounted_jobs, my_jobs
from hwsweep.contracts.spec import EVAL_RECORD, SPEC_FILE, TRAIN_RECORD
from hwsweep.contracts.tracking import delivery_problem

RUNNING, PENDING, PREEMPTED, TIMEOUT = "running", "pending", "preempted", "timeout"
WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESV_DEL_HOLD",
           "PREEMPTED"}  # fmt: skip
ACTIVE = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}
ENDED_BADLY = {"FAILED", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "TIMEOUT"}
STAGE_LOG = {"train": "train.log", "evaluate": "evaluate.log"}


def job_comment(rule: str, spec) -> str:
    """The comment snakemake's slurm executor gives a job of `rule` for this run: rule_<rule>_wildcards_ and the
    wildcard values in the order of the rule's output path (suite, variant, hardware, seed) joined by _."""
    values = [spec.suite, spec.variant, spec.hardware_name, str(spec.seed)]
    return f"rule_{rule}_wildcards_" + "_".join(values).replace("/", "_")


class Scheduler:
    """This folder's SLURM jobs, newest first per run and stage; empty where there is no SLURM client. `note`:
    the one line saying why the scheduler could not be asked, when it could not."""

    def __init__(self, workdir: str = ".", ask=my_jobs, accounted=accounted_jobs):
        self.workdir, self.note, self._accounted = os.path.realpath(workdir), "", accounted
        self._by_comment: dict[str, Job] = {}
        self.asked = shutil.which(SQUEUE[0]) is not None or ask is not my_jobs
        if not self.asked:
            return
        try:
            jobs = ask()
        except SchedulerError as e:
            self.note = f"{e}; states from the runs' files only"
            return
        for job in sorted(jobs, key=lambda j: int(j.id) if j.id.isdigit() else -1):
            if job.workdir and os.path.realpath(job.workdir) == self.workdir:
                self._by_comment[job.comment] = job  # the newest job of a run and stage wins

    def job(self, spec, stage: str) -> Job | None:
        """The newest job of this run's `stage` (train or evaluate): the controller's, else, for the job the
        stage's log names in its newest attempt, the accounting database's (where the cluster keeps one)."""
        found = self._by_comment.get(job_comment(stage, spec))
        if found is not None or not self.asked or self.note:
            return found
        logged = newest_logged_job(spec.log_path(STAGE_LOG[stage]))
        if logged is None:
            return None
        try:
            records = self._accounted([logged])
        except SchedulerError:
            return None  # no accounting: the files say what they can
        return records[-1] if records else None


def newest_logged_job(log: Path) -> str | None:
    """The SLURM job of the newest attempt a log holds (hwsweep.run.preempt's marker), if any."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    jobs = [m["job"] for line in text.splitlines() if (m := failure.ATTEMPT.match(line))]
    return jobs[-1] if jobs and jobs[-1] else None


def _where(job: Job) -> str:
    """The scheduler column: SLURM's view of the job, as SLURM says it."""
    parts = [f"job {job.id} {job.state}"]
    if job.reason:
        parts[0] += f" ({job.reason})"
    if job.nodes and job.state not in WAITING:
        parts.append(f"on {job.nodes}")
    if job.elapsed and job.state not in WAITING:
        parts.append(f"for {job.elapsed}")
    if job.state in ENDED_BADLY and job.exit_code:
        parts.append(f"exit code {job.exit_code}")
    if job.restarts:
        parts.append(f"requeued {job.restarts} time{'s' if job.restarts > 1 else ''}")
    return ", ".join(parts)


def _with_scheduler(verdict_state: str, reason: str, job: Job | None, log: Path) -> tuple[str, str]:
    """(state, problem) of a run that is not done, given its stage's newest SLURM job."""
    if job is None or job.state == "COMPLETED":
        return verdict_state, reason
    if job.state in WAITING:
        requeued = job.restarts or job.state.startswith("REQUEUE") or job.state == "PREEMPTED"
        return (PREEMPTED, "") if requeued else (PENDING, "")
    if job.state in ACTIVE:
        return RUNNING, ""
    if job.state in ENDED_BADLY:
        why = reason or (failure.log_reason(log) if log.exists() else "")
        said = f"SLURM job {job.id} {job.state}" + (f", exit code {job.exit_code}" if job.exit_code else "")
        return (TIMEOUT if job.state == "TIMEOUT" else FAILED), said + (f": {why}" if why else "")
    return verdict_state, reason


def tracking_problem(spec, evaluated: bool) -> str:
    """What the run's records say its trackers did not take ("" when each took everything, or nothing is tracked
    or recorded yet): train.json's for the training, eval.json's for the evaluation (docs/tracking.md)."""
    out = []
    for stage, name in (("train", TRAIN_RECORD), ("eval", EVAL_RECORD)):
        if stage == "eval" and not evaluated:
            continue
        try:
            problem = delivery_problem(io.read_json(spec.path(name)).get("tracking"))
        except (OSError, ValueError, AttributeError):  # no record (yet), or one the state column judges
            continue
        if problem:
            out.append(f"{stage}: {problem}")
    return " | ".join(out)


def run_status(spec, evaluated: bool, launched: set[str], scheduler: Scheduler) -> dict:
    """One row of status.csv: the run's state, what is wrong (problem), SLURM's view (scheduler)."""
    verdict = run_state(spec, evaluated)
    state, problem, where = verdict.state, verdict.reason, ""
    if state != DONE:
        stage = "evaluate" if state == TRAINED else "train"
        job = scheduler.job(spec, stage)
        state, problem = _with_scheduler(state, problem, job, spec.log_path(STAGE_LOG[stage]))
        where = _where(job) if job is not None else ""
    if state in (FAILED, MISSING) and not where and os.path.abspath(spec.path(SPEC_FILE)) in launched:
        state, problem = RUNNING, ""  # no scheduler: its launcher runs on this node
    return {"state": state, "problem": problem, "scheduler": where}


def write_status(matrix, folder="results/partial", scheduler: Scheduler | None = None) -> pd.DataFrame:
    """status.csv, cells.csv and the partial aggregate in `folder`; the runs' rows. `scheduler`: where the
    runs' jobs are (asked here when not given); its note says why SLURM could not be asked."""
    folder = Path(folder)
    evaluated = matrix.evaluation.kind != "none"
    rows, launched, scheduler = [], host.launched_specs(), scheduler or Scheduler()
    for r in matrix.runs():
        spec = matrix.spec(r.suite, r.variant, r.hardware, r.seed)
        rows.append({"suite": r.suite, "variant": r.variant, "hardware": r.hardware, "seed": r.seed}
                    | run_status(spec, evaluated, launched, scheduler)
                    | {"repairs": " | ".join(quarantine.repairs(spec, evaluated)),
                       "tracking": tracking_problem(spec, evaluated)})  # fmt: skip
    status = pd.DataFrame(rows)
    io.write_csv(status, folder / "status.csv")
    done = status[status.state == "done"]
    cells = status.pivot_table(index=["suite", "variant", "hardware"], columns="state", values="seed",
                               aggfunc="count", fill_value=0).reset_index()  # fmt: skip
    io.write_csv(cells, folder / "cells.csv")
    comparisons = []
    for suite, sub in done.groupby("suite", sort=False):
        dirs = [Path(matrix.spec(r.suite, r.variant, r.hardware, r.seed).run_dir) for r in sub.itertuples()]
        names = ["runs", "curves", "equivalence", "speedup", "comparison"]
        evals = [d / EVAL_RECORD for d in dirs] if evaluated else []
        comparisons.append(aggregate([d / TRAIN_RECORD for d in dirs], evals, matrix.baseline, matrix.statistics,
                                     list(matrix.metrics), {n: folder / suite / f"{n}.csv" for n in names},
                                     prices_of(matrix.hardware)))  # fmt: skip
    combined = pd.concat(comparisons, ignore_index=True) if comparisons else pd.DataFrame(columns=["suite", "variant", "hardware"])
    # Every cell of the matrix appears, with how many of its seeds are done; missing ones say so.
    combined = cells.merge(combined, on=["suite", "variant", "hardware"], how="left")
    io.write_csv(combined, folder / "comparison.csv")
    return status
