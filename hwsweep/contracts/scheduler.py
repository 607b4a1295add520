"""The SLURM client as hwsweep runs it, and what it says of jobs: each command is a fixed argument vector run
with a short timeout, so a client whose controller does not answer fails in seconds with one line instead of
retrying for the client's MessageTimeout (SLURM_CONF and the rest of the environment pass through untouched);
this user's jobs from one `squeue` call, or `sacct` for jobs the controller has forgotten, and one job's state
from `scontrol`. Read by status (where each run's job is) and by a train job deciding whether to requeue itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

TIMEOUT_S = 4.0
# SLURM's states of a job, as status and the run's lease read them: waiting to run (again), running, ended badly.
WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESV_DEL_HOLD",
           "PREEMPTED"}  # fmt: skip
ACTIVE = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}
LIVE = WAITING | ACTIVE  # a job that may still write its run's folder
ENDED_BADLY = {"FAILED", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "TIMEOUT"}
FORGOTTEN = "Invalid job id"  # scontrol's words for a job the controller no longer knows (it ended)


class SchedulerError(RuntimeError):
    """One line saying why the scheduler could not be read, and what to do."""


class NoCluster(SchedulerError):
    """A SLURM client with no cluster to ask (no slurm.conf, no configless controller): this machine is no
    cluster's, and status says nothing of SLURM."""


# What a SLURM client says where it has no configuration at all (a package installed on a laptop or a CI image).
NO_CONFIG = ("Could not establish a configuration source", "Unable to establish a configuration source")


def int_prefix(text: str) -> int:
    """The number a field starts with (0 if none): '16', '4000+', '2(S:0-1)'."""
    digits = re.match(r"\d+", text.strip())
    return int(digits.group()) if digits else 0


def rows(text: str, fields: tuple[str, ...], command: str) -> list[list[str]]:
    """The values of each line of a `--Format=name:|,...` listing (each field ended by '|', the last may hold
    '|'), stripped; SchedulerError (one line) for a line that has fewer."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.removesuffix("|").split("|", len(fields) - 1)
        if len(values) < len(fields):
            raise SchedulerError(f"{command} printed an unexpected line: {line[:80]!r}; is this a SLURM {command} "
                                 "(>= 20.11)?")  # fmt: skip
        out.append([v.strip() for v in values])
    return out


def run(cmd: list[str], timeout: float = TIMEOUT_S) -> str:
    """The output of a SLURM client command; SchedulerError (one line) when it is missing, the controller does
    not answer in time, or it fails."""
    if shutil.which(cmd[0]) is None:
        raise NoCluster(f"no SLURM client: {cmd[0]} is not on PATH; run this on a cluster login node")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SchedulerError(
            f"no answer from the SLURM controller within {timeout:g} s ({cmd[0]}); "
            "check that slurmctld is up and that SLURM_CONF (or /etc/slurm/slurm.conf) names it"
        ) from None
    if proc.returncode != 0:
        last = ((proc.stderr.strip() or proc.stdout.strip()).splitlines() or [f"exit status {proc.returncode}"])[-1]
        if any(words in proc.stderr for words in NO_CONFIG):
            raise NoCluster(f"{cmd[0]} finds no SLURM configuration here: {last}")
        raise SchedulerError(f"{cmd[0]} failed: {last}")
    return proc.stdout


# -- jobs -----------------------------------------------------------------------------------------------------------
JOB_FIELDS = ("JobID", "State", "Reason", "NodeList", "RestartCnt", "exit_code", "TimeUsed", "Comment", "WorkDir")
# This user's jobs the controller knows (pending, running, and finished ones for MinJobAge); WorkDir last (a path).
SQUEUE = ["squeue", "--noheader", "--me", "--states=all", "--Format=" + ",".join(f"{name}:|" for name in JOB_FIELDS)]
SACCT_FIELDS = ("JobIDRaw", "State", "ExitCode", "NodeList", "Elapsed", "WorkDir")


@dataclass(frozen=True)
class Job:
    id: str
    state: str  # SLURM's long state: PENDING, RUNNING, REQUEUED, FAILED, TIMEOUT, ...
    reason: str = ""  # why it pends (Resources, Priority, BeginTime, JobHeldUser, ...) or how it ended
    nodes: str = ""
    restarts: int = 0  # requeues so far (preemption, or hwsweep's requeue after a checkpointed stop)
    exit_code: str = ""  # status:signal
    elapsed: str = ""
    comment: str = ""  # snakemake's slurm executor: rule_<rule>_wildcards_<values joined by _>
    workdir: str = ""


def _exit_code(raw: str) -> str:
    """squeue's exit_code is the wait status (256: exit 1); as sacct and scontrol write it: status:signal."""
    if not raw.isdigit():
        return raw
    status = int(raw)
    return f"{status >> 8}:{status & 0x7F}"


