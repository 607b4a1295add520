"""A raw config (the dict snakemake loaded) validated and resolved into a Matrix; the Snakefile's entry, which
prints the one-line error and exits."""

from __future__ import annotations

import difflib
import itertools
import sys
from pathlib import Path

import jsonschema

from hwsweep.contracts import catalog
from hwsweep.contracts.guard import GuardConfig
from hwsweep.contracts.hardware import Hardware
from hwsweep.contracts.spec import name_problem
from hwsweep.contracts.target import Target
from hwsweep.contracts.typed import SpecError
from hwsweep.plan.batch import Advisor, PlanError, make_plan
from hwsweep.plan.config.command import _command_problems, _evaluation, _trainer
from hwsweep.plan.config.compare import _comparisons
from hwsweep.plan.config.hardware import _check_device_type
from hwsweep.plan.config.limits import MAX_RUNS, _run_count, check_document
from hwsweep.plan.config.metrics import _check_producible, _check_targets, _metrics
from hwsweep.plan.config.recipe import _check_recipe
from hwsweep.plan.config.schema import Validator, _fill_defaults, load_schema
from hwsweep.plan.config.suites import RESERVED_SUITES, _leaf_keys, _merge, _set_dotted, _sweep_axes, _variant_name
from hwsweep.plan.config.tracking import _tracking
from hwsweep.plan.config.warnings import (
    _cross_hardware_warnings,
    _lr_warnings,
    _stop_at_warnings,
    _unmapped_warnings,
    _unseen_warnings,
)
from hwsweep.plan.config.wording import SHOWN, ConfigError, _deepest, _message
from hwsweep.plan.matrix import Cell, Matrix


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


def resolve_or_exit(raw: dict, config_dir: Path | str = ".") -> Matrix:
    """For the Snakefile: print the one-line error and exit non-zero, no traceback."""
    try:
        return resolve(raw, config_dir=config_dir)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        sys.exit(1)
