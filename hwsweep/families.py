"""Model families of the built-in trainer, as the planner sees them (torch-free): the metrics
their evaluator reports and their memory footprint. The modules themselves live in
hwsweep/models; adding a family touches this registry and that package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hwsweep import footprint


@dataclass(frozen=True)
class Family:
    metrics: dict  # default metric declarations, in the config's form
    device_bytes: Callable  # (model, task, micro_batch, accumulation, strict, accelerator, precision) -> bytes


# The reference evaluator's metrics and the trainer's final loss.
SEQUENCE_METRICS = {
    "token_accuracy": {"goal": "max", "margin": 0.005, "stage": "eval", "bounds": [0, 1],
                       "description": "share of output tokens predicted correctly on the held-out set"},
    "exact_accuracy": {"goal": "max", "margin": 0.005, "stage": "eval", "bounds": [0, 1],
                       "description": "share of held-out sequences predicted entirely correctly"},
    "final_loss": {"goal": "min", "margin": 0.01, "stage": "train", "key": "loss", "reduce": "last",
                   "description": "training loss at the last step (the logged loss series)"},
}  # fmt: skip

FAMILIES = {"transformer": Family(metrics=SEQUENCE_METRICS, device_bytes=footprint.device_bytes)}


def family(name: str) -> Family:
    return FAMILIES[name]
