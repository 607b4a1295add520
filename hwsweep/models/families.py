"""Model families of the built-in trainer. The registry is torch-free (the planner and the
Snakefile import it): each family's default metrics, its memory footprint and the dotted path
of its torch-side module, which provides

    tables(recipe) -> (train, held_out)     tuples of tensors, dim 0 the sample, from fixed seeds
    build(recipe) -> nn.Module              forward(*batch) -> the micro-batch's mean loss
    evaluate(model, recipe, held_out, curves=None) -> {metric: value or None}
                                            (the training costs, computational_cost and flops_per_sample,
                                            come from the run record: hwsweep.run.evaluate.costs)

Adding a family is one entry here and one module; nothing else lists family names."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from hwsweep.contracts.metrics import milestone_name
from hwsweep.models import footprint

# Fixed seeds for every family's sample tables: the held-out set must not move with the run's seed.
TRAIN_TABLE_SEED = 1_000_003
EVAL_TABLE_SEED = 2_000_029


@dataclass(frozen=True)
class Family:
    metrics: dict  # default metric declarations, in the config's form
    # (model, task, micro_batch, accumulation, strict, accelerator, precision, shards=0, reshard_after_forward=True,
    #  checkpointing="none")
    device_bytes: Callable  # -> peak bytes on one device; shards 0: DDP, N: FSDP over N devices
    module: str  # the torch-side module (tables, build, evaluate), imported when a run needs it
    periodic: tuple = ("token_accuracy", "exact_accuracy")  # what its evaluator reports during training (eval_every)

    def trainer_keys(self, eval_every: int) -> list[str]:
        """What the built-in trainer logs (a train-stage metric's key): the loss, and with eval_every the
        periodic evaluation's eval_<metric>; the final evaluation alone adds milestones and costs."""
        return ["loss"] + [f"eval_{name}" for name in self.periodic if eval_every]


# The reference evaluator's metrics and the trainer's final loss.
SEQUENCE_METRICS = {
    "token_accuracy": {"goal": "max", "margin": 0.005, "stage": "eval", "bounds": [0, 1],
                       "description": "share of output tokens predicted correctly on the held-out set"},
    "exact_accuracy": {"goal": "max", "margin": 0.005, "stage": "eval", "bounds": [0, 1],
                       "description": "share of held-out sequences predicted entirely correctly"},
    "final_loss": {"goal": "min", "margin": 0.01, "stage": "train", "key": "loss", "reduce": "last",
                   "description": "training loss at the last step (the logged loss series)"},
}  # fmt: skip


def _accuracy(description: str) -> dict:
    return {"goal": "max", "margin": 0.01, "stage": "eval", "bounds": [0, 1], "description": description}


def _milestone(metric: str, threshold: float) -> tuple[str, dict]:
    return milestone_name(metric, threshold), {
        "goal": "min", "stage": "eval", "primary": False, "bounds": [0, 1e12],
        "description": f"first step whose periodic evaluation reached {metric} {threshold} (empty: not reached)",
    }  # fmt: skip


# training_efficiency: the milestones the puzzle evaluator reports (steps_to_<metric>_<percent>);
# a config declares the ones it tracks among them.
MILESTONES = {"exact_accuracy": (0.5, 0.8, 0.9, 0.95, 0.99), "token_accuracy": (0.5, 0.8, 0.9, 0.95, 0.99)}

# HRM's exact accuracy after each of the first SEGMENTS segments of the final evaluation (the original view).
SEGMENTS = 16


def segment_metric(k: int) -> str:
    return f"exact_accuracy_segment_{k}"


# The puzzle families' evaluator (hwsweep/models/puzzle_tasks.py), in the config's form.
PUZZLE_METRICS = {
    "exact_accuracy": _accuracy("share of held-out puzzles solved (sudoku: a valid grid keeping the givens)"),
    "token_accuracy": _accuracy("share of held-out cells equal to the stored solution"),
    **{f"pass_at_{k}": _accuracy(f"share of held-out puzzles whose answer is among the {k} most voted over the "
                                 "evaluated views (equals pass_at_1 with one view)") | {"primary": False}
       for k in (1, 2, 10, 100)},
    **dict(_milestone(m, t) for m, thresholds in MILESTONES.items() for t in thresholds),
    "computational_cost": {"goal": "min", "stage": "eval", "primary": False, "bounds": [0, 1e30],
                           "description": "training FLOPs per point of exact accuracy (empty at 0 accuracy)"},
    "flops_per_sample": {"goal": "min", "stage": "eval", "primary": False, "bounds": [0, 1e30],
                         "description": "training FLOPs per training sample, at the segments training ran"},
    "segments_per_sample": {"goal": "min", "stage": "eval", "primary": False, "bounds": [0, 1e6],
                            "description": "HRM: supervised segments per training sample, as ACT halted (empty: "
                                           "a model without segments)"},
    "eval_segments_per_sample": {"goal": "min", "stage": "eval", "primary": False, "bounds": [0, 1e6],
                                 "description": "HRM: segments per held-out prediction of the final evaluation, as they "
                                                "ran (halt_max_steps: evaluation does not halt; empty: a model without "
                                                "segments)"},
    **{segment_metric(k): _accuracy(f"HRM: share of held-out puzzles solved after {k} segment(s) of the final "
                                    "evaluation (empty beyond halt_max_steps and for a model without segments)")
       | {"primary": False} for k in range(1, SEGMENTS + 1)},
    "halted_exact_accuracy": _accuracy("HRM with ACT: share of held-out puzzles solved when each stops at the "
                                       "segment its Q head halts it (halt Q above continue Q), at most "
                                       "halt_max_steps; exact_accuracy runs them all, as the original")
                             | {"primary": False},
    "halted_segments_per_sample": {"goal": "min", "stage": "eval", "primary": False, "bounds": [0, 1e6],
                                   "description": "HRM with ACT: mean segments a held-out prediction would run if its "
                                                  "Q head halted it (empty without a Q head)"},
    "unseen_exact_accuracy": _accuracy("ARC-like with unseen_puzzles: share of the unseen puzzles' held-out samples "
                                       "solved (rules no trained puzzle asks, hwsweep.models.arc_rules; their identifiers' "
                                       "embeddings as initialised: zero)") | {"primary": False},
    "unseen_token_accuracy": _accuracy("ARC-like with unseen_puzzles: share of the unseen puzzles' held-out cells "
                                       "right") | {"primary": False},
    "final_loss": SEQUENCE_METRICS["final_loss"],
}  # fmt: skip
# Periodic evaluations score the original view alone (the learning curve); pass@k votes in the final one.
PUZZLE_PERIODIC = ("exact_accuracy", "token_accuracy")

FAMILIES = {
    "transformer": Family(metrics=SEQUENCE_METRICS, device_bytes=footprint.device_bytes,
                          module="hwsweep.models.transformer"),
    "hrm": Family(metrics=PUZZLE_METRICS, device_bytes=footprint.puzzle_device_bytes, module="hwsweep.models.hrm",
                  periodic=PUZZLE_PERIODIC),
    "deep_transformer": Family(metrics=PUZZLE_METRICS, device_bytes=footprint.puzzle_device_bytes,
                               module="hwsweep.models.deep_transformer", periodic=PUZZLE_PERIODIC),
}  # fmt: skip


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"recipe.model.name: unknown model family {name!r}; use one of {sorted(FAMILIES)}")
    return FAMILIES[name]


def torch_side(name: str):
    """The family's torch-side module (tables, build, evaluate)."""
    return importlib.import_module(family(name).module)


def model_and_batch(task_cfg, model_cfg, micro_batch: int, device="meta"):
    """The family's model and one micro-batch of its training table on `device`: meta for counting
    FLOPs, the GPU for the memory probe. Built through the family registry, as the trainer builds them."""
    from types import SimpleNamespace

    import torch

    side = torch_side(model_cfg.name)
    recipe = SimpleNamespace(task=task_cfg, model=model_cfg)  # what a family's build and tables read
    with torch.device(device):
        model = side.build(recipe)
    train, _ = side.tables(recipe)  # real rows: their shapes, dtypes and values
    return model, tuple(t[:micro_batch].to(device) for t in train)
