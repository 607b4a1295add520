"""Validate a raw config (the dict snakemake loaded) and resolve it into a Matrix.

Every problem becomes one ConfigError whose message is a single line naming the field and
the fix, raised before any job is scheduled."""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import re
import reprlib
import sys
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from hwsweep.contracts import catalog
from hwsweep.contracts.command import (
    BATCH_CARRIERS,
    DEVICE_COUNTS,
    PLAN_VALUES,
    PYTHON_NAMES,
    RECIPE_VALUES,
    Evaluation,
    Invocation,
    Trainer,
    expression_value,
    not_passed,
    plan_values,
    resolve_program,
)
from hwsweep.contracts.guard import GuardConfig
from hwsweep.contracts.tracking import TrackingConfig, config_problem
from hwsweep.contracts.hardware import Hardware
from hwsweep.contracts.metrics import Metric, check_pattern
from hwsweep.contracts.recipe import Recipe
from hwsweep.contracts.spec import inside_problem, name_problem
from hwsweep.contracts.target import Target
from hwsweep.contracts.typed import SpecError
from hwsweep.models import families
from hwsweep.plan.batch import Advisor, PlanError, make_plan, strategy_problem
from hwsweep.plan.matrix import Cell, Matrix

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"  # beside the package: users read it


class ConfigError(ValueError):
    pass


@lru_cache(maxsize=None)
def _ecma(pattern: str) -> re.Pattern:
    # A schema pattern is an ECMA-262 regex, whose final $ is the end of the text; Python's $ also matches
    # before a final newline, which let 'cpu1\n' pass as a name.
    return re.compile(re.sub(r"(?<!\\)\$$", r"\\Z", pattern))


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _ecma(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


# JSON Schema counts 32.0 as an integer; a float where a count belongs would plan fine and crash
# inside torchrun (or name a folder seed1.0), so integers must be ints.
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)
# A config's values counted as a walk meets them (an alias counted where it is used): above this it is an
# alias bomb or a mistake, refused before anything walks it (validation, its messages, the planner). Twice the
# schema's longest list (10,000 seeds); low enough that validating what passes takes well under a second.
MAX_VALUES = 20_000
# Nesting levels of a config's values (the schema's deepest is 6, a sweep's list of lists) and the characters of
# all its text: far above any config, and low enough that a hostile one is refused in well under a second.
MAX_DEPTH = 32
MAX_TEXT = 1_000_000
# A config file's size: the same bound on the bytes, checked before YAML reads them.
MAX_BYTES = 1_000_000
# Runs one config may plan: far above any sweep one machine or cluster finishes.
MAX_RUNS = 10_000
SHOWN = reprlib.Repr()  # a value in a message, cut short however much it holds
SHOWN.maxstring = SHOWN.maxother = 40
SHOWN.maxlist = SHOWN.maxdict = 4
SHOWN.maxlevel = 2
# Suite names taken by the workflow itself: results/partial/ is the status rule's folder (a suite of
# that name collides with it); the rule names are kept free so a suite never reads like a workflow target.
RESERVED_SUITES = ("partial", "all", "plan", "spec", "train", "evaluate", "combine", "status", "report")


# libyaml's parser where PyYAML was built with it (a C state machine: no recursion, 20 x faster than PyYAML's own;
# the schema alone took 0.13 CPU-s of every snakemake start with PyYAML's).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=None)
def load_schema(path: str = str(SCHEMA_PATH)) -> dict:
    return yaml.load(Path(path).read_text(), Loader=LOADER)  # noqa: S506 - a safe loader


def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "config"


# The words YAML 1.1 (PyYAML) reads as booleans when they are not quoted.
YAML_BOOLEANS = {True: ("true", "yes", "on"), False: ("false", "no", "off")}


def _words(items: list[str], last: str) -> str:
    return f"{', '.join(items[:-1])} {last} {items[-1]}" if len(items) > 1 else "".join(items)


def _pattern_rule(pattern: str) -> str:
    """A simple schema pattern (^[first][rest]{0,n}$ or ^[chars]{m,n}$) as the rule it states: the characters it
    allows (a command's arguments may hold '/' and '.', a name may not), how it starts and how long it may be."""
    m = re.fullmatch(r"\^(?:\[([^\]]+)\])?\[([^\]]+)\]\{(\d+),(\d+)\}\$", pattern)
    if not m:
        return f"match the pattern {pattern} (hwsweep/schemas/config.schema.yaml)"
    first, rest, _, longest = m.groups()

    def others(chars: str) -> list[str]:
        return [f"'{c}'" for c in re.sub(r"A-Z|a-z|0-9", "", chars)]

    letters = "letters" if "A-Z" in rest else "lower-case letters"
    rule = f"use only {_words([letters, 'digits', *others(rest)], 'and')}"
    if first is not None and (others(first) != others(rest) or ("0-9" in first) != ("0-9" in rest)):
        starts = [w for w, c in (("a letter", "a-z"), ("a digit", "0-9")) if c in first] + others(first)
        rule += f", starting with {_words(starts, 'or')}"
    never = ["spaces", "quotes"] + (["'/'"] if "/" not in rest else []) + (["'..'"] if "." not in rest else [])
    return f"{rule}; at most {int(longest) + (first is not None)} characters, no {_words(never + ['shell characters'], 'or')}"


