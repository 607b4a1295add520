"""The config's metrics and targets: each metric declared (or the model family's), its pattern checked, and each
one a run can report; each target naming a declared metric with a per-step curve."""

from __future__ import annotations

from hwsweep.contracts.command import Evaluation, Trainer
from hwsweep.contracts.metrics import Metric, check_pattern
from hwsweep.contracts.recipe import Recipe
from hwsweep.models import families
from hwsweep.plan.config.schema import _fill_defaults
from hwsweep.plan.config.wording import ConfigError


def _check_pattern(where: str, pattern: str) -> None:
    problem = check_pattern(pattern)
    if problem:
        raise ConfigError(f"{where}: {pattern!r} {problem}")


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
        if target.hold and recipe.schedule.stop_at == "target":
            raise ConfigError(f"{where}[{i}].hold: true needs the evaluation after the target is reached, and "
                              f"recipe.schedule.stop_at: target stops before it{context}; use hold: false or "
                              "stop_at: steps")  # fmt: skip
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
