"""Ask the SLURM scheduler what its nodes have and use right now (one `sinfo` call, parsed into Node records)
and where this user's jobs are (one `squeue` call, or `sacct` for jobs the controller has forgotten, into Job
records).

Each command is a fixed argument vector run with a short timeout: a client whose controller does
not answer fails in seconds with one line, instead of retrying for the client's MessageTimeout.
SLURM_CONF and the rest of the environment are passed through untouched.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

TIMEOUT_S = 4.0
FIELDS = ("NodeList", "Partition", "StateLong", "CPUsState", "Memory", "AllocMem", "Gres", "GresUsed", "Reason")
# One line per node and partition; each field unpadded and ended by '|'; Reason last (it may hold '|').
SINFO = ["sinfo", "--noheader", "--Node", "--Format=" + ",".join(f"{name}:|" for name in FIELDS)]
# States in which a node takes no new jobs (sinfo's long names, flag characters stripped).
UNAVAILABLE = {"down", "drained", "draining", "fail", "failing", "maint", "reboot_issued", "reboot_requested",
               "inval", "future", "unknown", "power_down", "powering_down", "reserved", "blocked"}  # fmt: skip
STATE_FLAGS = "*~#%$@!^-+"


class SchedulerError(RuntimeError):
    """One line saying why the scheduler could not be read, and what to do."""


@dataclass(frozen=True)
class Node:
    name: str
    partition: str
    default_partition: bool
    state: str
    cpus: int
    cpus_idle: int
    memory_mb: int
    memory_free_mb: int
    gpus: dict[str, int] = field(default_factory=dict)  # GPU type ('' when untyped) -> count
    gpus_used: dict[str, int] = field(default_factory=dict)
    reason: str = ""

    @property
    def available(self) -> bool:
        """Takes new jobs: not down, drained, draining, failed, in maintenance or not responding."""
        return self.state.rstrip(STATE_FLAGS) not in UNAVAILABLE and "*" not in self.state

    def gpus_free(self, kind: str) -> int:
        return self.gpus.get(kind, 0) - self.gpus_used.get(kind, 0) if self.available else 0


def parse_gres(text: str) -> dict[str, int]:
    """GPU counts by type from a GRES string: 'gpu:h100:4(S:0-1),shard:8' -> {'h100': 4}; 'gpu:2' -> {'': 2}."""
    out: dict[str, int] = {}
    for item in re.split(r",(?![^(]*\))", text or ""):
        parts = item.split("(")[0].strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2 or not parts[-1].isdigit():
            continue
        kind = ":".join(parts[1:-1])
        out[kind] = out.get(kind, 0) + int(parts[-1])
    return out


def _int(text: str) -> int:
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


def parse_sinfo(text: str) -> list[Node]:
    """Node records from the output of SINFO."""
    nodes = []
    for name, partition, state, cpus, memory, alloc_mem, gres, gres_used, reason in rows(text, FIELDS, "sinfo"):
        cpu_counts = [_int(c) for c in cpus.split("/")] + [0, 0, 0, 0]  # allocated/idle/other/total
        nodes.append(Node(
            name=name, partition=partition.rstrip("*"), default_partition=partition.endswith("*"), state=state,
            cpus=cpu_counts[3], cpus_idle=cpu_counts[1], memory_mb=_int(memory),
            memory_free_mb=max(_int(memory) - _int(alloc_mem), 0), gpus=parse_gres(gres),
            gpus_used=parse_gres(gres_used), reason="" if reason in ("none", "(null)") else reason,
        ))  # fmt: skip
    return nodes


def run(cmd: list[str], timeout: float = TIMEOUT_S) -> str:
    """The output of a SLURM client command; SchedulerError (one line) when it is missing, the controller does
    not answer in time, or it fails."""
    if shutil.which(cmd[0]) is None:
        raise SchedulerError(f"no SLURM client: {cmd[0]} is not on PATH; run this on a cluster login node")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SchedulerError(
            f"no answer from the SLURM controller within {timeout:g} s ({cmd[0]}); "
            "check that slurmctld is up and that SLURM_CONF (or /etc/slurm/slurm.conf) names it"
        ) from None
    if proc.returncode != 0:
        last = ((proc.stderr.strip() or proc.stdout.strip()).splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise SchedulerError(f"{cmd[0]} failed: {last}")
    return proc.stdout


def run_sinfo(timeout: float = TIMEOUT_S) -> str:
    return run(SINFO, timeout)


def status_command(timeout: float = TIMEOUT_S) -> str:
    """How snakemake's slurm executor should ask for job states: sacct where the controller keeps accounting
    (it says why a job failed), squeue otherwise (sacct has nothing to answer without slurmdbd)."""
    try:
        proc = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return "squeue"
    storage = re.search(r"^AccountingStorageType\s*=\s*(\S+)", proc.stdout, re.M)
    usable = proc.returncode == 0 and storage and storage.group(1) != "accounting_storage/none"
    return "sacct" if usable and shutil.which("sacct") else "squeue"


def read_nodes(timeout: float = TIMEOUT_S) -> list[Node]:
    """Every node of every partition as the scheduler sees it now; SchedulerError (one line) if it cannot be asked."""
    return parse_sinfo(run_sinfo(timeout))


def partitions(nodes: list[Node]) -> dict[str, list[Node]]:
    """Nodes by partition, in sinfo's order."""
    out: dict[str, list[Node]] = {}
    for node in nodes:
        out.setdefault(node.partition, []).append(node)
    return out


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
                        restarts=_int(restarts), exit_code=_exit_code(code), elapsed=used, comment=comment,
                        workdir=workdir))  # fmt: skip
    return jobs


def parse_sacct(text: str) -> list[Job]:
    """Job records from `sacct --parsable2` with SACCT_FIELDS (the newest record of a requeued job last)."""
    jobs = []
    for line in text.splitlines():
        values = line.split("|", len(SACCT_FIELDS) - 1)
        if len(values) < len(SACCT_FIELDS) or not values[0].isdigit():
            continue
        job, state, code, nodes, elapsed, workdir = values
        # "CANCELLED by 0": the state, then who
        jobs.append(Job(id=job, state=state.split()[0], reason=" ".join(state.split()[1:]),
                        nodes="" if nodes in ("None assigned", "(null)") else nodes, exit_code=code, elapsed=elapsed,
                        workdir=workdir))  # fmt: skip
    return jobs


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
    cmd = ["sacct", "--noheader", "--parsable2", "-X", "--jobs", ",".join(ids), "--format", ",".join(SACCT_FIELDS)]
    return parse_sacct(run(cmd, timeout))