def _fix(err: jsonschema.ValidationError) -> str:
    v, s = err.validator, err.validator_value
    if v == "pattern":
        return _pattern_rule(s)
    if v == "type" and isinstance(err.instance, bool) and "enum" in err.schema:  # a bare off, read as false
        v, s = "enum", err.schema["enum"]
    if v == "type":
        return f"give a value of type {s if isinstance(s, str) else ' or '.join(s)}"
    if v == "enum":
        bare = [w for w in s if isinstance(err.instance, bool) and str(w).lower() in YAML_BOOLEANS[err.instance]]
        quote = f' (YAML reads a bare {bare[0]} as {str(err.instance).lower()}: write "{bare[0]}")' if bare else ""
        return f"use one of {', '.join(map(str, s))}{quote}"
    if v in ("minimum", "exclusiveMinimum"):
        return f"use a value {'>=' if v == 'minimum' else '>'} {s}"
    if v in ("maximum", "exclusiveMaximum"):
        return f"use a value {'<=' if v == 'maximum' else '<'} {s}"
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        return f"remove it{'; allowed keys: ' + ', '.join(allowed) if allowed else ''}"
    if v == "required":
        return "add it"
    if v in ("minItems", "minProperties"):
        return f"give at least {s} entr{'y' if s == 1 else 'ies'}"
    if v in ("maxItems", "maxProperties", "maxLength"):
        return f"give at most {s}"
    if v == "uniqueItems":
        return "remove the duplicate"
    if v == "anyOf":
        return "use a number, a boolean or a simple name"
    return "see hwsweep/schemas/config.schema.yaml"


def _message(err: jsonschema.ValidationError) -> str:
    where = _path(err.absolute_path)
    if "propertyNames" in err.relative_schema_path or "propertyNames" in err.schema_path:
        return f"{where}: name {err.instance!r} is not allowed; {_fix(err)}"
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return f"{where}.{extra[0]}: unknown key; {_fix(err)}"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return f"{where}.{missing[0]}: missing; add it"
    return f"{where}: {SHOWN.repr(err.instance)} is invalid; {_fix(err)}"  # bounded: never the whole expansion


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # For names and nested objects the innermost error says most (e.g. the pattern that failed).
    while err.context:
        err = jsonschema.exceptions.best_match(err.context)
    return err


def _deref(schema: dict, root: dict) -> dict:
    """A subschema with its $ref (a local JSON pointer) resolved; its own keys win."""
    if "$ref" not in schema:
        return schema
    target = root
    for part in schema["$ref"].lstrip("#/").split("/"):
        target = target[part]
    return {**_deref(target, root), **{k: v for k, v in schema.items() if k != "$ref"}}


def _fill_defaults(schema: dict, instance: dict, root: dict) -> dict:
    """Fill schema defaults into `instance` (recursively through nested objects)."""
    schema = _deref(schema, root)
    out = dict(instance)
    for key, sub in schema.get("properties", {}).items():
        sub = _deref(sub, root)
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        elif key not in out and "properties" in sub:
            out[key] = {}  # a nested object left out entirely still gets its defaults
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = _fill_defaults(sub, out[key], root)
    for branch in schema.get("allOf", []):  # a model family's or task's own keys: if name is ..., then ...
        if "if" in branch and Validator(branch["if"]).is_valid(out):
            out = _fill_defaults(branch["then"], out, root)
    return out


