"""A raw config (the dict snakemake loaded) validated and resolved into a Matrix, one section at a time in a fixed
order (the first problem met is the one reported); the Snakefile's entry, which prints the one-line error and exits."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema

from hwsweep.contracts.command import Trainer
from hwsweep.contracts.guard import GuardConfig
from hwsweep.contracts.spec import name_problem
from hwsweep.contracts.typed import SpecError
from hwsweep.plan.batch import Advisor
from hwsweep.plan.config.command import _check_every_run, _evaluation, _trainer
from hwsweep.plan.config.compare import _comparisons
from hwsweep.plan.config.hardware import _hardware
from hwsweep.plan.config.limits import _check_run_count, check_document
from hwsweep.plan.config.metrics import _metrics
from hwsweep.plan.config.recipe import _base_recipe
from hwsweep.plan.config.sealing import seal_config
from hwsweep.plan.config.schema import Validator, _section_defaults, load_schema
from hwsweep.plan.config.suites import Resolved, _suites
from hwsweep.plan.config.tracking import _tracking
from hwsweep.plan.config.warnings import _warnings
from hwsweep.plan.config.wording import SHOWN, ConfigError, _deepest, _message
from hwsweep.plan.matrix import Matrix


def resolve(raw: dict, schema: dict | None = None, config_dir: Path | str = ".") -> Matrix:
    """Validate `raw` and expand it; raises ConfigError with a one-line message. Its secrets are sealed in place
    (hwsweep.plan.config.sealing). Relative
    workdirs of commands are taken from `config_dir` (the config file's folder)."""
    schema = schema or load_schema()
    seal_config(raw)  # in place: nothing read from here on holds a secret of the config
    _validate(raw, schema)
    trainer = _trainer(raw.get("trainer", {}), Path(config_dir), schema)
    recipe = _base_recipe(raw.get("recipe", {}), trainer.kind == "builtin", schema)
    evaluation = _evaluation(raw.get("evaluation"), trainer, Path(config_dir), schema)
    metrics = _metrics(raw.get("metrics"), recipe, trainer, evaluation, schema)
    _check_names(raw)
    _check_run_count(raw)
    hardware = _hardware(raw["hardware"], raw["baseline"], trainer, schema)
    advisor = Advisor(**_section_defaults(raw, "advisor", schema))
    guard = _guard(raw, trainer, schema)
    tracking = _tracking(raw.get("tracking", {}), schema)
    resolved = Resolved(schema=schema, recipe=recipe, written=raw.get("recipe", {}), trainer=trainer, evaluation=evaluation, metrics=metrics,
                        hardware=hardware, baseline=raw["baseline"], advisor=advisor, targets=raw.get("targets", []))  # fmt: skip
    cells, references, targets = _suites(raw["suites"], resolved)
    matrix = Matrix(
        cells=tuple(cells),
        seeds=tuple(raw["seeds"]),
        hardware=hardware,
        baseline=raw["baseline"],
        advisor=advisor,
        statistics=_section_defaults(raw, "statistics", schema),
        estimate=_section_defaults(raw, "estimate", schema),
        keep_checkpoints=raw.get("keep_checkpoints", True),
        guard=guard,
        tracking=tracking,
        timing=raw.get("timing", "auto"),
        warnings=_warnings(cells, hardware, raw["baseline"], trainer),
        trainer=trainer,
        evaluation=evaluation,
        metrics=tuple(metrics),
        references=references,
        compare=_comparisons(raw.get("compare", {}), cells, metrics),
        targets=targets,
    )
    _check_every_run(trainer, matrix)
    return matrix


def _validate(raw, schema: dict) -> None:
    """The document within its bounds, no key of an older config, then the schema: its first error, one line."""
    check_document(raw)
    if isinstance(raw, dict) and isinstance(raw.get("statistics"), dict) and "margins" in raw["statistics"]:
        raise ConfigError("statistics.margins: margins moved to the metrics; give each as metrics.<name>.margin")
    err = jsonschema.exceptions.best_match(Validator(schema).iter_errors(raw))
    if err is not None:
        raise ConfigError(_message(_deepest(err)))


def _check_names(raw: dict) -> None:
    """Suite and hardware names become folders and wildcards: each must be one the workflow matches, and two may not
    differ only in case (one folder on the case-insensitive file systems most laptops have)."""
    for section in ("suites", "hardware"):
        for name in raw[section]:
            problem = name_problem(name)
            if problem:
                raise ConfigError(f"{section}: name {SHOWN.repr(name)} {problem}")
    for section in ("suites", "hardware"):  # metric names are lower case already
        clash = case_collision(raw.get(section) or {})
        if clash:
            raise ConfigError(f"{section}: {clash[0]!r} and {clash[1]!r} differ only in case, which one folder holds "
                              "on a case-insensitive file system (macOS, Windows); rename one")  # fmt: skip


def case_collision(names) -> tuple[str, str] | None:
    """Two names that differ only in case, or None."""
    seen = {}
    for name in names:
        other = seen.setdefault(str(name).casefold(), name)
        if other != name:
            return other, name
    return None


def _guard(raw: dict, trainer: Trainer, schema: dict) -> GuardConfig:
    guard = GuardConfig.from_dict(_section_defaults(raw, "guard", schema), "guard")
    if guard.chance_loss == "auto" and trainer.kind != "builtin":
        raise ConfigError(
            "guard.chance_loss: auto needs the built-in task's vocabulary; give your loss at chance as a number"
        )
    return guard


def resolve_or_exit(raw: dict, config_dir: Path | str = ".") -> Matrix:
    """For the Snakefile: print the one-line error and exit non-zero, no traceback."""
    try:
        return resolve(raw, config_dir=config_dir)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        sys.exit(1)
