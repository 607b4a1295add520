"""The config's recipe with its defaults, and any recipe checked: against the schema's recipe, then the rules
across its keys (warmup below steps, width by heads, a learning rate the built-in optimizers take, batch and
precision settings that go together)."""

from __future__ import annotations

import jsonschema

from hwsweep.contracts.recipe import Recipe
from hwsweep.plan.batch import strategy_problem
from hwsweep.plan.config.schema import Validator, _fill_defaults
from hwsweep.plan.config.wording import ConfigError, _deepest, _fix, _message, _path

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


def _base_recipe(raw: dict, builtin: bool, schema: dict) -> dict:
    """The config's `recipe` with its defaults, checked: the recipe every suite's overrides apply to."""
    for key in ("task", "model"):
        if not builtin and key in raw:
            raise ConfigError(f"recipe.{key}: only for the built-in trainer; pass your script's settings as recipe.args")
    base = _fill_defaults(schema["properties"]["recipe"], raw, schema)
    _check_recipe(base, "recipe", schema, builtin)
    return base
