"""What trains and evaluates: the built-in trainer or a user's command (its program, script, flags and plan values
checked), the evaluation stage, and the contract one run's plan sets a command (refused before any job)."""

from __future__ import annotations

import difflib
from pathlib import Path

from hwsweep.contracts.command import (
    BATCH_CARRIERS,
    DEVICE_COUNTS,
    PLAN_VALUES,
    PYTHON_NAMES,
    Evaluation,
    Invocation,
    Trainer,
    env_problem,
    expression_value,
    plan_values,
    resolve_program,
)
from hwsweep.contracts.spec import inside_problem
from hwsweep.plan.config.metrics import _check_pattern
from hwsweep.plan.config.schema import _fill_defaults
from hwsweep.plan.config.wording import SHOWN, ConfigError


def _invocation(raw: dict, where: str, config_dir: Path, schema: dict) -> Invocation:
    """A command block with its workdir resolved and everything it names checked."""
    defaults = _fill_defaults(schema["$defs"]["invocation"], {k: v for k, v in raw.items() if k in INVOCATION_KEYS}, schema)
    if "command" not in raw:
        raise ConfigError(f"{where}.command: missing; give your script's command, e.g. [python, train.py]")
    workdir = (config_dir / Path(defaults["workdir"]).expanduser()).resolve()
    if not workdir.is_dir():
        raise ConfigError(f"{where}.workdir: {str(workdir)!r} is not a directory; give a path relative to the config file, or absolute")
    inv = Invocation.from_dict(defaults | {"workdir": str(workdir), "command": list(raw["command"])}, where)
    program = inv.command[0]
    if resolve_program(program, inv.workdir) is None:
        hint = "make it executable (chmod +x) or start the command with python" if "/" in program else "install it or give its path"
        raise ConfigError(f"{where}.command: {program!r} is not an executable program in {inv.workdir} or on PATH; {hint}")
    if inv.command[0] in PYTHON_NAMES and len(inv.command) > 1 and inv.command[1].endswith(".py"):
        if not (workdir / inv.command[1]).is_file():
            raise ConfigError(f"{where}.command: script {inv.command[1]!r} not found in {inv.workdir}; fix the path or workdir")
    for flag, value in inv.args.items():
        if value not in PLAN_VALUES:
            near = difflib.get_close_matches(value, list(PLAN_VALUES), n=1)
            hint = f"did you mean {near[0]}?" if near else f"use one of {', '.join(PLAN_VALUES)}"
            raise ConfigError(f"{where}.args.{flag}: {value!r} is not a plan value; {hint}")
    for value in inv.values:
        if value not in PLAN_VALUES and value not in inv.args:
            raise ConfigError(
                f"{where}.values.{value}: neither a plan value nor a flag of {where}.args; use one of {', '.join(PLAN_VALUES)}"
            )
    _check_pattern(f"{where}.step_pattern", inv.step_pattern)
    _check_inside(f"{where}.metrics_file", inv.metrics_file)
    return inv


def _check_inside(where: str, name: str | None) -> None:
    """A file the config names in the run folder stays in it (hwsweep reads it there)."""
    problem = None if name is None else inside_problem(name)
    if problem:
        raise ConfigError(f"{where}: {SHOWN.repr(name)} {problem}")


INVOCATION_KEYS = ("command", "workdir", "arg_style", "args", "values", "metrics_file", "step_pattern")


