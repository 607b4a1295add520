"""Progress of a sweep: which runs are done, trained, stale, corrupt, failed or missing (as
hwsweep.analysis.validation judges them, the same judgement `all` acts on), and a partial aggregate of what has
finished, for watching a long sweep (`snakemake status`).

A trained run whose evaluation runs (its SLURM job, or the evaluator on this node) is evaluating. Where the runs
are SLURM jobs, the scheduler says where a run without a record is (one `squeue`, and `sacct`
for a job the controller has forgotten, where the cluster keeps accounting): pending (with SLURM's reason),
preempted (requeued after its checkpoint, waiting to resume), running (on which nodes), failed (SLURM's state
and exit code, then the cause from the log) or timeout; the scheduler column says it as SLURM does. Without a
scheduler, a run whose launcher runs on this node is running. A run whose job or trainer no snakemake waits for
(its snakemake was killed) says so; one its user stopped for good (`hwsweep stop`) is stopped, and who did when. It reads only: the next `all` moves a corrupt
record aside (hwsweep.analysis.quarantine), not this; the repairs column names what that `all` will set right
and what earlier ones did; the tracking column, which tracker did not take what a run sent it, as its records
say. A trained run whose record flags a rank over its memory plan says so in the problem column. It writes
results/partial/ and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from hwsweep.analysis import quarantine
from hwsweep.analysis.holders import STAGE_LOG, Scheduler, live_writer, snakemake_waits
from hwsweep.analysis.aggregate import aggregate, prices_of
from hwsweep.analysis.validation import DONE, FAILED, MISSING, TRAINED, Verdict, run_state
from hwsweep.contracts import failure, host, io, lease, memory_check, stopped
from hwsweep.contracts.scheduler import ACTIVE, ENDED_BADLY, WAITING, Job
from hwsweep.contracts.spec import EVAL_RECORD, SPEC_FILE, TRAIN_RECORD
from hwsweep.contracts.tracking import delivery_problem

RUNNING, PENDING, PREEMPTED, TIMEOUT = "running", "pending", "preempted", "timeout"
EVALUATING = "evaluating"  # trained; its evaluation runs now
STOPPED = "stopped"  # its user stopped it for good (hwsweep stop): no attempt starts until --undo


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


def read_records(spec) -> dict:
    """train.json and eval.json as JSON (record name -> its data; None where it is missing or not JSON: the state
    column judges it), read once for the columns that look inside them (state, tracking, problem)."""
    out = {}
    for name in (TRAIN_RECORD, EVAL_RECORD):
        try:
            out[name] = io.read_json(spec.path(name))
        except (OSError, ValueError):  # no record (yet), or one the state column judges
            out[name] = None
    return out


def tracking_problem(spec, evaluated: bool, records: dict | None = None) -> str:
    """What the run's records say its trackers did not take ("" when each took everything, or nothing is tracked
    or recorded yet): train.json's for the training, eval.json's for the evaluation (docs/tracking.md).
    `records`: read_records(spec), where the caller has read them."""
    records = records if records is not None else read_records(spec)
    out = []
    for stage, name in (("train", TRAIN_RECORD), ("eval", EVAL_RECORD)):
        if records[name] is None or stage == "eval" and not evaluated:
            continue
        try:
            problem = delivery_problem(records[name].get("tracking"))
        except (ValueError, AttributeError):  # a record the state column judges
            continue
        if problem:
            out.append(f"{stage}: {problem}")
    return " | ".join(out)


def memory_problem(spec, records: dict | None = None) -> str:
    """The problem of a trained run one of whose processes (training or evaluation) used more memory than its plan
    allows (a record's check, hwsweep.contracts.memory_check); "" otherwise, and where a record is not readable (the
    state column says). `records`: read_records(spec), where the caller has read them."""
    records = records if records is not None else read_records(spec)
    over = []
    for name in (TRAIN_RECORD, EVAL_RECORD):
        try:
            checks = (records[name] or {}).get("checks") or []
        except AttributeError:  # not an object: the state column says
            continue
        if memory_check.flagged(checks):
            over.append(name)
    return f"over its memory plan ({' and '.join(over)} checks)" if over else ""


def unwaited(spec) -> str:
    """The problem of a run whose job or trainer still runs although the snakemake that scheduled it (its lease
    names it) is gone: nothing collects its result until `all` runs again; "" while it lives, and where it cannot
    be told (no lease yet, a snakemake on another machine)."""
    held = lease.read(spec.run_dir)
    if held is None or snakemake_waits(held.snakemake) is not False:
        return ""
    return "no snakemake waits for it (its snakemake was stopped): run all again once it ends, or stop it"


def run_status(spec, evaluated: bool, launched: set[str], scheduler: Scheduler,
               launched_evaluations: frozenset[str] = frozenset(), verdict: Verdict | None = None,
               records: dict | None = None) -> dict:  # fmt: skip
    """One row of status.csv: the run's state, what is wrong (problem), SLURM's view (scheduler). `launched`,
    `launched_evaluations`: the spec paths whose launcher, evaluator, runs on this node; `verdict`: what its files
    say, where the caller has judged them already (validation.run_state); `records`: read_records(spec), where
    the caller has read them."""
    verdict = verdict or run_state(spec, evaluated)
    state, problem, where = verdict.state, verdict.reason, ""
    if state != DONE:
        stage = "evaluate" if state == TRAINED else "train"
        job = scheduler.job(spec, stage)
        evaluating = state == TRAINED and (os.path.abspath(spec.path(SPEC_FILE)) in launched_evaluations
                                           or (job is not None and job.state in ACTIVE))  # fmt: skip
        state, problem = _with_scheduler(state, problem, job, spec.log_path(STAGE_LOG[stage]))
        where = _where(job) if job is not None else ""
        if evaluating:  # trained, and its evaluation runs (its log says nothing yet: no problem to name)
            state, problem = EVALUATING, ""
    if state in (FAILED, MISSING) and not where and live_writer(spec, None, launched) is not None:
        state, problem = RUNNING, ""  # no scheduler: its launcher runs on this node, or its lease's holder lives
    mark = stopped.read(spec.run_dir) if state not in (DONE, TRAINED, EVALUATING) else None  # it stops training
    if mark is not None:  # whatever SLURM still says of its cancelled job: no attempt of it starts
        state, problem = STOPPED, f"{mark.said()}; `hwsweep stop --undo {mark.run}` lets it run again"
    if state in (RUNNING, PENDING, PREEMPTED, EVALUATING) and not problem:
        problem = unwaited(spec)
    if state in (DONE, TRAINED, EVALUATING) and not problem:
        problem = memory_problem(spec, records)
    return {"state": state, "problem": problem, "scheduler": where}


class Unwritten(io.StorageError):
    """results/partial/ could not be written; `rows` holds the table status made all the same."""

    def __init__(self, error: io.StorageError, rows: pd.DataFrame):
        super().__init__(error.errno, error.strerror)
        self.rows = rows


def status_rows(matrix, scheduler: Scheduler) -> pd.DataFrame:
    """Each run's row of status.csv (reading only)."""
    evaluated = matrix.evaluation.kind != "none"
    rows, launched = [], host.launched_specs()
    evaluating = host.launched_specs(host.EVALUATOR)
    for r in matrix.runs():
        spec = matrix.spec(r.suite, r.variant, r.hardware, r.seed)
        records = read_records(spec)  # once: the state, the tracking and memory problems all look inside them
        verdict = run_state(spec, evaluated, read_json=records)  # once: the row's state and its repairs start from it
        rows.append({"suite": r.suite, "variant": r.variant, "hardware": r.hardware, "seed": r.seed}
                    | run_status(spec, evaluated, launched, scheduler, evaluating, verdict, records)
                    | {"repairs": " | ".join(quarantine.repairs(spec, evaluated, verdict)),
                       "tracking": tracking_problem(spec, evaluated, records)})  # fmt: skip
    return pd.DataFrame(rows)


def write_status(matrix, folder="results/partial", scheduler: Scheduler | None = None) -> pd.DataFrame:
    """status.csv, cells.csv and the partial aggregate in `folder`; the runs' rows. `scheduler`: where the
    runs' jobs are (asked here when not given); its note says why SLURM could not be asked. A folder that cannot
    be written (a full or read-only disk) raises Unwritten with the rows, so the caller can still show them."""
    folder = Path(folder)
    evaluated = matrix.evaluation.kind != "none"
    status = status_rows(matrix, scheduler or Scheduler())
    try:
        _write_partial(matrix, status, folder, evaluated)
    except io.StorageError as e:
        raise Unwritten(e, status) from None
    return status


def _write_partial(matrix, status: pd.DataFrame, folder: Path, evaluated: bool) -> None:
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
