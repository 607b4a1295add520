"""`status` where the runs are SLURM jobs: each run's state from the scheduler's view of its newest job (pending,
preempted, running, failed, timeout), the files where SLURM has forgotten the job and keeps no accounting, and a
problem column that never quotes progress output. The scheduler is given here as its records; tests/cluster/test_slurm.py
asks the real one."""

import os

import pandas as pd
import pytest

from hwsweep.analysis.holders import Scheduler, job_comment
from hwsweep.analysis.status import write_status
from hwsweep.contracts import scheduler as slurm
from hwsweep.contracts.failure import attempt_line
from hwsweep.plan.config import resolve


@pytest.fixture
def matrix(tmp_path, monkeypatch, small_config):
    monkeypatch.chdir(tmp_path)
    small_config["seeds"] = [0, 1, 2, 3, 4, 5]
    small_config["hardware"] = {"cpu1": small_config["hardware"]["cpu1"]}
    return resolve(small_config)


def job(matrix, seed: int, state: str, rule: str = "train", **fields) -> slurm.Job:
    spec = matrix.spec("tiny", "default", "cpu1", seed)
    return slurm.Job(id=str(100 + seed), state=state, comment=job_comment(rule, spec), workdir=os.getcwd(), **fields)


def statuses(matrix, jobs, accounted=lambda ids: []) -> pd.DataFrame:
    return write_status(matrix, scheduler=Scheduler(ask=lambda: jobs, accounted=accounted)).set_index("seed")


def log(matrix, seed: int, text: str, job_id: str | None = None) -> None:
    path = matrix.spec("tiny", "default", "cpu1", seed).log_path("train.log")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(attempt_line(1, job_id, "cpu-1", "abc", "now") + "\n" + text)


def test_each_run_is_where_its_newest_slurm_job_is(matrix):
    progress = "train:  79%|███████▉ | 473/600 [00:10<00:02, 45.20it/s]\n"
    log(matrix, 2, progress)  # a running job's log ends in its progress bar
    log(matrix, 3, "hwsweep.run.launch: no CUDA device is visible on l40s-1\n" + progress)
    log(matrix, 4, "hwsweep: stop requested; checkpoint at step 40, exiting 75\n" + progress)
    jobs = [job(matrix, 0, "PENDING", reason="Resources"),
            job(matrix, 1, "PENDING", reason="BeginTime", restarts=3),
            job(matrix, 2, "RUNNING", nodes="h100-[1-2]", elapsed="1:02"),
            job(matrix, 3, "FAILED", reason="NonZeroExitCode", nodes="l40s-1", exit_code="1:0"),
            job(matrix, 4, "TIMEOUT", nodes="cpu-1", exit_code="0:15", elapsed="10:00"),
            job(matrix, 5, "RUNNING", nodes="cpu-1"),
            ]  # fmt: skip
    elsewhere = slurm.Job(id="99", state="FAILED", comment=jobs[5].comment, workdir="/elsewhere")  # another folder's
    older = slurm.Job(id="7", state="FAILED", comment=jobs[5].comment, workdir=os.getcwd())  # an earlier attempt
    rows = statuses(matrix, jobs + [elsewhere, older])
    assert rows.state.to_dict() == {0: "pending", 1: "preempted", 2: "running", 3: "failed", 4: "timeout", 5: "running"}
    assert rows.loc[0, "scheduler"] == "job 100 PENDING (Resources)"
    assert rows.loc[1, "scheduler"] == "job 101 PENDING (BeginTime), requeued 3 times"
    assert rows.loc[2, "scheduler"] == "job 102 RUNNING, on h100-[1-2], for 1:02"
    assert rows.loc[3, "problem"] == ("SLURM job 103 FAILED, exit code 1:0: "
                                      "hwsweep.run.launch: no CUDA device is visible on l40s-1")
    assert rows.loc[4, "problem"].startswith("SLURM job 104 TIMEOUT, exit code 0:15: hwsweep: stop requested")
    assert not rows.problem.fillna("").str.contains("%|", regex=False).any()


