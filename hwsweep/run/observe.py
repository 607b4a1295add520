"""What a user's command actually trained, against what the plan says it should.

The command's Python processes report themselves (hwsweep/run/observer/sitecustomize.py, put first on
their PYTHONPATH by the runner): each process that ran a backward pass or stepped an optimizer writes its
process group (rank, world size, backend), device, threads, the samples its first optimizer steps and
backward passes saw, and its counts of both. `observed` turns those files into one summary of the run;
`differences` lists, one phrase each, where it departs from the plan: the number of processes and their
group, their devices, the global batch, the number of optimizer steps; `threads_differ` says where the processes
ran another number of threads than planned (a flag, not a departure: what trained is the same, its timings not). A script without a torch optimizer
(weights updated by hand) is held to the plan through its backward passes: one per micro-batch, so the
plan's steps x accumulation of them, each of the plan's micro-batch. Torch-free: the runner reads files."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

from hwsweep.contracts.command import Trainer

OBSERVER = Path(__file__).resolve().parent / "observer"  # goes first on the command's PYTHONPATH
DIR_ENV, BATCH_DIM_ENV = "HWSWEEP_OBSERVE_DIR", "HWSWEEP_BATCH_DIM"
FOLDER = "observed"  # in the run directory: one file per training process of the latest attempt


def environment(run_dir: Path, trainer: Trainer, env: dict) -> dict:
    """The environment that makes the command's processes report into the run's observation folder."""
    path = [str(OBSERVER), trainer.invocation.workdir, env.get("PYTHONPATH", "")]
    return env | {
        DIR_ENV: str(Path(run_dir, FOLDER).resolve()),
        BATCH_DIM_ENV: "" if trainer.batch_dim is None else str(trainer.batch_dim),
        "PYTHONPATH": ":".join(p for p in path if p),
    }


def reset(run_dir: Path) -> None:
    """An empty observation folder for a new attempt (the reports of an earlier one must not count)."""
    folder = Path(run_dir, FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json*"):
        old.unlink()


def read(run_dir: Path) -> list[dict]:
    """The reports of the processes that trained, in (host, rank, pid) order; unreadable files skipped."""
    out = []
    for path in Path(run_dir, FOLDER).glob("*.json"):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and (report.get("optimizer_steps") or report.get("backward_passes")):
            out.append(report)
    return sorted(out, key=lambda r: ((r.get("process_group") or {}).get("rank", 1 << 30), r.get("host", ""), r.get("pid", 0)))


def _rank(report: dict) -> str:
    """A process's name in the summary: its rank in the process group, else its pid (processes training
    alone may all think they are rank 0)."""
    group = report.get("process_group")
    return str(group["rank"]) if group else f"pid {report.get('pid')}"


def by_hand(reports: list[dict]) -> bool:
    """No process stepped a torch optimizer, but some ran backward passes: the script updates its weights
    itself, and its steps are known from its backward passes."""
    return bool(reports) and not any(r.get("optimizer_steps") for r in reports)


def _per_step(report: dict, key: str = "samples_per_step") -> int | None:
    """A process's samples per optimizer step (or per backward pass): the most common count of its first ones
    (a step the grad scaler skipped folds two steps' samples into one); None when no training forward was seen."""
    counts = [c for c in report.get(key, []) if c]
    if not counts:
        return None
    common = Counter(counts).most_common()
    return min(c for c, n in common if n == common[0][1])


def observed(reports: list[dict]) -> dict:
    """One summary of the processes that trained (what the record keeps)."""
    groups = [r["process_group"] for r in reports if r.get("process_group")]
    sizes = sorted({g["world_size"] for g in groups})
    hand = by_hand(reports)
    per_rank = {_rank(r): _per_step(r) for r in reports}
    if hand:  # no optimizer: a step is read as one backward pass per micro-batch
        per_rank = {_rank(r): _per_step(r, "samples_per_backward") for r in reports}
    summary = {
        "processes": len(reports),
        "process_group": {"world_size": sizes[0] if len(sizes) == 1 else sizes,
                          "backend": groups[0].get("backend"), "ranks": sorted(g["rank"] for g in groups)}
        if groups else None,
        "alone": len(reports) - len(groups),  # processes that trained outside any process group
        "devices": {_rank(r): r.get("device") for r in reports},
        "hosts": sorted({r.get("host") for r in reports}),
        "threads": {_rank(r): r.get("threads") for r in reports},
        "threads_per_process": _one({r.get("threads") for r in reports} - {None}),  # None: the ranks differ
        "samples_per_step": per_rank,
        "optimizer_steps": max((r.get("optimizer_steps", 0) for r in reports), default=0),
        "backward_passes": max((r.get("backward_passes", 0) for r in reports), default=0),
        "global_batch": None,
    }
    if hand:  # what a step is, without an optimizer, is the script's own: per micro-batch only
        summary |= {"samples_per_step": {}, "samples_per_backward": per_rank,
                    "steps_from": "backward passes (no torch optimizer stepped: the script updates its weights itself)"}
        return summary
    if reports and all(v is not None for v in per_rank.values()):
        world = summary["process_group"]["world_size"] if groups and len(sizes) == 1 else len(reports)
        if len(per_rank) == world:
            summary["global_batch"] = sum(per_rank.values())
        elif isinstance(world, int):  # ranks on other nodes wrote elsewhere: assume they took the same share
            summary["global_batch"] = round(statistics.median(per_rank.values()) * world)
            summary["global_batch_from"] = f"{len(per_rank)} of {world} ranks"
    return summary


def _one(values: set):
    return next(iter(values)) if len(values) == 1 else None


def _on(rank: str) -> str:
    return f"rank {rank}" if rank.isdigit() else rank


def threads_differ(summary: dict | None, planned: int | None) -> str | None:
    """Where the processes that trained ran another number of torch threads than `planned` per process (the
    runtime's, or the OMP_NUM_THREADS hwsweep gives a command), one phrase; None where they ran it or either is
    unknown. A script that sets its own threads keeps training the plan, but on other cores than were timed for it."""
    if not summary or planned is None:
        return None
    threads = summary.get("threads") or {}
    other = sorted((r for r, n in threads.items() if n is not None and n != planned), key=lambda r: (len(r), r))
    if not other:
        return None
    more = f" and {len(other) - 1} more" if len(other) > 1 else ""
    return (f"planned {planned} thread{'s' if planned != 1 else ''} per process, observed {threads[other[0]]} on "
            f"{_on(other[0])}{more}")  # fmt: skip


def differences(summary: dict, plan, steps: int | None) -> list[str]:
    """Where what trained departs from the plan, one phrase each; empty when it follows it. `steps`: the
    optimizer steps this attempt should make (None after a resume, when the script's start is its own)."""
    n, group, out = summary["processes"], summary["process_group"], []
    if n == 0:
        return []  # nothing to compare: the caller says so (not_observed)
    planned = f"planned {plan.world_size} process{'es' if plan.world_size > 1 else ''}"
    if group is None:
        if plan.world_size > 1:
            out.append(f"{planned} in one process group, observed {n} training alone (no torch.distributed process group)")
        elif n > 1:
            out.append(f"{planned}, observed {n} processes training")
    else:
        if summary["alone"]:
            out.append(f"{summary['alone']} of {n} training processes outside the process group")
        if group["world_size"] != plan.world_size:
            out.append(f"{planned}, observed a process group of world size {group['world_size']}")
    kinds = {r: (d or "").split(":")[0] for r, d in summary["devices"].items()}
    wrong = sorted(r for r, kind in kinds.items() if kind and kind != plan.accelerator)
    if wrong:
        out.append(f"planned {plan.accelerator}, observed {summary['devices'][wrong[0]]} on {_on(wrong[0])}"
                   + (f" and {len(wrong) - 1} more" if len(wrong) > 1 else ""))  # fmt: skip
    if len(summary["hosts"]) == 1:
        shared = [d for d, k in Counter(summary["devices"].values()).items() if k > 1 and d and d.startswith("cuda")]
        if shared:
            out.append(f"{Counter(summary['devices'].values())[shared[0]]} ranks share {shared[0]}")
    if "samples_per_backward" in summary:
        return out + _by_hand_differences(summary, plan, steps)
    batch = summary["global_batch"]
    if batch is not None and batch != plan.global_batch:
        shares = sorted({v for v in summary["samples_per_step"].values()})
        each = f"{shares[0]} samples per step on each of {n} processes" if len(shares) == 1 else f"samples per step {shares}"
        out.append(f"planned global batch {plan.global_batch}, observed {batch} ({each})")
    # Scripts that loop `while step <= max_steps` make one step more: off by one is the script's own habit.
    if steps is not None and abs(summary["optimizer_steps"] - steps) > 1:
        out.append(f"planned {steps} optimizer steps, observed {summary['optimizer_steps']}")
    return out


def _by_hand_differences(summary: dict, plan, steps: int | None) -> list[str]:
    """A script without a torch optimizer against the plan: one backward pass per micro-batch, so each process
    runs steps x accumulation of them, each on the plan's micro-batch."""
    out, how = [], "no torch optimizer: steps read from backward passes"
    seen = sorted({v for v in summary["samples_per_backward"].values() if v is not None})
    if seen and seen != [plan.micro_batch]:
        shown = f"{seen[0]} samples" if len(seen) == 1 else f"samples {seen}"
        out.append(f"planned micro-batch {plan.micro_batch}, observed {shown} per backward pass ({how})")
    if steps is not None:
        planned, passes = steps * plan.accumulation, summary["backward_passes"]
        per = f"{steps} steps x {plan.accumulation} micro-batches" if plan.accumulation > 1 else f"{steps} steps"
        if abs(passes - planned) > plan.accumulation:  # a loop `while step <= max_steps` makes one step more
            out.append(f"planned {per} = {planned} backward passes, observed {passes} ({how})")
    return out
