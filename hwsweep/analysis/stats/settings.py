"""How to compare (the config's `statistics` and the declared metrics) and the cell every statistic is
per: suite x variant x hardware."""

from __future__ import annotations

from dataclasses import dataclass, field

CELL = ["suite", "variant", "hardware"]


@dataclass(frozen=True)
class Settings:
    """How to compare: the config's `statistics` and the declared metrics (names in order,
    and the equivalence margin of each metric that has one)."""

    confidence: float = 0.95
    resamples: int = 9999  # kept for configs that set it; the shipped intervals are t-based
    seed: int = 0
    metrics: tuple = ()  # every declared metric, in order
    margins: dict = field(default_factory=dict)  # name -> margin, for the metrics that are compared
    primary: tuple = ()  # the compared metrics that decide a hardware's overall verdict
    variant_primary: tuple = ()  # every primary metric: a variant's overall verdict (a difference needs no margin)
    goals: dict = field(default_factory=dict)  # name -> "max" | "min"
    scales: dict = field(default_factory=dict)  # name -> 100 for shares (bounds [0, 1]: written in points)
    bounds: dict = field(default_factory=dict)  # name -> (low, high), for the metrics that declare them

    @classmethod
    def of(cls, statistics: dict, metrics) -> "Settings":
        compared = [m for m in metrics if m.margin is not None]
        scales = {m.name: 100.0 for m in metrics if m.bounds is not None and list(m.bounds) == [0, 1]}
        return cls(**statistics, metrics=tuple(m.name for m in metrics), margins={m.name: m.margin for m in compared},
                   primary=tuple(m.name for m in compared if m.primary),
                   variant_primary=tuple(m.name for m in metrics if m.primary), goals={m.name: m.goal for m in metrics},
                   scales=scales, bounds={m.name: tuple(m.bounds) for m in metrics if m.bounds is not None})  # fmt: skip

    @property
    def alpha(self) -> float:
        return 1 - self.confidence
