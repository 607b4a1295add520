"""The config's suites, each expanded into its cells: its name and hardware checked, its overrides merged into the
recipe, its sweep's axes (keys swept alone or together), each combination's recipe, variant name and plan checked;
the suite names the workflow keeps for itself."""

from __future__ import annotations

import copy
import difflib
import itertools
from dataclasses import dataclass

from hwsweep.contracts.command import Evaluation, Trainer
from hwsweep.contracts.hardware import Hardware
from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.recipe import Recipe
from hwsweep.contracts.spec import name_problem
from hwsweep.contracts.target import Target
from hwsweep.plan.batch import Advisor, PlanError, make_plan
from hwsweep.plan.config.limits import sweep_entries
from hwsweep.plan.config.metrics import _check_producible, _check_targets
from hwsweep.plan.config.recipe import _check_recipe
from hwsweep.plan.config.schema import _fill_defaults
from hwsweep.plan.config.wording import SHOWN, ConfigError
from hwsweep.plan.matrix import Cell

# Suite names taken by the workflow itself: results/partial/ is the status rule's folder (a suite of
# that name collides with it); the rule names are kept free so a suite never reads like a workflow target.
ARGS = "args."  # a swept key that names a script's flag (recipe.args)
RESERVED_SUITES = ("partial", "all", "plan", "spec", "train", "evaluate", "combine", "status", "report")


@dataclass(frozen=True)
class Resolved:
    """The config's sections resolved before its suites: what every suite is expanded against."""

    schema: dict
    recipe: dict  # the config's recipe with its defaults
    written: dict  # the config's recipe as written: each suite's overrides merge into it, then the defaults fill it
    trainer: Trainer
    evaluation: Evaluation
    metrics: list[Metric]
    hardware: dict[str, Hardware]
    baseline: str
    advisor: Advisor
    targets: list  # the config's top-level targets, for a suite that declares none of its own

    @property
    def builtin(self) -> bool:
        return self.trainer.kind == "builtin"


def _suites(raw: dict, resolved: Resolved) -> tuple[list[Cell], dict[str, str], dict[str, tuple[Target, ...]]]:
    """Every suite's cells, in the config's order, with each suite's reference variant and its targets."""
    cells, references, targets = [], {}, {}
    for suite, body in raw.items():
        suite_cells, references[suite], targets[suite] = _suite(suite, body, resolved)
        cells += suite_cells
    return cells, references, targets


def _suite(suite: str, body: dict, resolved: Resolved) -> tuple[list[Cell], str, tuple[Target, ...]]:
    """One suite: a cell for each variant its sweep makes, its reference variant and its targets."""
    where = f"suites.{suite}"
    _check_suite_name(suite)
    names = _suite_hardware(body, where, resolved)
    target_where = f"{where}.targets" if "targets" in body else "targets"
    targets = tuple(Target.from_dict(t, target_where) for t in body.get("targets", resolved.targets))
    recipe = _suite_recipe(body.get("overrides", {}), where, resolved)
    axes = _sweep_axes(body.get("sweep", {}), where)
    _check_sweep_keys(axes, recipe, where, resolved.builtin)
    cells = []
    for variant, values, variant_recipe in _variants(recipe, axes, where):
        typed = _check_recipe(variant_recipe, where, resolved.schema, resolved.builtin, values)
        _check_variant(typed, suite, variant, names, targets, target_where, resolved)
        cells.append(Cell(suite=suite, variant=variant, recipe=typed, sweep_values=values, hardware=tuple(names)))
    variants = [c.variant for c in cells]
    reference = body.get("reference", variants[0])  # the schema's sweep lists hold a value each: one variant at least
    if reference not in variants:
        raise ConfigError(f"{where}.reference: {SHOWN.repr(reference)} is not a variant of suite {suite}; "
                          f"use one of {', '.join(variants[:8])}")  # fmt: skip
    return cells, reference, targets


def _check_suite_name(suite: str) -> None:
    if suite in RESERVED_SUITES:
        raise ConfigError(
            f"suites: name {suite!r} is reserved for the workflow's own results and rules "
            f"({', '.join(RESERVED_SUITES)}); rename the suite"
        )


