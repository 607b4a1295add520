"""The command contract: how the plan reaches a user's own script, and what comes back.

A script is started as an argument vector (never a shell string): the configured command,
then one flag per entry of `args` (script flag -> plan value), then the recipe's `args`
(the suite's own settings for the script), then the resume arguments when a checkpoint of
the run already exists. Its metrics come from its output (regular expressions) or from a
JSON-lines file it writes. Torch-free."""

from __future__ import annotations

import ast
import hashlib
import operator
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hwsweep.contracts.typed import OMITTED_EMPTY, ORDERED, Typed

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
    "weight_decay": "AdamW weight decay (recipe.optimizer.weight_decay)",
    "beta1": "AdamW beta1 (recipe.optimizer.beta1)",
    "beta2": "AdamW beta2 (recipe.optimizer.beta2)",
    "grad_clip": "gradient-norm clip, 0 for none (recipe.optimizer.grad_clip)",
    "min_lr": "learning rate at the end of the decay: lr x recipe.schedule.min_lr_ratio",
    "min_lr_ratio": "recipe.schedule.min_lr_ratio",
    "num_workers": "data-loader worker processes (locked across hardware)",
    "compile": "true | false: recipe.compile (torch.compile the model)",
    "strategy": "ddp | fsdp | hsdp: recipe.parallel.strategy (how the model is spread over the devices)",
    "fsdp": "true | false: whether recipe.parallel.strategy shards the model, fsdp or hsdp (a script's own --fsdp switch)",
    "reshard_after_forward": "true | false: recipe.parallel.reshard_after_forward",
    "activation_checkpointing": "none | full | selective: recipe.activation_checkpointing",
    "optimizer": "adamw | adam_atan2 | sgd: recipe.optimizer.name (for a script that can choose its optimizer)",
    "device": "cpu | cuda",
    "run_dir": "the run's directory, absolute: write checkpoints and outputs here",
}
# Recipe settings a script only follows through a flag (plan value -> recipe key): unmapped, they are recorded as
# not passed (the script used its own). Two plan values carry the decay's end (min_lr, min_lr_ratio).
RECIPE_VALUES = {
    "lr": "optimizer.lr", "weight_decay": "optimizer.weight_decay", "beta1": "optimizer.beta1",
    "beta2": "optimizer.beta2", "grad_clip": "optimizer.grad_clip", "optimizer": "optimizer.name",
    "warmup_steps": "schedule.warmup_steps", "min_lr": "schedule.min_lr_ratio", "min_lr_ratio": "schedule.min_lr_ratio",
    "precision": "precision",
}
# Those a script's own value in recipe.args, under the plan value's name, stands for on record (lr: 20); the
# precision is a lock across hardware (docs/own_script.md): a flag passes it, or it is not passed.
OWN_VALUES = tuple(v for v in RECIPE_VALUES if v != "precision")
# Plan values that carry the per-device batch to a script, beside micro_batch (with which accumulation and
# micro_batches_per_step make it); a script that gets micro_batch alone accumulates by its own default.
BATCH_CARRIERS = ("accumulation", "micro_batches_per_step", "per_device_batch", "global_batch")
DEVICE_COUNTS = ("world_size", "devices_per_node")  # what tells a plain-launched script how many workers to start
LAUNCHES = ("auto", "torchrun", "plain")
# The threads of a process, as snakemake sets them for a job (its whole count): hwsweep sets each to the threads per
# process, as torch reads MKL_NUM_THREADS over OMP_NUM_THREADS (a job's 2 would run each of 2 processes on 2 threads).
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
              "NUMEXPR_NUM_THREADS")  # fmt: skip
# Variables hwsweep and torchrun set for a command's processes: trainer.env may not set them (the run depends on
# them); names starting with one of ENV_PREFIXES are theirs too.
RESERVED_ENV = ("PYTHONPATH", "PYTHONUNBUFFERED", *THREAD_ENV, "RANK", "LOCAL_RANK", "WORLD_SIZE",
                "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
                "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES")  # fmt: skip
