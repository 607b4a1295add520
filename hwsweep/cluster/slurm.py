"""Ask the SLURM scheduler what its nodes have and use right now: one `sinfo` call, parsed into Node records
(run as every SLURM client command is: hwsweep.contracts.scheduler).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

from hwsweep.contracts.scheduler import TIMEOUT_S, SchedulerError, int_prefix, rows, run  # noqa: F401 - re-exported

FIELDS = ("NodeList", "Partition", "StateLong", "CPUsState", "Memory", "AllocMem", "Gres", "GresUsed", "Reason")
# One line per node and partition; each field unpadded and ended by '|'; Reason last (it may hold '|').
SINFO = ["sinfo", "--noheader", "--Node", "--Format=" + ",".join(f"{name}:|" for name in FIELDS)]
# States in which a node takes no new jobs (sinfo's long names, flag characters stripped).
UNAVAILABLE = {"down", "drained", "draining", "fail", "failing", "maint", "reboot_issued", "reboot_requested",
               "inval", "future", "unknown", "power_down", "powering_down", "reserved", "blocked"}  # fmt: skip
STATE_FLAGS = "*~#%$@!^-+"


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


def parse_sinfo(text: str) -> list[Node]:
    """Node records from the output of SINFO."""
    nodes = []
    for name, partition, state, cpus, memory, alloc_mem, gres, gres_used, reason in rows(text, FIELDS, "sinfo"):
        cpu_counts = [int_prefix(c) for c in cpus.split("/")] + [0, 0, 0, 0]  # allocated/idle/other/total
        nodes.append(Node(
            name=name, partition=partition.rstrip("*"), default_partition=partition.endswith("*"), state=state,
            cpus=cpu_counts[3], cpus_idle=cpu_counts[1], memory_mb=int_prefix(memory),
            memory_free_mb=max(int_prefix(memory) - int_prefix(alloc_mem), 0), gpus=parse_gres(gres),
            gpus_used=parse_gres(gres_used), reason="" if reason in ("none", "(null)") else reason,
        ))  # fmt: skip
    return nodes


def run_sinfo(timeout: float = TIMEOUT_S) -> str:
    return run(SINFO, timeout)


STATUS_CHECK_WAIT_S = 20  # the profile's slurm-init-seconds-before-status-checks


def short_job_age(timeout: float = TIMEOUT_S) -> int | None:
    """The controller's MinJobAge in seconds where it is under 3x the profile's wait before status checks (then
    snakemake's slurm executor asks sacct instead of squeue); None where it is longer or cannot be read."""
    try:
        proc = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^MinJobAge\s*=\s*(\d+)", proc.stdout, re.M)
    age = int(found.group(1)) if proc.returncode == 0 and found else None
    return age if age is not None and age < 3 * STATUS_CHECK_WAIT_S else None


def read_nodes(timeout: float = TIMEOUT_S) -> list[Node]:
    """Every node of every partition as the scheduler sees it now; SchedulerError (one line) if it cannot be asked."""
    return parse_sinfo(run_sinfo(timeout))


def partitions(nodes: list[Node]) -> dict[str, list[Node]]:
    """Nodes by partition, in sinfo's order."""
    out: dict[str, list[Node]] = {}
    for node in nodes:
        out.setdefault(node.partition, []).append(node)
    return out