def test_without_a_scheduler_or_an_answer_the_files_decide(matrix, tmp_path):
    log(matrix, 0, "Traceback (most recent call last):\n  File \"x\"\nValueError: bad batch\ntrain:  5%|▌ | 3/60\n")
    bare = statuses(matrix, [])
    assert bare.loc[0, "state"] == "failed" and bare.loc[0, "problem"] == "ValueError: bad batch"
    assert (bare.loc[1:, "state"] == "missing").all() and (bare.scheduler.fillna("") == "").all()

    def down():
        raise slurm.SchedulerError("no answer from the SLURM controller within 4 s (squeue)")

    scheduler = Scheduler(ask=down)
    rows = write_status(matrix, scheduler=scheduler).set_index("seed")
    assert scheduler.note.startswith("no answer from the SLURM controller") and rows.loc[0, "state"] == "failed"


def test_a_job_the_controller_forgot_is_read_from_accounting_where_there_is_one(matrix):
    log(matrix, 0, "hwsweep.run.launch: out of memory\n", job_id="55")
    asked = []

    def sacct(ids):
        asked.append(ids)
        return [slurm.Job(id="55", state="OUT_OF_MEMORY", exit_code="0:125", nodes="cpu-1")]

    rows = statuses(matrix, [], accounted=sacct)
    assert asked == [["55"]] and rows.loc[0, "state"] == "failed"
    assert rows.loc[0, "problem"] == "SLURM job 55 OUT_OF_MEMORY, exit code 0:125: hwsweep.run.launch: out of memory"

    def no_accounting(ids):
        raise slurm.SchedulerError("sacct failed: Slurm accounting storage is disabled")

    rows = statuses(matrix, [], accounted=no_accounting)
    assert rows.loc[0, "state"] == "failed" and rows.loc[0, "problem"] == "hwsweep.run.launch: out of memory"


def test_squeue_and_sacct_output_is_read_as_slurm_writes_it():
    text = ("24|FAILED|NonZeroExitCode|cpu-1|0|256|0:45|rule_train_wildcards_tiny_default_c1_0|/tmp/a|b|\n"
            "27|PENDING|BeginTime|(null)|2|0|0:00|rule_train_wildcards_tiny_default_c1_0|/tmp/x|\n")  # fmt: skip
    failed, waiting = slurm.parse_squeue(text)
    assert (failed.id, failed.state, failed.exit_code, failed.workdir) == ("24", "FAILED", "1:0", "/tmp/a|b")
    assert (waiting.reason, waiting.nodes, waiting.restarts) == ("BeginTime", "", 2)
    text = "31|CANCELLED by 0|0:15|h100-1|00:01:02|/tmp/a\n31.batch|CANCELLED|0:15|h100-1|x|y\n"
    (cancelled,) = slurm.parse_sacct(text)  # the job, not its steps
    assert (cancelled.state, cancelled.reason, cancelled.exit_code) == ("CANCELLED", "by 0", "0:15")


def test_a_requeued_jobs_records_in_sacct_are_one_job_with_its_restarts():
    """sacct --duplicates as slurmdbd 22.05 wrote it (tests/cluster/test_accounting.py): job 3 requeued once, its
    records around another job's; without --duplicates sacct shows the newest alone and the requeues were lost."""
    text = ("3|REQUEUED|0:0|cpu-1|00:00:02|/tmp\n4|CANCELLED by 0|0:0|cpu-1|00:00:02|/tmp\n"
            "3|FAILED|2:0|cpu-1|00:00:05|/tmp\n3|RUNNING|0:0|cpu-1|00:00:01|/tmp\n")  # fmt: skip
    cancelled, requeued = slurm.parse_sacct(text)
    assert (cancelled.id, cancelled.restarts) == ("4", 0)
    assert (requeued.id, requeued.state, requeued.exit_code, requeued.restarts) == ("3", "RUNNING", "0:0", 2)