ENV_PREFIXES = ("HWSWEEP_", "TORCHELASTIC_", "PET_", "SLURM_")


def env_problem(name: str) -> str | None:
    """Why trainer.env may not set `name` (a phrase with the fix), or None."""
    if name in RESERVED_ENV or name.startswith(ENV_PREFIXES):
        return ("is set by hwsweep or torchrun for every process of the run; remove it (trainer.env may not set "
                f"{', '.join(RESERVED_ENV)} or names starting with {', '.join(ENV_PREFIXES)})")  # fmt: skip
    return None


@dataclass(frozen=True)
class Invocation(Typed):
    """A user's command and how the plan becomes its arguments."""

    command: list  # argument vector; the program is resolved against workdir, then PATH
    workdir: str  # absolute
    arg_style: str
    args: dict = field(metadata=ORDERED)  # script flag -> plan value name, passed in this order
    values: dict  # plan value name, or script flag -> {rendered plan value: what the script wants}
    metrics_file: str | None  # JSON-lines file relative to the run directory; None: parse the output
    step_pattern: str


@dataclass(frozen=True)
class Trainer(Typed):
    kind: str  # builtin | command
    invocation: Invocation | None = None
    # auto: torchrun where the plan has several processes, else one plain process; torchrun: always the
    # plan's nodes x devices; plain: one process that starts its own workers.
    launch: str = "auto"
    resume_when: str | None = None  # a file (glob) in the run directory that means "resumable"
    resume_args: list = field(default_factory=list)
    signal: str = "TERM"  # what the script wants on preemption
    # name -> {"pattern": regex with one group, "equals": arithmetic over plan values and args.<flag>}
    plan_check: dict = field(default_factory=dict)
    cwd: str = "run_dir"  # where the command runs: run_dir (each run its own folder) or workdir
    observe: str = "fail"  # what ran differs from the plan: fail the run, flag it, or off
    batch_dim: int | None = 0  # the dimension of a model input that counts samples; None: batch not observed
    env: dict = field(default_factory=dict, metadata=OMITTED_EMPTY)  # variables for the script's processes

    @property
    def seeded(self) -> bool:
        return self.kind == "builtin" or "seed" in self.invocation.args.values()

    def launcher(self, world_size: int) -> str:
        """torchrun or plain: how this trainer starts a run of `world_size` processes."""
        if self.launch == "auto":
            return "torchrun" if world_size > 1 else "plain"
        return self.launch


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
        "weight_decay": spec.recipe.optimizer.weight_decay,
        "beta1": spec.recipe.optimizer.beta1,
        "beta2": spec.recipe.optimizer.beta2,
        "grad_clip": spec.recipe.optimizer.grad_clip,
        "min_lr": plan.lr * spec.recipe.schedule.min_lr_ratio,
        "min_lr_ratio": spec.recipe.schedule.min_lr_ratio,
        "num_workers": spec.recipe.num_workers,
        "compile": spec.recipe.compile,
        "strategy": spec.recipe.parallel.strategy,
        "fsdp": spec.recipe.parallel.sharded,
        "reshard_after_forward": spec.recipe.parallel.reshard_after_forward,
        "activation_checkpointing": spec.recipe.activation_checkpointing,
        "optimizer": spec.recipe.optimizer.name,
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
        names = inv.values.get(flag, inv.values.get(source, {}))  # a flag's own map first: --backend follows device
        out += _flag(inv.arg_style, flag, names.get(text, text))
    for flag, value in script_args.items():
        out += _flag(inv.arg_style, flag, render(value))
    return out


def args_values(trainer: Trainer, script_args: dict) -> dict:
    """Recipe settings a script takes from recipe.args instead of the plan: a recipe.args flag named after one of
    RECIPE_VALUES that trainer.args does not pass (`lr: 20` for a script whose --lr gets no plan value). The run's
    record holds these values in the recipe's place. (The plan's locks, steps or batch, are never replaced: the
    observer holds the script to them.) The built-in trainer (no invocation) reads its recipe itself: none."""
    if trainer.invocation is None:
        return {}
    mapped = set(trainer.invocation.args.values())
    return {name: value for name, value in script_args.items() if name in OWN_VALUES and name not in mapped}


