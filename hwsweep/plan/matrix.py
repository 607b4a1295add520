"""The experiment matrix: cells (suite x variant) x hardware x seeds, and the RunSpec of each run."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property

from hwsweep.contracts.command import Evaluation, Trainer
from hwsweep.contracts.guard import GuardConfig
from hwsweep.contracts.hardware import Hardware
from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.recipe import Recipe
from hwsweep.contracts.spec import RunSpec, run_dir
from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.plan.batch import Advisor, make_plan


@dataclass(frozen=True)
class Cell:
    """One recipe: a suite with one combination of its sweep values."""

    suite: str
    variant: str
    recipe: Recipe
    sweep_values: dict
    hardware: tuple[str, ...]


@dataclass(frozen=True)
class Run:
    suite: str
    variant: str
    hardware: str
    seed: int

    @property
    def run_dir(self) -> str:
        return run_dir(self.suite, self.variant, self.hardware, self.seed)


@dataclass(frozen=True)
class Matrix:
    cells: tuple[Cell, ...]
    seeds: tuple[int, ...]
    hardware: dict[str, Hardware]
    baseline: str
    advisor: Advisor = Advisor()
    statistics: dict = field(default_factory=dict)
    estimate: dict = field(default_factory=dict)  # the config's estimate section, defaults filled
    keep_checkpoints: bool = True
    guard: GuardConfig = GuardConfig()
    tracking: TrackingConfig = TrackingConfig()
    timing: str = "auto"  # auto | exclusive | shared
    warnings: tuple[str, ...] = ()
    trainer: Trainer = Trainer(kind="builtin")
    evaluation: Evaluation = Evaluation(kind="builtin")
    metrics: tuple[Metric, ...] = ()
    references: dict = field(default_factory=dict)  # suite -> the variant its other variants are compared with
    compare: dict = field(default_factory=dict)  # name -> {variant, reference: suite/variant, metrics}: across suites
    targets: dict = field(default_factory=dict)  # suite -> tuple[Target, ...] (issue 23: time to target)

    def metric_names(self) -> list[str]:
        return [m.name for m in self.metrics]

    @property
    def suites(self) -> list[str]:
        return list(dict.fromkeys(c.suite for c in self.cells))

    @cached_property
    def _cells(self) -> dict[tuple[str, str], Cell]:
        return {(c.suite, c.variant): c for c in self.cells}

    def runs(self, suite: str | None = None) -> list[Run]:
        return [
            Run(c.suite, c.variant, hw, seed)
            for c in self.cells
            if suite is None or c.suite == suite
            for hw in c.hardware
            for seed in self.seeds
        ]

    @cached_property
    def _specs(self) -> dict:
        return {}

    def spec(self, suite: str, variant: str, hardware: str, seed: int) -> RunSpec:
        # Input functions ask for the same run several times while the DAG is built.
        key = (suite, variant, hardware, int(seed))
        if key not in self._specs:
            self._specs[key] = self._make_spec(*key)
        return self._specs[key]

    def _guard(self, recipe: Recipe) -> GuardConfig:
        if self.guard.chance_loss != "auto":
            return self.guard
        # A uniform guess over the vocabulary: the cross-entropy of a model that learned nothing.
        return dataclasses.replace(self.guard, chance_loss=math.log(recipe.task.vocab_size))

    def _make_spec(self, suite: str, variant: str, hardware: str, seed: int) -> RunSpec:
        cell = self._cells[(suite, variant)]
        hw = self.hardware[hardware]
        return RunSpec(
            suite=suite,
            variant=variant,
            hardware_name=hardware,
            seed=int(seed),
            recipe=cell.recipe,
            hardware=hw,
            plan=make_plan(cell.recipe, hw, self.advisor),
            run_dir=run_dir(suite, variant, hardware, seed),
            sweep_values=dict(cell.sweep_values),
            trainer=self.trainer,
            evaluation=self.evaluation,
            metrics=list(self.metrics),
            keep_checkpoints=self.keep_checkpoints,
            guard=self._guard(cell.recipe),
            targets=list(self.targets.get(suite, ())) if cell.recipe.schedule.stop_at == "target" else [],
        )
