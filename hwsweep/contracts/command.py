"""The command contract: how the plan reaches a user's own script, and what comes back.

A script is started as an argument vector (never a shell string): the configured command,
then one flag per entry of `args` (script flag -> plan value), then the recipe's `args`
(the suite's own settings for the script), then the resume arguments when a checkpoint of
the run already exists. Its metrics come from its output (regular expressions) or from a
JSON-lines file it writes. Torch-free."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hwsweep.contracts.typed import Typed

ARG_STYLES = ("--k=v", "--k v", "k=v")
# Value-map targets that turn a plan value into a bare flag, or into nothing (store_true flags).
FLAG, OMIT = "@flag", "@omit"
SIGNALS = ("TERM", "USR2", "INT", "USR1")
PYTHON_NAMES = ("python", "python3")

# Every value a script's flag may take from the plan, with what it means. One place: the
# config checks names against it, the docs list it, `plan_values` computes it.
PLAN_VALUES = {
    "micro_batch": "samples per forward/backward on one device",
    "accumulation": "micro-batches per optimizer step on one device",
    "micro_batches_per_step": "micro-batches per optimizer step over all devices (world_size x accumulation)",
    "per_device_batch": "samples per optimizer step on one device (micro_batch x accumulation)",
    "global_batch": "samples per optimizer step over all devices",
    "world_size": "processes (devices) in the run",
    "nodes": "nodes in the run",
    "devices_per_node": "processes (devices) per node",
    "steps": "optimizer steps to train",
    "warmup_steps": "learning-rate warmup steps",
    "lr": "peak learning rate (scaled when batch_policy is grow)",
    "seed": "the run's seed",
    "precision": "fp32 | bf16-mixed | fp16-mixed",
    "tf32": "true | false",
    "reproducibility": "comparable | deterministic | strict",
    "deterministic": "true unless reproducibility is comparable",
    "num_workers": "data-loader worker processes (locked across hardware)",
    "compile": "true | false: recipe.compile (torch.compile the model)",
    "device": "cpu | cuda",
    "run_dir": "the run's directory, absolute: write checkpoints and outputs here",
}


@dataclass(frozen=True)
class Invocation(Typed):
    """A user's command and how the plan becomes its arguments."""

    command: list  # argument vector; the program is resolved against workdir, then PATH
    workdir: str  # absolute
    arg_style: str
    args: dict  # script flag -> plan value name
    values: dict  # plan value name -> {rendered plan value: what the script wants}
    metrics_file: str | None  # JSON-lines file relative to the run directory; None: parse the output
    step_pattern: str


@dataclass(frozen=True)
class Trainer(Typed):
    kind: str  # builtin | command
    invocation: Invocation | None = None
    launch: str = "torchrun"  # torchrun: the plan's nodes x devices; plain: the script starts its workers
    resume_when: str | None = None  # a file (glob) in the run directory that means "resumable"
    resume_args: list = field(default_factory=list)
    signal: str = "TERM"  # what the script wants on preemption
    plan_check: dict = field(default_factory=dict)  # plan value -> regex of where the script logs it

    @property
    def seeded(self) -> bool:
        return self.kind == "builtin" or "seed" in self.invocation.args.values()


@dataclass(frozen=True)
class Evaluation(Typed):
    kind: str  # builtin | command | none
    invocation: Invocation | None = None


def render(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def plan_values(spec) -> dict:
    plan = spec.plan
    return {
        "micro_batch": plan.micro_batch,
        "accumulation": plan.accumulation,
        "micro_batches_per_step": plan.world_size * plan.accumulation,
        "per_device_batch": plan.micro_batch * plan.accumulation,
        "global_batch": plan.global_batch,
        "world_size": plan.world_size,
        "nodes": plan.nodes,
        "devices_per_node": plan.devices_per_node,
        "steps": plan.steps,
        "warmup_steps": plan.warmup_steps,
        "lr": plan.lr,
        "seed": spec.seed,
        "precision": plan.precision,
        "tf32": plan.tf32,
        "reproducibility": plan.reproducibility,
        "deterministic": plan.reproducibility != "comparable",
        "num_workers": spec.recipe.num_workers,
        "compile": spec.recipe.compile,
        "device": plan.accelerator,
        "run_dir": str(Path(spec.run_dir).resolve()),
    }


def _flag(style: str, name: str, value: str | None) -> list[str]:
    if value == OMIT:
        return []
    prefix = "" if style == "k=v" else "--"
    if value == FLAG:
        return [f"{prefix}{name}"]
    return [f"{prefix}{name}", value] if style == "--k v" else [f"{prefix}{name}={value}"]


def arguments(inv: Invocation, values: dict, script_args: dict) -> list[str]:
    """The flags after the command: mapped plan values, then the recipe's script args."""
    out = []
    for flag, source in inv.args.items():
        text = render(values[source])
        out += _flag(inv.arg_style, flag, inv.values.get(source, {}).get(text, text))
    for flag, value in script_args.items():
        out += _flag(inv.arg_style, flag, render(value))
    return out


def command_argv(spec, inv: Invocation) -> list[str]:
    """The whole argument vector of a stage's command for this run (program resolved)."""
    program = resolve_program(inv.command[0], inv.workdir)
    if program is None:
        raise SystemExit(f"hwsweep: {inv.command[0]!r} is not an executable program in {inv.workdir} or on PATH")
    return [program, *inv.command[1:], *arguments(inv, plan_values(spec), spec.recipe.args)]


def resolve_program(program: str, workdir: str) -> str | None:
    """The executable a command starts: python is the interpreter running hwsweep (so a job
    runs in the environment snakemake runs in); a path is taken relative to workdir; a bare
    name is looked up on PATH."""
    if program in PYTHON_NAMES:
        return sys.executable
    if "/" in program:
        path = Path(workdir, program)
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program)


def script_provenance(inv: Invocation) -> dict:
    """What code ran: the script file's hash (the first existing file argument) and the
    workdir's git commit, so a changed script is visible in the record."""
    from hwsweep.contracts.host import git

    out = {"command": list(inv.command), "workdir": inv.workdir, "git_commit": git(inv.workdir, "rev-parse", "HEAD")}
    for part in inv.command:
        path = Path(inv.workdir, part)
        if path.is_file():
            out["path"] = str(path)
            out["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
            break
    return out