def _trainer(raw: dict, config_dir: Path, schema: dict) -> Trainer:
    if "command" not in raw:
        if set(raw) - {"launch"}:
            extra = sorted(set(raw) - {"launch"})[0]
            raise ConfigError(f"trainer.{extra}: only applies to a command; add trainer.command or remove it")
        launch = raw.get("launch", "auto")
        if launch == "plain":  # the built-in trainer starts no workers of its own
            raise ConfigError("trainer.launch: plain is for a command that starts its own workers; the built-in "
                              "trainer takes auto (torchrun from 2 processes) or torchrun")  # fmt: skip
        return Trainer(kind="builtin", launch=launch)
    filled = _fill_defaults(schema["properties"]["trainer"], raw, schema)
    resume = filled.get("resume", {})
    if bool(resume.get("when")) != bool(resume.get("args")):
        raise ConfigError("trainer.resume: give both when (the checkpoint file) and args (what to add then), or neither")
    _check_inside("trainer.resume.when", resume.get("when"))
    plan_check = {}
    for name, check in filled["plan_check"].items():
        where = f"trainer.plan_check.{name}"
        if isinstance(check, str):  # the short form: a plan value's name -> where the script logs that value
            if name not in PLAN_VALUES:
                raise ConfigError(f"{where}: not a plan value; use one of {', '.join(PLAN_VALUES)}, or {{pattern, equals}}")
            check = {"pattern": check, "equals": name}
        _check_pattern(f"{where}.pattern", check["pattern"])
        plan_check[name] = check
    for name in filled["env"]:
        problem = env_problem(name)
        if problem:
            raise ConfigError(f"trainer.env.{name}: {problem}")
    return Trainer(
        kind="command",
        invocation=_invocation(raw, "trainer", config_dir, schema),
        launch=filled["launch"],
        resume_when=resume.get("when"),
        resume_args=list(resume.get("args", [])),
        signal=filled["signal"],
        plan_check=plan_check,
        cwd=filled["cwd"],
        observe=filled["observe"],
        batch_dim=filled["batch_dim"],
        env=dict(filled["env"]),
    )


def _command_problems(trainer: Trainer, spec) -> None:
    """What keeps a command from following one run's plan, refused before any job: a flag given twice,
    a batch the flags cannot carry, workers a plain launch cannot know of, a plan_check that cannot be
    computed. `spec` is the run's RunSpec (its plan and the recipe's script args)."""
    inv, plan, where = trainer.invocation, spec.plan, f"(suite {spec.suite}, variant {spec.variant}, hardware {spec.hardware_name})"
    mapped = set(inv.args.values())
    for flag in spec.recipe.args:
        if flag in inv.args:
            raise ConfigError(
                f"recipe.args.{flag}: trainer.args already passes --{flag} the plan's {inv.args[flag]} {where}; "
                "remove it from recipe.args (the plan's value must not be overridden)"
            )
    if "micro_batch" in mapped and not mapped & set(BATCH_CARRIERS) and plan.accumulation > 1:
        raise ConfigError(
            f"trainer.args: only micro_batch reaches the script, but the plan accumulates {plan.accumulation} "
            f"micro-batches per step {where}; map accumulation (or micro_batches_per_step, per_device_batch, "
            "global_batch) to the script's accumulation flag, or set recipe.micro_batch so no hardware accumulates"
        )
    if trainer.launcher(plan.world_size) == "plain" and plan.world_size > 1 and not mapped & set(DEVICE_COUNTS):
        raise ConfigError(
            f"trainer.launch: plain starts one process, which must start the other {plan.world_size - 1} itself {where}, "
            f"but no flag receives the device count; map {' or '.join(DEVICE_COUNTS)} to its devices flag, "
            "or use launch: torchrun"
        )
    values = plan_values(spec)
    for name, check in trainer.plan_check.items():
        try:
            expression_value(check["equals"], values, spec.recipe.args)
        except ValueError as e:
            raise ConfigError(f"trainer.plan_check.{name}.equals: {e} {where}") from None


def _check_every_run(trainer: Trainer, matrix) -> None:
    """A command's contract checked against every cell's plan on every hardware (at the first seed); the built-in
    trainer follows any plan."""
    if trainer.kind == "builtin":
        return
    for cell in matrix.cells:
        for hw in cell.hardware:
            _command_problems(trainer, matrix.spec(cell.suite, cell.variant, hw, matrix.seeds[0]))


def _evaluation(raw, trainer: Trainer, config_dir: Path, schema: dict) -> Evaluation:
    if raw is None:
        return Evaluation(kind="builtin" if trainer.kind == "builtin" else "none")
    if raw == "builtin" and trainer.kind != "builtin":
        raise ConfigError("evaluation: builtin evaluates the reference models only; use none or your own evaluation command")
    if isinstance(raw, str):
        return Evaluation(kind=raw)
    return Evaluation(kind="command", invocation=_invocation(raw, "evaluation", config_dir, schema))