def _merge(base: dict, override: dict) -> dict:
    """Nested override; a section whose override names another kind (model.name, task.name)
    is replaced, not merged: another family's keys do not carry over."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        nested = isinstance(v, dict) and isinstance(out.get(k), dict)
        same_kind = nested and v.get("name", out[k].get("name")) == out[k].get("name")
        out[k] = _merge(out[k], v) if same_kind else copy.deepcopy(v)
    return out


def _set_dotted(d: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(d)
    node = out
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    return out


def _leaf_keys(recipe: dict, prefix: str = "") -> set[str]:
    """Dotted keys of a resolved recipe (its model family's and task's own keys included)."""
    keys = set()
    for k, v in recipe.items():
        keys |= _leaf_keys(v, f"{prefix}{k}.") if isinstance(v, dict) and k != "args" else {f"{prefix}{k}"}
    return keys


def _sweep_axes(sweep: dict, where: str) -> list[list[dict]]:
    """Each sweep entry as its list of choices {key: value}; an entry naming several keys,
    'model.h_cycles,model.l_cycles': [[1, 1], [2, 2]], sweeps them together (no cross product)."""
    axes = []
    for entry, choices in sweep.items():
        keys = entry.split(",")
        for choice in choices:
            if len(keys) > 1 and not (isinstance(choice, list) and len(choice) == len(keys)):
                raise ConfigError(f"{where}.sweep.{entry}: {choice!r} is not a list of {len(keys)} values; "
                                  f"give one value per key, e.g. {[1] * len(keys)}")  # fmt: skip
            if len(keys) == 1 and isinstance(choice, list):
                raise ConfigError(f"{where}.sweep.{entry}: {choice!r} is a list; give single values, or name "
                                  "several keys separated by ',' to sweep them together")  # fmt: skip
        axes.append([dict(zip(keys, c if len(keys) > 1 else [c])) for c in choices])
    return axes


def _variant_name(values: dict) -> str:
    if not values:
        return "default"
    return "_".join(f"{k.rsplit('.', 1)[1] if '.' in k else k}-{str(v).lower()}" for k, v in values.items())


ADAMW_MAX_LR = 10.0  # the built-in trainer's Adams refuse more; its SGD and a script's own optimizer do not (a warning)


def _check_recipe(recipe: dict, where: str, schema: dict, builtin: bool, sweep: dict | None = None) -> Recipe:
    err = jsonschema.exceptions.best_match(
        Validator(schema["$defs"]["recipe"] | {"$defs": schema["$defs"]}).iter_errors(recipe)
    )
    if err is not None:
        err = _deepest(err)
        key = _path(err.absolute_path)
        if sweep and key in sweep:  # name the sweep entry the user wrote, not the merged recipe
            raise ConfigError(f"{where}.sweep.{key}: {err.instance!r} is invalid; {_fix(err)}")
        raise ConfigError(f"{where}.{_message(err)}")
    if not builtin:  # a user's script brings its own task and model
        recipe = recipe | {"task": None, "model": None}
    r = Recipe.from_dict(recipe, where)
    if r.schedule.warmup_steps >= r.schedule.steps:
        raise ConfigError(
            f"{where}.schedule.warmup_steps: {r.schedule.warmup_steps} must be below steps {r.schedule.steps}; lower it"
        )
    if builtin and r.model.width % r.model.heads:
        raise ConfigError(
            f"{where}.model.width: {r.model.width} is not divisible by heads {r.model.heads}; use a multiple of heads"
        )
    for key in ("task", "model") if builtin else ():
        problem = getattr(r, key).problem()
        if problem:
            raise ConfigError(f"{where}.{key}.{problem}")
    if builtin and r.optimizer.name != "sgd" and r.optimizer.lr > ADAMW_MAX_LR:  # plain SGD's lr has no such scale
        raise ConfigError(f"{where}.optimizer.lr: {r.optimizer.lr:g} is above {ADAMW_MAX_LR:g}, beyond any learning rate "
                          f"of the built-in trainer's {r.optimizer.name}; lower it")  # fmt: skip
    if not builtin and r.micro_batch == "auto":
        raise ConfigError(
            f"{where}.micro_batch: auto needs the built-in trainer's memory model; give your script's micro-batch as a number"
        )
    if r.lr_scaling != "none" and r.batch_policy == "locked":
        raise ConfigError(
            f"{where}.lr_scaling: {r.lr_scaling} only applies with batch_policy: grow; set lr_scaling: none or batch_policy: grow"
        )
    problem = strategy_problem(r, r.precision, r.parallel.strategy)
    if problem:
        fix = "reproducibility: deterministic" if r.reproducibility == "strict" else "precision: bf16-mixed"
        raise ConfigError(f"{where}.parallel.strategy: {problem}; use {fix} or strategy: ddp")
    if r.tf32 and r.reproducibility != "comparable":
        raise ConfigError(
            f"{where}.tf32: true conflicts with reproducibility {r.reproducibility!r}; "
            "set tf32: false or reproducibility: comparable"
        )
    return r


def _check_pattern(where: str, pattern: str) -> None:
    problem = check_pattern(pattern)
    if problem:
        raise ConfigError(f"{where}: {pattern!r} {problem}")


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


def _evaluation(raw, trainer: Trainer, config_dir: Path, schema: dict) -> Evaluation:
    if raw is None:
        return Evaluation(kind="builtin" if trainer.kind == "builtin" else "none")
    if raw == "builtin" and trainer.kind != "builtin":
        raise ConfigError("evaluation: builtin evaluates the reference models only; use none or your own evaluation command")
    if isinstance(raw, str):
        return Evaluation(kind=raw)
    return Evaluation(kind="command", invocation=_invocation(raw, "evaluation", config_dir, schema))


def _metrics(raw: dict | None, recipe: dict, trainer: Trainer, evaluation: Evaluation, schema: dict) -> list[Metric]:
    if raw is None:
        if trainer.kind != "builtin":
            raise ConfigError(
                "metrics: missing; declare what your script reports, e.g. metrics: {val_loss: {goal: min, margin: 0.02}}"
            )
        raw = families.family(recipe["model"]["name"]).metrics
    out = []
    for name, body in raw.items():
        body = _fill_defaults(schema["$defs"]["metric"], body, schema)
        metric = Metric.from_dict({"name": name, "margin": None, "pattern": None, "key": None, "bounds": None} | body, name)
        where = f"metrics.{name}"
        if metric.pattern is not None:
            _check_pattern(f"{where}.pattern", metric.pattern)
        if metric.bounds is not None and metric.bounds[0] > metric.bounds[1]:
            raise ConfigError(f"{where}.bounds: {metric.bounds} is not [low, high]; put the lower bound first")
        if metric.stage == "eval" and evaluation.kind == "none":
            raise ConfigError(f"{where}.stage: eval, but there is no evaluation stage; use stage: train or configure evaluation")
        out.append(metric)
    return out


def _check_producible(metrics: list[Metric], recipe: Recipe, trainer: Trainer, evaluation: Evaluation,
                      where: str) -> None:  # fmt: skip
    """Every declared metric is one the built-in trainer or evaluator reports for this recipe: checked here,
    not after every run has trained in full and then failed."""
    fam = families.family(recipe.model.name) if recipe.model else None
    for metric in metrics:
        if metric.stage == "eval" and evaluation.kind == "builtin" and metric.name not in fam.metrics:
            raise ConfigError(f"metrics.{metric.name}: the built-in evaluator does not report it{where}; use one "
                              f"of {', '.join(fam.metrics)} or stage: train")  # fmt: skip
        logged = fam.trainer_keys(recipe.eval_every) if trainer.kind == "builtin" else [metric.json_key]
        if metric.stage == "train" and metric.json_key not in logged:
            hint = "" if recipe.eval_every else " (eval_<metric> with recipe.eval_every > 0)"
            raise ConfigError(f"metrics.{metric.name}: the built-in trainer logs {', '.join(logged)}{hint}, not "
                              f"{metric.json_key}{where}; give key: loss, or stage: eval for an evaluation metric")  # fmt: skip


def _check_targets(targets: tuple, metrics: list[Metric], recipe: Recipe, trainer: Trainer, where: str,
                   context: str) -> None:  # fmt: skip
    """Every target names a declared metric with a per-step curve for this trainer (issue 23): the built-in
    trainer's periodic evaluation (recipe.eval_every > 0), a command's train-stage metric parsed per step; and
    schedule.stop_at: target has a target to stop at."""
    if recipe.schedule.stop_at == "target" and not targets:
        raise ConfigError(f"recipe.schedule.stop_at: target has no target to stop at{context}; declare targets "
                          "(top-level, or suites.<suite>.targets) or use stop_at: steps")  # fmt: skip
    declared = {m.name: m for m in metrics}
    for i, target in enumerate(targets):
        at = f"{where}[{i}].metric"
        metric = declared.get(target.metric)
        if metric is None:
            raise ConfigError(f"{at}: {target.metric!r} is not a declared metric; use one of {', '.join(declared)}")
        if metric.out_of_bounds(target.value):
            raise ConfigError(f"{where}[{i}].value: {target.value} lies outside {metric.name}'s bounds {metric.bounds}; "
                              "give a value the metric can reach")  # fmt: skip
        if trainer.kind == "builtin":
            fam = families.family(recipe.model.name)
            if metric.stage == "eval" and (not recipe.eval_every or metric.name not in fam.periodic):
                hint = (f"set recipe.eval_every (e.g. {max(1, recipe.schedule.steps // 20)}) so the trainer evaluates "
                        f"{metric.name} during training" if metric.name in fam.periodic else
                        f"use one the trainer evaluates during training: {', '.join(fam.periodic)}")  # fmt: skip
                raise ConfigError(f"{at}: {metric.name} has no per-step curve{context}; {hint}")
        elif metric.stage != "train":
            raise ConfigError(f"{at}: {metric.name} is read once after training (stage: eval){context}; a target "
                              "needs a train-stage metric the script prints per step (with its step number)")  # fmt: skip


def _where(entry) -> str:
    """The dotted path of a walked node: entries are (node, parent entry, key, depth)."""
    parts = []
    while entry[1] is not None:
        parts.append(entry[2])
        entry = entry[1]
    return _path(reversed(parts))


def check_document(raw) -> None:
    """A config as loaded from YAML: bounded (MAX_VALUES values, MAX_DEPTH levels, MAX_TEXT characters), free of
    values that contain themselves (an alias inside its own anchor), and every number in it finite. YAML's .nan
    and .inf pass every minimum and maximum of the schema, then crash training or poison the statistics.
    Linear in the values walked: a node keeps its parent, so its path is only spelled out for a message."""
    stack, seen, text = [(raw, None, None, 0)], 0, 0
    while stack:
        entry = stack.pop()
        node, _, _, depth = entry
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(f"config: more than {MAX_VALUES:,} values once its YAML aliases (*name) are expanded; "
                              "write the values out, or repeat fewer of them")  # fmt: skip
        if isinstance(node, float) and not math.isfinite(node):
            raise ConfigError(f"{_where(entry)}: {node} is not a finite number; give a number")
        if isinstance(node, (str, bytes)):
            text += len(node)
            if text > MAX_TEXT:
                raise ConfigError(f"{_where(entry)}: the config's text passes {MAX_TEXT:,} characters here; "
                                  "a config holds settings, not data: shorten the long values")  # fmt: skip
        if not isinstance(node, (dict, list)):
            continue
        if len(node) > MAX_VALUES:
            raise ConfigError(f"{_where(entry)}: {len(node):,} entries, more than the {MAX_VALUES:,} values a config "
                              "may hold; give fewer")  # fmt: skip
        if depth >= MAX_DEPTH:
            anchor, up = None, entry[1]
            while up is not None:  # the outermost place the value appears: where its anchor is
                anchor, up = up if up[0] is node else anchor, up[1]
            if anchor is not None:
                raise ConfigError(f"{_where(anchor)}: the value contains itself (a YAML alias *name used inside its "
                                  "own anchor &name); write the value out without the alias")  # fmt: skip
            raise ConfigError(f"{SHOWN.repr(_where(entry))[1:-1]}: nested more than {MAX_DEPTH} levels deep; a "
                              "config's values are a few levels deep at most: remove the extra nesting")  # fmt: skip
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack += [(value, entry, key, depth + 1) for key, value in reversed(list(items))]


def resolve(raw: dict, schema: dict | None = None, config_dir: Path | str = ".") -> Matrix:
    """Validate `raw` and expand it; raises ConfigError with a one-line message. Relative
    workdirs of commands are taken from `config_dir` (the config file's folder)."""
    schema = schema or load_schema()
    check_document(raw)
    if isinstance(raw, dict) and isinstance(raw.get("statistics"), dict) and "margins" in raw["statistics"]:
        raise ConfigError("statistics.margins: margins moved to the metrics; give each as metrics.<name>.margin")
    validator = Validator(schema)
    err = jsonschema.exceptions.best_match(validator.iter_errors(raw))
    if err is not None:
        raise ConfigError(_message(_deepest(err)))

    trainer = _trainer(raw.get("trainer", {}), Path(config_dir), schema)
    builtin = trainer.kind == "builtin"
    recipe_raw = raw.get("recipe", {})
    for key in ("task", "model"):
        if not builtin and key in recipe_raw:
            raise ConfigError(f"recipe.{key}: only for the built-in trainer; pass your script's settings as recipe.args")
    base = _fill_defaults(schema["properties"]["recipe"], recipe_raw, schema)
    _check_recipe(base, "recipe", schema, builtin)
    evaluation = _evaluation(raw.get("evaluation"), trainer, Path(config_dir), schema)
    metrics = _metrics(raw.get("metrics"), base, trainer, evaluation, schema)

    for section in ("suites", "hardware"):
        for name in raw[section]:
            problem = name_problem(name)
            if problem:
                raise ConfigError(f"{section}: name {SHOWN.repr(name)} {problem}")
    runs = _run_count(raw)
    if runs > MAX_RUNS:
        raise ConfigError(f"suites: the matrix has {runs:,} runs (suites x sweep values x hardware x seeds), more "
                          f"than the {MAX_RUNS:,} one config may plan; use fewer seeds, sweep values or hardware")  # fmt: skip

    hardware = {}
    for name, entry in raw["hardware"].items():
        entry = _fill_defaults(schema["$defs"]["hardware"], entry, schema)
        _check_device_type(entry, f"hardware.{name}")
        entry.setdefault("cpus_per_task", entry["devices_per_node"])
        hardware[name] = Hardware.from_dict(entry, f"hardware.{name}")
        if hardware[name].gres and hardware[name].gpu_model:
            raise ConfigError(
                f"hardware.{name}.gpu_model: give either gres or gpu_model (with the GPU count taken from the devices), not both"
            )
        if hardware[name].device_memory_gb is None:
            raise ConfigError(
                f"hardware.{name}.gpu_type: {entry['gpu_type']!r} is not in the catalog; use one of "
                f"{', '.join(catalog.catalog())} or give memory_gb"
            )
        if trainer.launch == "plain" and hardware[name].nodes > 1:
            raise ConfigError(
                f"hardware.{name}.nodes: trainer.launch plain runs one process per run; use launch: torchrun for several nodes"
            )
    advisor = Advisor(**_fill_defaults(schema["properties"]["advisor"], raw.get("advisor", {}), schema))
    statistics = _fill_defaults(schema["properties"]["statistics"], raw.get("statistics", {}), schema)
    estimate = _fill_defaults(schema["properties"]["estimate"], raw.get("estimate", {}), schema)
    if raw["baseline"] not in hardware:
        raise ConfigError(
            f"baseline: {raw['baseline']!r} is not a hardware name; use one of {', '.join(hardware)}"
        )

    guard = GuardConfig.from_dict(_fill_defaults(schema["properties"]["guard"], raw.get("guard", {}), schema), "guard")
    if guard.chance_loss == "auto" and not builtin:
        raise ConfigError(
            "guard.chance_loss: auto needs the built-in task's vocabulary; give your loss at chance as a number"
        )

    tracking = _tracking(raw.get("tracking", {}), schema)

    cells, references, targets = [], {}, {}
    for suite, body in raw["suites"].items():
        where = f"suites.{suite}"
        if suite in RESERVED_SUITES:
            raise ConfigError(
                f"suites: name {suite!r} is reserved for the workflow's own results and rules "
                f"({', '.join(RESERVED_SUITES)}); rename the suite"
            )
        names = body.get("hardware", list(hardware))
        for hw in names:
            if hw not in hardware:
                raise ConfigError(
                    f"{where}.hardware: {hw!r} is not defined under hardware; add it there or use one of {', '.join(hardware)}"
                )
        if raw["baseline"] not in names:
            raise ConfigError(
                f"{where}.hardware: the baseline {raw['baseline']!r} is missing; add it so speedups have a reference"
            )
        target_where = f"{where}.targets" if "targets" in body else "targets"
        targets[suite] = tuple(Target.from_dict(t, target_where) for t in body.get("targets", raw.get("targets", [])))
        overrides = body.get("overrides", {})
        for key in ("task", "model"):
            if not builtin and key in overrides:
                raise ConfigError(f"{where}.overrides.{key}: only for the built-in trainer; override recipe.args instead")
        recipe = _fill_defaults(schema["properties"]["recipe"], _merge(base, overrides), schema)
        leaves = _leaf_keys(recipe)
        sweep = body.get("sweep", {})
        axes = _sweep_axes(sweep, where)
        for key in (k for axis in axes for k in axis[0]):
            if key.startswith("args.") and key.count(".") == 1:
                continue  # a script setting: any name the script takes
            if key not in leaves or (not builtin and key.split(".")[0] in ("task", "model")):
                near = difflib.get_close_matches(key, sorted(leaves), n=3, cutoff=0.5)
                hint = f"did you mean {' or '.join(near)}?" if near else "see recipe keys in hwsweep/schemas/config.schema.yaml"
                raise ConfigError(f"{where}.sweep.{key}: not a recipe key; {hint}")
        seen = {}
        for combo in itertools.product(*axes):
            values = {k: v for choice in combo for k, v in choice.items()}
            variant_recipe = recipe
            for key, value in values.items():
                variant_recipe = _set_dotted(variant_recipe, key, value)
            variant = _variant_name(values)
            problem = name_problem(variant, variant=True)
            if problem:
                raise ConfigError(f"{where}.sweep: variant name {SHOWN.repr(variant)} (from {SHOWN.repr(values)}) {problem}")
            if variant in seen:
                raise ConfigError(
                    f"{where}.sweep: values {seen[variant]} and {values} both name variant {variant!r}; make them distinct"
                )
            seen[variant] = values
            typed = _check_recipe(variant_recipe, where, schema, builtin, values)
            _check_producible(metrics, typed, trainer, evaluation, f" (suite {suite}, variant {variant})")
            _check_targets(targets[suite], metrics, typed, trainer, target_where, f" (suite {suite}, variant {variant})")
            for hw in names:
                try:
                    make_plan(typed, hardware[hw], advisor, context=f" (suite {suite}, variant {variant}, hardware {hw})")
                except PlanError as e:
                    raise ConfigError(str(e)) from None
            cells.append(Cell(suite=suite, variant=variant, recipe=typed, sweep_values=values, hardware=tuple(names)))
        references[suite] = body.get("reference", next(iter(seen)))
        if references[suite] not in seen:
            raise ConfigError(f"{where}.reference: {SHOWN.repr(references[suite])} is not a variant of suite {suite}; "
                              f"use one of {', '.join(list(seen)[:8])}")  # fmt: skip
    warnings = (_cross_hardware_warnings(cells, hardware, raw["baseline"]) + _unmapped_warnings(trainer, cells)
                + _stop_at_warnings(cells, trainer) + _lr_warnings(cells, trainer)
                + _unseen_warnings(cells))  # fmt: skip
    matrix = Matrix(
        cells=tuple(cells),
        seeds=tuple(raw["seeds"]),
        hardware=hardware,
        baseline=raw["baseline"],
        advisor=advisor,
        statistics=statistics,
        estimate=estimate,
        keep_checkpoints=raw.get("keep_checkpoints", True),
        guard=guard,
        tracking=tracking,
        timing=raw.get("timing", "auto"),
        warnings=warnings,
        trainer=trainer,
        evaluation=evaluation,
        metrics=tuple(metrics),
        references=references,
        compare=_comparisons(raw.get("compare", {}), cells, metrics),
        targets=targets,
    )
    if not builtin:
        for cell in cells:
            for hw in cell.hardware:
                _command_problems(trainer, matrix.spec(cell.suite, cell.variant, hw, matrix.seeds[0]))
    return matrix


def _tracking(raw, schema: dict) -> TrackingConfig:
    """The config's `tracking` (a list of tracker names, or the full mapping), defaults filled and checked."""
    raw = {"backends": raw} if isinstance(raw, list) else raw
    branch = next(b for b in schema["properties"]["tracking"]["anyOf"] if b["type"] == "object")
    config = TrackingConfig.from_dict(_fill_defaults(branch, raw, schema), "tracking")
    problem = config_problem(config)
    if problem:
        raise ConfigError(problem)
    return config


def _run_count(raw: dict) -> int:
    """Runs the (schema-valid) config plans, counted before any variant is made: a sweep's variants are the
    product of its value lists."""
    total = 0
    for body in raw["suites"].values():
        variants = math.prod(len(choices) for choices in body.get("sweep", {}).values())
        total += variants * len(body.get("hardware", raw["hardware"])) * len(raw["seeds"])
    return total


def _comparisons(raw: dict, cells, metrics) -> dict:
    """The config's `compare`, checked: both sides name a suite/variant of the matrix and the metrics are declared.
    Both sides always share the baseline (every suite runs it) and the seeds (one list), so they pair."""
    paths = [f"{c.suite}/{c.variant}" for c in cells]
    names = [m.name for m in metrics]
    out = {}
    for name, pair in raw.items():
        for key in ("variant", "reference"):
            if pair[key] not in paths:
                near = difflib.get_close_matches(pair[key], paths, n=1, cutoff=0.5)
                hint = f"did you mean {near[0]}?" if near else f"give suite/variant, e.g. {paths[0]}"
                raise ConfigError(f"compare.{name}.{key}: {SHOWN.repr(pair[key])} is not a suite/variant of this config; "
                                  f"{hint}")  # fmt: skip
        if pair["variant"] == pair["reference"]:
            raise ConfigError(f"compare.{name}.reference: the same as its variant; name another suite/variant")
        for metric in pair.get("metrics", []):
            if metric not in names:
                raise ConfigError(f"compare.{name}.metrics: {metric!r} is not a declared metric; use one of "
                                  f"{', '.join(names)}")  # fmt: skip
        out[name] = {"variant": pair["variant"], "reference": pair["reference"], "metrics": list(pair.get("metrics", names))}
    return out


def _check_device_type(entry: dict, where: str) -> None:
    """gpu_type must be a device of the entry's accelerator: a GPU type on a cpu entry (or the cpu type on a
    cuda one) would price the runs and compute their MFU as that device."""
    kind = catalog.lookup(entry["gpu_type"])
    if kind is None:
        return  # a site's own name, with memory_gb: nothing to compare
    if entry["accelerator"] == "cpu" and kind.architecture != "cpu":
        raise ConfigError(f"{where}.gpu_type: {kind.name} is a GPU, but accelerator is cpu; "
                          "remove gpu_type (cpu) or set accelerator: cuda")  # fmt: skip
    if entry["accelerator"] == "cuda" and kind.architecture == "cpu":
        raise ConfigError(f"{where}.gpu_type: {kind.name} on a cuda entry; give the GPU's type, e.g. "
                          f"{next(n for n, t in catalog.catalog().items() if t.architecture != 'cpu')}")  # fmt: skip


def _cross_hardware_warnings(cells, hardware, baseline) -> tuple[str, ...]:
    """Where a hardware's arithmetic differs from the baseline's: another precision, or TF32
    matmuls on one device type and not the other. Nothing when both run the same arithmetic
    (the precision is locked by the plan; a change of device type alone is not a warning)."""
    out = []
    for cell in cells:
        r, base = cell.recipe, hardware[baseline]

        def arithmetic(hw):
            kind = hw.device_type
            return hw.precision or r.precision, bool(r.tf32 and (kind is None or kind.tf32))

        for hw in cell.hardware:
            (p, tf32), (bp, btf32) = arithmetic(hardware[hw]), arithmetic(base)
            diffs = ([f"precision {p} vs {bp}"] if p != bp else []) + (
                [f"TF32 matmuls {'on' if tf32 else 'off'} vs {'on' if btf32 else 'off'}"] if tf32 != btf32 else []
            )
            if diffs:
                out.append(
                    f"suite {cell.suite} [{cell.variant}]: {hw} ({hardware[hw].gpu_type}) vs baseline {baseline} "
                    f"({base.gpu_type}): {', '.join(diffs)}: results may differ because of it"
                )
    return tuple(dict.fromkeys(out))


# What the comparison is locked on, and the plan values that carry it to a script.
LOCKED_BY = {
    "the seed": ("seed",),
    "the batch": ("micro_batch", "per_device_batch", "global_batch"),
    "the step budget": ("steps",),
    "the precision": ("precision",),
}


def _stop_at_warnings(cells, trainer: Trainer) -> tuple[str, ...]:
    """Only the runtime stops a run at its targets: a command that does not import it trains its whole schedule."""
    stopping = sorted({c.suite for c in cells if c.recipe.schedule.stop_at == "target"})
    if trainer.kind == "builtin" or not stopping:
        return ()
    return (f"recipe.schedule.stop_at: target (suite {', '.join(stopping)}): only a script on hwsweep.runtime stops at "
            "its targets; an unmodified command trains every step (its time to target is still measured, nothing "
            "is saved; use stop_at: steps to say so)",)  # fmt: skip


def _unseen_warnings(cells) -> tuple[str, ...]:
    """Unseen puzzles whose samples show no demonstration: nothing tells the model their rule (their identifier's
    embedding row is zero), so their accuracy measures chance, not generalization."""
    blind = sorted({c.suite for c in cells if getattr(c.recipe.task, "unseen_puzzles", 0)
                    and not getattr(c.recipe.task, "demonstrations", 0)})  # fmt: skip
    if not blind:
        return ()
    return (f"recipe.task.unseen_puzzles without demonstrations (suite {', '.join(blind)}): an unseen puzzle's rule "
            "reaches the model through nothing, so unseen_exact_accuracy measures chance; set task.demonstrations: 1 "
            "to ask whether the rule is read from the sample",)  # fmt: skip


def _lr_warnings(cells, trainer: Trainer) -> tuple[str, ...]:
    """A learning rate above ADAMW_MAX_LR passed to a script: right for plain SGD, not for an Adam (the built-in
    trainer refuses it)."""
    if trainer.kind == "builtin" or "lr" not in trainer.invocation.args.values():
        return ()
    high = sorted({c.recipe.optimizer.lr for c in cells if c.recipe.optimizer.lr > ADAMW_MAX_LR})
    if not high:
        return ()
    return (f"recipe.optimizer.lr: {high[-1]:g} is above {ADAMW_MAX_LR:g}: usual for plain SGD (the PyTorch word "
            "language model's is 20), far too high for Adam; check which optimizer the script's flag sets",)  # fmt: skip


def _unmapped_warnings(trainer: Trainer, cells=()) -> tuple[str, ...]:
    """A script only follows the plan through its flags: say which locks it does not receive."""
    if trainer.kind == "builtin":
        return ()
    mapped = set(trainer.invocation.args.values())
    out = []
    for what, values in LOCKED_BY.items():
        if not mapped & set(values):
            consequence = (
                "every seed repeats the same run, so the seed axis measures run-to-run noise only"
                if what == "the seed"
                else "the script uses its own, so hwsweep cannot lock it across hardware"
            )
            out.append(f"trainer.args maps no flag to {' or '.join(values)}: {what} is not passed; {consequence} "
                       "(a script on hwsweep.runtime reads the plan itself: nothing to do)")
    if "micro_batch" in mapped and not mapped & set(BATCH_CARRIERS):
        out.append("trainer.args maps micro_batch but no accumulation: the script accumulates by its own default, which "
                   "must be 1 (the run fails if the global batch it is seen to train differs from the plan's)")
    # a recipe setting given in recipe.args under its name in every cell (lr: 20) is passed: its value is on record
    everywhere = [k for k in (cells[0].recipe.args if cells else {}) if all(k in c.recipe.args for c in cells)]
    unpassed = not_passed(trainer, dict.fromkeys(everywhere))
    if unpassed:
        names = [v for v, key in RECIPE_VALUES.items() if f"recipe.{key}" in unpassed]
        out.append(f"{', '.join(unpassed)} reach no flag of the script: it uses its own values, and records say "
                   f"not_passed (map {', '.join(names)} in trainer.args to pass them, or give the script's value in "
                   "recipe.args under that name; a script on hwsweep.runtime applies them itself)")
    return tuple(out)


DEFAULT_CONFIG = Path("config/config.yaml")  # where the workflow and the hwsweep commands look without --configfile


class _Refused(Exception):
    """Raised where a document goes past a bound: (mark, what is wrong and the fix)."""


def _check_events(text: str) -> None:
    """The document's bounds, checked on its event stream before anything is built from it: nesting deeper than
    MAX_DEPTH (PyYAML's composer recurses once per level), an alias inside its own anchor (a value that contains
    itself, which every later walk would follow forever) and more than MAX_VALUES nodes once aliases are expanded
    (an alias bomb: the count of an anchor's subtree is added for each of its aliases)."""
    # open: [anchor, count at its start, children so far or None for a sequence]; sizes: anchor -> values under it.
    # A mapping's keys are not counted (every other child): the count is check_document's, values only.
    open_nodes, sizes, count = [], {}, 0
    for event in yaml.parse(text, Loader=LOADER):
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, start, _ = open_nodes.pop()
            if anchor:
                sizes[anchor] = count - start + 1
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # stream and document events
        parent = open_nodes[-1] if open_nodes else None
        key = parent is not None and parent[2] is not None and parent[2] % 2 == 0
        if parent is not None and parent[2] is not None:
            parent[2] += 1
        if isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _, _ in open_nodes):
                raise _Refused(event.start_mark, f"alias *{event.anchor} is used inside its own anchor "
                               f"&{event.anchor}, a value that contains itself; write the value out without the alias")  # fmt: skip
            count += 0 if key else sizes.get(event.anchor, 0)  # an undefined alias is the YAML error the load names
        elif isinstance(event, yaml.ScalarEvent):
            count += 0 if key else 1
            if event.anchor:
                sizes[event.anchor] = 1
        else:  # a collection starts
            count += 1
            if len(open_nodes) >= MAX_DEPTH:
                raise _Refused(event.start_mark, f"nested more than {MAX_DEPTH} levels deep; a config's values are a "
                               "few levels deep at most: remove the extra nesting")  # fmt: skip
            open_nodes.append([event.anchor, count, 0 if isinstance(event, yaml.MappingStartEvent) else None])
        if count > MAX_VALUES:
            raise _Refused(event.start_mark, f"more than {MAX_VALUES:,} values once its YAML aliases (*name) are "
                           "expanded; write the values out, or repeat fewer of them")  # fmt: skip


