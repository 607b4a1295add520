"""Quality targets (issue 23): `targets: [{metric: token_accuracy, value: 0.99}]`, top-level or per suite.
A run's steps-to-target is the first periodic evaluation at or past the value; the curve it is read from
is the metric's own per-step series. Torch-free: the planner and the aggregate import it."""

from __future__ import annotations

from dataclasses import dataclass

from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.typed import Typed

STEPS_MARGIN = 0.1  # the default relative margin of the steps-to-target comparison (±10%)
# By default a target is reached at the first evaluation at or past it, as MLPerf reads it; hold: true asks the next
# evaluation to confirm it (a curve that touches the value once on a small evaluation set is not reached there).
HOLD = False


@dataclass(frozen=True)
class Target(Typed):
    metric: str
    value: float
    steps_margin: float = STEPS_MARGIN  # steps-to-target counts as the same within ±this share
    hold: bool = HOLD  # reached only where the next periodic evaluation is at or past the value too

    def reached(self, value: float, goal: str) -> bool:
        return value >= self.value if goal == "max" else value <= self.value


def curve_keys(metric: Metric) -> list[str]:
    """Where a metric's per-step curve is in a record's `curves`, in order of preference: the built-in
    trainer's periodic evaluation (eval_<name>), a runtime-API script's logged key, a parsed command's name."""
    return [f"eval_{metric.name}", metric.json_key, metric.name]