def as_passed(spec, spec_dict: dict | None = None) -> tuple[dict, dict]:
    """The plan and the spec (a RunSpec) as the script got them: a value it took from recipe.args in place of
    the plan's (args_values) is the one on record, in the plan and in the recipe's optimizer. The record's spec
    is this, so whoever checks a record against the config of now compares with this too. `spec_dict`: the spec
    as plain data where the caller has it (a fresh copy: it is changed), else spec.to_dict()."""
    given = args_values(spec.trainer, spec.recipe.args)
    plan = spec.plan.__dict__ | {k: v for k, v in given.items() if k in spec.plan.__dict__}
    spec_dict = spec.to_dict() if spec_dict is None else spec_dict
    for name, value in given.items():  # in the recipe's key for it: optimizer.lr, schedule.warmup_steps, optimizer.name
        if name != "min_lr":  # an absolute learning rate, where the recipe holds a ratio: in the plan's place only
            section, key = RECIPE_VALUES[name].split(".")
            spec_dict["recipe"][section][key] = value
    return plan, spec_dict


def not_passed(trainer: Trainer, script_args: dict) -> list[str]:
    """The recipe settings (RECIPE_VALUES) that reach the script neither by trainer.args nor by recipe.args: the
    script used its own values for them."""
    passed = set(trainer.invocation.args.values()) | set(args_values(trainer, script_args))
    keys = {key: None for key in RECIPE_VALUES.values()}  # in order, once each
    return [f"recipe.{key}" for key in keys if not any(RECIPE_VALUES[v] == key for v in passed if v in RECIPE_VALUES)]


def plan_value(recipe_key: str) -> str:
    """The plan value that would pass a recipe setting of not_passed (recipe.optimizer.name: optimizer), as
    trainer.args maps it: the name `hwsweep plan`'s not_passed column and the report's method text give it."""
    return next(value for value, key in RECIPE_VALUES.items() if f"recipe.{key}" == recipe_key)


def command_argv(spec, inv: Invocation) -> list[str]:
    """The whole argument vector of a stage's command for this run (program resolved)."""
    program = resolve_program(inv.command[0], inv.workdir)
    if program is None:
        raise SystemExit(f"hwsweep: {inv.command[0]!r} is not an executable program in {inv.workdir} or on PATH")
    # Files the command names are given by their full path, so it runs from any working folder (trainer.cwd).
    named = [str(Path(inv.workdir, part)) if not Path(part).is_absolute() and Path(inv.workdir, part).is_file() else part
             for part in inv.command[1:]]  # fmt: skip
    return [program, *named, *arguments(inv, plan_values(spec), spec.recipe.args)]


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


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.USub: operator.neg}


def expression_value(expression: str, values: dict, script_args: dict) -> float:
    """A plan_check's `equals`: + - * / // and parentheses over numbers, plan values (global_batch) and the
    recipe's script args (args.block_size); parsed, never evaluated as Python. ValueError names what is wrong."""

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ValueError(f"{node.id!r} is not a plan value; use one of {', '.join(PLAN_VALUES)}")
            return _numeric(node.id, values[node.id])
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args":
            if node.attr not in script_args:
                raise ValueError(f"args.{node.attr} is not in recipe.args")
            return _numeric(f"args.{node.attr}", script_args[node.attr])
        raise ValueError(f"{ast.unparse(node)!r} is not allowed; use numbers, plan values, args.<name>, + - * / //")

    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ValueError(f"{expression!r} is not an arithmetic expression") from None
    try:
        return walk(tree)
    except ZeroDivisionError:
        raise ValueError(f"{expression!r} divides by zero") from None


def _numeric(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} is {value!r}, not a number")
    return value


def logged_number(text: str) -> float | None:
    """A number as scripts print it: 491,520 / 491_520 / 1.5e3; None when it is not one."""
    try:
        return float(text.replace(",", "").replace("_", ""))
    except ValueError:
        return None