def test_a_slurm_client_with_no_cluster_to_ask_says_nothing_of_slurm(matrix, tmp_path, monkeypatch):
    """A machine with an squeue binary but no SLURM (a laptop, a CI image): status reads the files, silently."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'squeue: error: resolve_ctls_from_dns_srv: res_nsearch error: "
                                    "Unknown host' >&2\necho 'squeue: fatal: Could not establish a configuration "
                                    "source' >&2\nexit 1\n")  # fmt: skip
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    scheduler = Scheduler()
    rows = write_status(matrix, scheduler=scheduler)
    assert scheduler.note == "" and not scheduler.asked and set(rows.state) == {"missing"}
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'squeue: error: Invalid user' >&2\nexit 1\n")
    assert Scheduler().note.startswith("squeue failed: squeue: error: Invalid user")  # a cluster's real refusal


def test_a_trained_run_over_its_memory_plan_says_so_in_the_problem_column(matrix, monkeypatch):
    """A done run whose training's or evaluation's record flags a process over its memory plan
    (hwsweep.contracts.memory_check) has one short problem; a done run whose record has other checks only has none."""
    from hwsweep.analysis import status, validation
    from hwsweep.contracts import io

    monkeypatch.setattr(status, "run_state", lambda spec, evaluated, **_: validation.Verdict(validation.DONE))
    over = "memory: rank 1 used 0.400 GB above its start, over the plan's 0.080 GB by 400% (tolerance 15%)"
    for seed, checks in ((0, ["divergence: loss rose", over]), (1, ["divergence: loss rose"])):
        io.write_json(matrix.spec("tiny", "default", "cpu1", seed).path("train.json"), {"checks": checks})
    io.write_json(matrix.spec("tiny", "default", "cpu1", 2).path("eval.json"), {"checks": [over]})  # its evaluation's
    rows = status.status_rows(matrix, Scheduler(ask=lambda: [])).set_index("seed")  # not the partial aggregate
    assert rows.loc[0, "problem"] == "over its memory plan (train.json checks)"
    assert rows.loc[2, "problem"] == "over its memory plan (eval.json checks)"
    assert rows.loc[[1, 3, 4, 5], "problem"].fillna("").eq("").all(), rows.problem


def test_status_reads_each_record_once_for_its_tracking_and_memory_columns(matrix, monkeypatch):
    """Besides run_state's own reading (validation, not counted here), the tracking and problem columns share one
    read of each record per run: a sweep's status costs a read of its records, not one per column."""
    from collections import Counter

    from hwsweep.analysis import status, validation
    from hwsweep.contracts import io

    monkeypatch.setattr(status, "run_state", lambda spec, evaluated, **_: validation.Verdict(validation.DONE))
    over = "memory: rank 1 used 0.400 GB above its start, over the plan's 0.080 GB by 400% (tolerance 15%)"
    failed = {"backends": {"mlflow": {"state": "failed", "why": "down", "dropped": 0, "undelivered": 2}}}
    for seed in range(6):
        spec = matrix.spec("tiny", "default", "cpu1", seed)
        io.write_json(spec.path("train.json"), {"checks": [over], "tracking": failed})
        io.write_json(spec.path("eval.json"), {"checks": []})
    reads, read_json = Counter(), io.read_json
    monkeypatch.setattr(io, "read_json", lambda path: reads.update([str(path)]) or read_json(path))
    rows = status.status_rows(matrix, Scheduler(ask=lambda: []))
    assert (rows.problem == "over its memory plan (train.json checks)").all()
    assert (rows.tracking == "train: mlflow failed (down), 2 rows undelivered").all()
    assert len(reads) == 12 and set(reads.values()) == {1}, reads  # each run's two records, once each
