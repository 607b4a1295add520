"""The tables and the evaluator of the puzzle families (`hrm`, `deep_transformer`), per the
family contract: tables(recipe) -> (train, held_out) and evaluate(model, recipe, held_out, curves).

A sample is (inputs, targets, puzzle_ids). The training table holds `train_size` samples, each
shown in one view drawn once from 0..augmentation (view 0 the original): `augmentation: N`
makes N augmented copies of every puzzle, each its own puzzle identifier. The held-out table
holds originals; the evaluator predicts views 0..eval_views of each, maps them back and votes
(pass@k). Everything is made from fixed seeds, never the run's.
"""

from __future__ import annotations

import sys
from functools import lru_cache

import torch

from hwsweep.models import passk, puzzles
from hwsweep.models.families import EVAL_TABLE_SEED, MILESTONES, TRAIN_TABLE_SEED

VIEW_SEED = 3_000_017  # the transforms of view v of puzzle p: fixed, shared by training and evaluation
EVAL_BATCH = 256


def base_spec(task) -> puzzles.GridSpec:
    return puzzles.sudoku_spec(task.size) if task.name == "sudoku" else puzzles.arc_spec(task.max_size)


def _originals(task, count: int, seed: int) -> puzzles.Puzzles:
    if task.name == "sudoku":
        return puzzles.sudoku(task.size, task.blanks, count, seed, distinct=task.distinct_puzzles)
    return puzzles.arc(count, seed, task.num_puzzles, min_size=task.min_size, max_size=task.max_size)


@lru_cache(maxsize=4)
def _tables(task):
    n, spec = task.augmentation, base_spec(task)
    train = _originals(task, task.train_size, TRAIN_TABLE_SEED)
    order = torch.Generator().manual_seed(TRAIN_TABLE_SEED)
    views = puzzles.sample_views(train.inputs, train.targets, train.puzzle_ids, n, VIEW_SEED, spec, order)
    held = _originals(task, task.eval_size, EVAL_TABLE_SEED)
    # Held-out puzzle ids are those of view 0, so the model reads the identifiers it trained on.
    held_out = (held.inputs, held.targets, held.puzzle_ids * (n + 1))
    return (views.inputs[0], views.targets[0], views.puzzle_ids[0]), held_out


def tables(recipe):
    return _tables(recipe.task)


def correct_fn(task) -> passk.Correct:
    if task.name == "sudoku":
        return lambda pred, inputs, targets: puzzles.sudoku_correct(pred, inputs)
    return passk.exact_match


def predict(model, inputs: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
    """Predictions on the model's device (the trainer's periodic evaluation runs where it trains), back on the CPU."""
    device = next(model.parameters(), torch.empty(0)).device
    batches = zip(inputs.split(EVAL_BATCH), puzzle_ids.split(EVAL_BATCH))
    return torch.cat([model.predict(x.to(device), p.to(device)).cpu() for x, p in batches])


def evaluate(model, recipe, held_out, curves=None) -> dict[str, float | None]:
    """exact_accuracy, token_accuracy and pass_at_{1,2,10,100} on `held_out`; with `curves` (the
    final evaluation: the run's logged series) also training_efficiency (steps_to_*, None where
    not reached), segments_per_sample (training's) and eval_segments_per_sample (this evaluation's, counted as
    its predictions ran). Periodic evaluations during training (curves None) leave those out: they describe
    the finished run. The costs (computational_cost, flops_per_sample) come from the
    run record's FLOPs spent (hwsweep.run.evaluate)."""
    task = recipe.task
    inputs, targets, ids = (t.cpu() for t in held_out)  # voting on the CPU; the model predicts on its device
    n = task.augmentation
    views = min(task.eval_views, n) + 1
    view = torch.arange(views)[:, None].expand(views, len(inputs))
    shown = puzzles.apply_views(inputs, targets, ids // (n + 1), view, n, VIEW_SEED, base_spec(task))
    counts = getattr(model, "predicted", None)  # a model with segments counts those its predictions ran
    before = dict(counts) if counts is not None else None
    candidates = shown.invert(torch.stack([predict(model, x, p) for x, p in zip(shown.inputs, shown.puzzle_ids)]))
    if task.name == "arc":  # every rule keeps the grid's extent: the canvas outside it is padding, not an answer
        candidates = torch.where(inputs == puzzles.PAD, puzzles.PAD, candidates)
    metrics, notes = passk.score(candidates, inputs, targets, correct=correct_fn(task))
    for note in notes:
        print(f"hwsweep evaluate: {note}", file=sys.stderr)
    if curves is None:
        return metrics
    metrics |= passk.training_efficiency(curves, MILESTONES)
    evaluated = None
    if counts is not None and counts["samples"] > before["samples"]:
        evaluated = (counts["segments"] - before["segments"]) / (counts["samples"] - before["samples"])
    return metrics | {"segments_per_sample": mean_curve(curves, "segments_per_sample"),
                      "eval_segments_per_sample": evaluated}  # fmt: skip


def mean_curve(curves: dict, name: str) -> float | None:
    values = [v for v in (curves.get(name) or {}).get("values", []) if v is not None]
    return sum(values) / len(values) if values else None