def parse_squeue(text: str) -> list[Job]:
    """Job records from the output of SQUEUE."""
    jobs = []
    for job, state, reason, nodes, restarts, code, used, comment, workdir in rows(text, JOB_FIELDS, "squeue"):
        jobs.append(Job(id=job, state=state.split()[0] if state else "",
                        reason="" if reason in ("None", "(null)") else reason, nodes="" if nodes == "(null)" else nodes,
                        restarts=int_prefix(restarts), exit_code=_exit_code(code), elapsed=used, comment=comment,
                        workdir=workdir))  # fmt: skip
    return jobs


def parse_sacct(text: str) -> list[Job]:
    """Job records from `sacct --parsable2 --duplicates` with SACCT_FIELDS: one per job, its newest record (sacct
    lists a job's records oldest first), with the records before it counted as its restarts (each requeue, by
    preemption or by hwsweep after a checkpointed stop, ends one record REQUEUED or PREEMPTED)."""
    jobs: dict[str, Job] = {}
    for line in text.splitlines():
        values = line.split("|", len(SACCT_FIELDS) - 1)
        if len(values) < len(SACCT_FIELDS) or not values[0].isdigit():
            continue
        job, state, code, nodes, elapsed, workdir = values
        earlier = jobs.pop(job, None)
        # "CANCELLED by 0": the state, then who
        jobs[job] = Job(id=job, state=state.split()[0], reason=" ".join(state.split()[1:]),
                        nodes="" if nodes in ("None assigned", "(null)") else nodes,
                        restarts=0 if earlier is None else earlier.restarts + 1, exit_code=code, elapsed=elapsed,
                        workdir=workdir)  # fmt: skip
    return list(jobs.values())


def job_comment(rule: str, spec) -> str:
    """The comment snakemake's slurm executor gives a job of `rule` for this run: rule_<rule>_wildcards_ and the
    wildcard values in the order of the rule's output path (suite, variant, hardware, seed) joined by _."""
    values = [spec.suite, spec.variant, spec.hardware_name, str(spec.seed)]
    return f"rule_{rule}_wildcards_" + "_".join(values).replace("/", "_")


def job_comments(stage: str, spec) -> list[str]:
    """Every comment a job doing this run's `stage` (train or evaluate) may carry: its rule's job, or the run's
    group job (workflow/rules/allocation.smk: train and evaluate in one allocation; rule_<group>_<its rules>)."""
    group = f"rule_run_{spec.suite}_{spec.variant}_{spec.hardware_name}_seed{spec.seed}"
    return [job_comment(stage, spec), f"{group}_evaluate_train", f"{group}_{stage}"]


def job_number(job: Job) -> int:
    return int(job.id) if job.id.isdigit() else -1


def job_state(job_id: str, timeout: float = TIMEOUT_S) -> str:
    """SLURM's state of one job now (RUNNING, CANCELLED, PREEMPTED, ...); SchedulerError if it cannot be asked."""
    found = re.search(r"\bJobState=(\S+)", run(["scontrol", "show", "job", "-o", job_id], timeout))
    if not found:
        raise SchedulerError(f"scontrol show job {job_id} printed no JobState")
    return found.group(1)


def my_jobs(timeout: float = TIMEOUT_S) -> list[Job]:
    """This user's jobs as the controller knows them now; SchedulerError (one line) if it cannot be asked."""
    return parse_squeue(run(SQUEUE, timeout))


def accounted_jobs(ids: list[str], timeout: float = TIMEOUT_S) -> list[Job]:
    """Jobs from the accounting database (sacct), for those the controller has forgotten; SchedulerError where
    the cluster keeps no accounting."""
    if not ids:
        return []
    cmd = ["sacct", "--noheader", "--parsable2", "-X", "--duplicates", "--jobs", ",".join(ids), "--format",
           ",".join(SACCT_FIELDS)]  # fmt: skip
    return parse_sacct(run(cmd, timeout))