def _suite_hardware(body: dict, where: str, resolved: Resolved) -> list[str]:
    """The hardware a suite runs on (all of it unless it names some): each one defined, the baseline among them."""
    names = body.get("hardware", list(resolved.hardware))
    for hw in names:
        if hw not in resolved.hardware:
            raise ConfigError(
                f"{where}.hardware: {hw!r} is not defined under hardware; add it there or use one of {', '.join(resolved.hardware)}"
            )
    if resolved.baseline not in names:
        raise ConfigError(
            f"{where}.hardware: the baseline {resolved.baseline!r} is missing; add it so speedups have a reference"
        )
    return names


def _suite_recipe(overrides: dict, where: str, resolved: Resolved) -> dict:
    """The config's recipe as written with the suite's overrides, then the defaults: an override may name another
    model family or task, whose own keys and defaults (hrm: the original's optimizer and schedule) it then takes
    where neither the recipe nor the override sets them."""
    for key in ("task", "model"):
        if not resolved.builtin and key in overrides:
            raise ConfigError(f"{where}.overrides.{key}: only for the built-in trainer; override recipe.args instead")
    return _fill_defaults(resolved.schema["properties"]["recipe"], _merge(resolved.written, overrides), resolved.schema)


def _check_sweep_keys(axes: list[list[dict]], recipe: dict, where: str, builtin: bool) -> None:
    """Every swept key is a key of the suite's recipe, or a script setting: args.<flag>, the flag any name the
    script takes, dotted or not (args.model.learning_rate for LightningCLI's --model.learning_rate)."""
    leaves = {k for k in _leaf_keys(recipe) if builtin or k.split(".")[0] not in ("task", "model")}
    script = [f"{ARGS}{flag}" for flag in recipe.get("args", {})]
    for key in (k for axis in axes for k in axis[0]):
        if key.startswith(ARGS) or key in leaves:
            continue
        near = difflib.get_close_matches(key, sorted(leaves) + script, n=3, cutoff=0.5)
        near += [f"{ARGS}{key}"] if not builtin and f"{ARGS}{key}" not in near else []
        hint = f"did you mean {' or '.join(near)}?" if near else "see recipe keys in hwsweep/schemas/config.schema.yaml"
        if not builtin:
            hint += (f" (a script's flag is swept as args.<flag>; recipe.args has {', '.join(script)})" if script
                     else " (a script's flag is swept as args.<flag>)")  # fmt: skip
        raise ConfigError(f"{where}.sweep.{key}: not a recipe key; {hint}")


def _variants(recipe: dict, axes: list[list[dict]], where: str):
    """Each combination of the sweep's axes as (variant name, its values, its recipe), in order: made one at a
    time, so a name is refused where the combination is met, after the variants before it were checked."""
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
        if variant.casefold() in seen:
            first, taken = seen[variant.casefold()]
            same = "" if first == variant else f" and {first!r}, which differ only in case (one folder on macOS)"
            raise ConfigError(f"{where}.sweep: values {taken} and {values} both name variant {variant!r}{same}; "
                              "make them distinct")  # fmt: skip
        seen[variant.casefold()] = (variant, values)
        yield variant, values, variant_recipe


def _check_variant(typed: Recipe, suite: str, variant: str, names: list[str], targets: tuple, target_where: str,
                   resolved: Resolved) -> None:  # fmt: skip
    """What a variant's runs need: each declared metric reported, each target's curve, a plan on every hardware."""
    context = f" (suite {suite}, variant {variant})"
    _check_producible(resolved.metrics, typed, resolved.trainer, resolved.evaluation, context)
    _check_targets(targets, resolved.metrics, typed, resolved.trainer, target_where, context)
    for hw in names:
        try:
            make_plan(typed, resolved.hardware[hw], resolved.advisor, context=f" (suite {suite}, variant {variant}, hardware {hw})")
        except PlanError as e:
            raise ConfigError(str(e)) from None


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
    if dotted.startswith(ARGS):  # a script's flag: recipe.args is flat, its keys may hold dots themselves
        parents, leaf = ["args"], dotted.removeprefix(ARGS)
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
    for entry, choices in sweep_entries(sweep).items():
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
