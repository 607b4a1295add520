"""Model families of the built-in trainer. The registry is torch-free (the planner and the
Snakefile import it): each family's default metrics, its memory footprint and the dotted path
of its torch-side module, which provides

    tables(recipe) -> (train, held_out)     tuples of tensors, dim 0 the sample, from fixed seeds
    build(recipe) -> nn.Module              forward(*batch) -> the micro-batch's mean loss
    evaluate(model, recipe, held_out, curves=None) -> {metric: value or None}

Adding a family is one entry here and one module; nothing else lists family names."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from hwsweep import footprint


@dataclass(frozen=True)
class Family:
    metrics: dict  # default metric declarations, in the config's form
    device_bytes: Callable  # (model, task, micro_batch, accumulation, strict, accelerator, precision) -> bytes
    module: str  # the torch-side module (tables, build, evaluate), imported when a run needs it


# The reference evaluator's metrics and the trainer's final loss.
SEQUENCE_METRICS = {
    "token_accuracy": {"goal": "max", "margin": 0.005, "stage": "eval", "bounds": [0, 1],
                       "description": "share of output tokens predicted correctly on the held-out set"},
    "exact_accuracy": {"goal": "max", "margin": 0.005, "stage": "eval", "bounds": [0, 1],
                       "description": "share of held-out sequences predicted entirely correctly"},
    "final_loss": {"goal": "min", "margin": 0.01, "stage": "train", "key": "loss", "reduce": "last",
                   "description": "training loss at the last step (the logged loss series)"},
}  # fmt: skip

FAMILIES = {
    "transformer": Family(
        metrics=SEQUENCE_METRICS, device_bytes=footprint.device_bytes, module="hwsweep.models.transformer"
    ),
}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"recipe.model.name: unknown model family {name!r}; use one of {sorted(FAMILIES)}")
    return FAMILIES[name]


def torch_side(name: str):
    """The family's torch-side module (tables, build, evaluate)."""
    return importlib.import_module(family(name).module)