def load_file(path: Path | str) -> dict:
    """A config file as a dict; ConfigError with one line naming the file and the fix when it is
    missing, unreadable, a directory, not UTF-8, too large, not YAML, nested too deep, holds a value that
    contains itself or a number Python cannot read, or is not a mapping."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_BYTES:,} bytes; a config holds settings, not data: "
                              "pass the config file itself")  # fmt: skip
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found; pass an existing file with --configfile") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file; pass the YAML file itself") from None
    except PermissionError:
        raise ConfigError(f"{path}: cannot be read (permission denied); make it readable (chmod +r)") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror}); pass a readable YAML file") from None
    try:
        _check_events(text)
        raw = yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
    except _Refused as e:
        mark, what = e.args
        raise ConfigError(f"{path}: line {mark.line + 1}, column {mark.column + 1}: {what}") from None
    except yaml.YAMLError as e:
        if LOADER is not yaml.SafeLoader:  # PyYAML's own parser names the problem better ("found character '\t'")
            try:
                for _ in yaml.parse(text, Loader=yaml.SafeLoader):
                    pass
            except yaml.YAMLError as own:
                e = own
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(str(getattr(e, "problem", None) or "not valid YAML").split())
        raise ConfigError(f"{path}: {where}{what}; fix the YAML syntax there") from None
    except ValueError as e:  # a value Python refuses to make, e.g. an integer of more than 4300 digits
        what = " ".join(re.split(r"[:;]", str(e))[0].split())[:120]  # its first clause: the rest names Python's fix
        raise ConfigError(f"{path}: {what}; give a shorter value") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level is {type(raw).__name__}, not a mapping; start with keys like recipe:")
    return raw


def load_or_exit(path: Path | str) -> dict:
    """For the hwsweep commands: the config file as a dict, or the one-line error and exit non-zero."""
    try:
        return load_file(path)
    except ConfigError as e:
        sys.exit(f"hwsweep config error: {e}")


def resolve_or_exit(raw: dict, config_dir: Path | str = ".") -> Matrix:
    """For the Snakefile: print the one-line error and exit non-zero, no traceback."""
    try:
        return resolve(raw, config_dir=config_dir)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        sys.exit(1)
