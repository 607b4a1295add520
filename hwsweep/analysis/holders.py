"""Who still writes a run's folder: its train job as SLURM sees it (this folder's jobs, from one `squeue`, by the
comment snakemake's slurm executor gives them, a run's group job included), the holder of the run's lease (hwsweep.contracts.lease), or its
launcher on this machine. Asked by `status` (where each run's job is) and by the workflow before a real run's
first job, so that a run a killed snakemake left running gets no second writer. Reading only."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from hwsweep.contracts import failure, host, lease
from hwsweep.contracts.scheduler import (LIVE, SQUEUE, Job, NoCluster, SchedulerError, accounted_jobs, job_comment,
                                        job_comments, job_number, job_state, my_jobs)
from hwsweep.contracts.spec import SPEC_FILE

STAGE_LOG = {"train": "train.log", "evaluate": "evaluate.log"}


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
        except NoCluster:  # a SLURM client installed where there is no cluster: nothing to say of SLURM
            self.asked = False
            return
        except SchedulerError as e:
            self.note = f"{e}; states from the runs' files only"
            return
        for job in sorted(jobs, key=job_number):
            if job.workdir and os.path.realpath(job.workdir) == self.workdir:
                self._by_comment[job.comment] = job  # the newest job of a run and stage wins

    def job(self, spec, stage: str) -> Job | None:
        """The newest job of this run's `stage` (train or evaluate): the controller's, else, for the job the
        stage's log names in its newest attempt, the accounting database's (where the cluster keeps one)."""
        candidates = [self._by_comment.get(c) for c in job_comments(stage, spec)]
        found = max((j for j in candidates if j is not None), key=job_number, default=None)
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


def snakemake_waits(mark: str | None) -> bool | None:
    """Whether the snakemake a lease names (host:pid:start) still runs: None where it cannot be told (another
    machine, or no mark)."""
    try:
        name, pid, start = (mark or "").rsplit(":", 2)
    except ValueError:
        return None
    if name != socket.gethostname() or not pid.isdigit():
        return None
    return bool(start) and str(host.process_start(int(pid))) == start


def live_writer(spec, jobs: Scheduler | None, launched: set[str], state_of=job_state) -> tuple[str, str] | None:
    """(who, how to stop it) for what still writes the run's folder, or None when nothing does: the lease's live
    holder, else the run's newest train job while SLURM has it, else its launcher on this machine."""
    held = lease.read(spec.run_dir)
    if held is not None and (who := lease.holder(held, spec.run_dir, state_of)) is not None:
        return who, f"scancel {held.job}" if held.job else f"kill {held.pid} on {held.host}"
    job = jobs.job(spec, "train") if jobs is not None else None
    if job is not None and job.state in LIVE:
        return f"SLURM job {job.id} ({job.state})", f"scancel {job.id}"
    if os.path.abspath(spec.path(SPEC_FILE)) in launched:
        return "its launcher on this machine", f"stop the process running hwsweep.run.launch {spec.path(SPEC_FILE)}"
    return None


def live_writers(specs, jobs: Scheduler | None = None, launched: set[str] | None = None) -> list[str]:
    """One line per run something still writes (live_writer), saying who and what to do. `launched`: the spec paths
    whose launcher runs on this node (host.launched_specs), where the caller has scanned /proc already."""
    launched, out = host.launched_specs() if launched is None else launched, []
    for spec in specs:
        found = live_writer(spec, jobs, launched)
        if found is not None:
            out.append(f"{spec.run_dir} is still being trained by {found[0]}, which no snakemake waits for; wait "
                       f"for it to end (`snakemake status` shows it) or stop it ({found[1]})")  # fmt: skip
    return out
