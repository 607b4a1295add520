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

from hwsweep.models import arc_rules, passk, puzzles
from hwsweep.models.blocks import IGNORE
from hwsweep.models.families import (EVAL_TABLE_SEED, MILESTONES, PUZZLE_PERIODIC, SEGMENTS, TRAIN_TABLE_SEED,
                                     segment_metric)

VIEW_SEED = 3_000_017  # the transforms of view v of puzzle p: fixed, shared by training and evaluation
UNSEEN_TABLE_SEED = 4_000_037  # the grids of the unseen puzzles' held-out split
EVAL_BATCH = 256


def base_spec(task) -> puzzles.GridSpec:
    if task.name == "sudoku":
        return puzzles.sudoku_spec(task.size)
    return puzzles.arc_spec(task.max_size, task.demonstrations)


def _originals(task, count: int, seed: int, unseen: bool = False) -> puzzles.Puzzles:
    if task.name == "sudoku":
        return puzzles.sudoku(task.size, task.blanks, count, seed, distinct=task.distinct_puzzles)
    # unseen: new puzzles, ids after the trained ones, each asking a rule no trained puzzle (nor its views) asks
    part, first = split_part(task, unseen)
    return puzzles.arc(count, seed, task.unseen_puzzles if unseen else task.num_puzzles, min_size=task.min_size,
                       max_size=task.max_size, demonstrations=task.demonstrations, part=part, first_id=first)  # fmt: skip


def split_part(task, unseen: bool) -> tuple[str, int]:
    """(the part of the rule space an ARC-like task's trained or unseen puzzles draw from, their first id): with
    unseen puzzles the two parts of hwsweep.models.arc_rules, without them the whole space."""
    if unseen:
        return "unseen", task.num_puzzles
    return ("trained" if task.unseen_puzzles else "all"), 0


def rules(task) -> tuple[list, list]:
    """An ARC-like task's (trained puzzles' rules, unseen puzzles' rules), puzzle id order."""
    return (arc_rules.draw(task.num_puzzles, 0, split_part(task, False)[0]),
            arc_rules.draw(task.unseen_puzzles, 0, "unseen"))  # fmt: skip


@lru_cache(maxsize=4)
def _tables(task):
    n, spec = task.augmentation, base_spec(task)
    train = _originals(task, task.train_size, TRAIN_TABLE_SEED)
    order = torch.Generator().manual_seed(TRAIN_TABLE_SEED)
    views = puzzles.sample_views(train.inputs, train.targets, train.puzzle_ids, n, VIEW_SEED, spec, order)
    held = [_originals(task, task.eval_size, EVAL_TABLE_SEED)]
    if task.unseen_puzzles:
        held.append(_originals(task, task.eval_size, UNSEEN_TABLE_SEED, unseen=True))
    # Held-out puzzle ids are those of view 0, so the model reads the identifiers it trained on (or, unseen, the
    # rows no sample trained). The last tensor marks the unseen puzzles' samples (after the seen ones, so a
    # periodic evaluation's first eval_subset samples are seen ones).
    unseen = torch.cat([torch.full((len(h.inputs),), i > 0) for i, h in enumerate(held)])
    ids = torch.cat([spec.view_ids(h.puzzle_ids, torch.zeros_like(h.puzzle_ids), n) for h in held])
    held_out = (torch.cat([h.inputs for h in held]), torch.cat([h.targets for h in held]), ids, unseen)
    return (views.inputs[0], views.targets[0], views.puzzle_ids[0]), held_out


def tables(recipe):
    return _tables(recipe.task)


def correct_fn(task) -> passk.Correct:
    if task.name == "sudoku":
        return lambda pred, inputs, targets: puzzles.sudoku_correct(pred, inputs)
    return passk.exact_match


def predict(model, inputs: torch.Tensor, puzzle_ids: torch.Tensor, trace: bool = False):
    """Predictions on the model's device (the trainer's periodic evaluation runs where it trains), back on the CPU.
    trace (a model with segments): (tokens after each segment, (segments, batch, length); the segment its Q head
    would halt each sample at, or None), from HRM.trace."""
    device = next(model.parameters(), torch.empty(0)).device
    batches = list(zip(inputs.split(EVAL_BATCH), puzzle_ids.split(EVAL_BATCH)))
    if not trace:
        return torch.cat([model.predict(x.to(device), p.to(device)).cpu() for x, p in batches])
    runs = [model.trace(x.to(device), p.to(device)) for x, p in batches]
    halted = None if runs[0][1] is None else torch.cat([h.cpu() for _, h in runs])
    return torch.cat([t.cpu() for t, _ in runs], dim=1), halted


def answers(task, inputs: torch.Tensor, targets: torch.Tensor, preds: torch.Tensor) -> torch.Tensor:
    """Predictions as answers: the cells not asked for (padding outside an ARC-like grid, which every rule keeps
    where the input has it, and the demonstrations' cells) set to IGNORE, so they never split the votes."""
    return torch.where(targets == IGNORE, IGNORE, preds) if task.name == "arc" else preds


def evaluate(model, recipe, held_out, curves=None) -> dict[str, float | None]:
    """exact_accuracy, token_accuracy and pass_at_{1,2,10,100} on `held_out`'s seen puzzles.

    Periodic evaluations during training (curves None) score the original view alone (pass@k equal to pass@1
    there): they are the learning curve, and they leave out what describes the finished run. The final evaluation
    (`curves`: the run's logged series) votes over the views for pass@k and adds training_efficiency (steps_to_*,
    None where not reached), segments_per_sample (training's), eval_segments_per_sample (this evaluation's,
    counted as its predictions ran), for a model with segments exact_accuracy_segment_<k> (after k of them) and
    with a Q head halted_exact_accuracy / halted_segments_per_sample (each sample stopped where its Q head
    halts it), and with unseen puzzles unseen_exact_accuracy / unseen_token_accuracy. The costs
    (computational_cost, flops_per_sample) come from the run record's FLOPs spent (hwsweep.run.evaluate)."""
    task = recipe.task
    inputs, targets, ids, unseen = (t.cpu() for t in held_out)  # voting on the CPU; the model predicts on its device
    seen = ~unseen
    final = curves is not None
    counts = getattr(model, "predicted", None)  # a model with segments counts those its predictions ran
    before = dict(counts) if counts is not None else None
    metrics, first = _score(model, task, inputs[seen], targets[seen], ids[seen], task.voted_views if final else 1)
    notes = metrics.pop("notes")
    if not final:
        return {k: metrics[k] for k in PUZZLE_PERIODIC}
    for note in notes:
        print(f"hwsweep evaluate: {note}", file=sys.stderr)
    metrics |= passk.training_efficiency(curves, MILESTONES)
    evaluated = None
    if counts is not None and counts["samples"] > before["samples"]:
        evaluated = (counts["segments"] - before["segments"]) / (counts["samples"] - before["samples"])
    metrics |= {"segments_per_sample": mean_curve(curves, "segments_per_sample"), "eval_segments_per_sample": evaluated}
    metrics |= first
    metrics |= {"unseen_exact_accuracy": None, "unseen_token_accuracy": None}
    if task.unseen_puzzles:
        inputs, targets, ids = inputs[unseen], targets[unseen], ids[unseen]
        preds = answers(task, inputs, targets, predict(model, inputs, ids))
        scored, _ = passk.score(preds, inputs, targets, correct=correct_fn(task))
        metrics |= {"unseen_exact_accuracy": scored["exact_accuracy"],
                    "unseen_token_accuracy": scored["token_accuracy"]}  # fmt: skip
    return metrics


def _score(model, task, inputs, targets, ids, views: int):
    """(pass@k and the accuracies over `views` views, the notes under "notes"; the segment-wise metrics of the
    original view: exact_accuracy_segment_<k>, halted_*, empty for a model without segments or Q head)."""
    n, spec = task.augmentation, base_spec(task)
    table = n if spec.views_are_puzzles else max(n, views - 1)  # a sudoku view needs no trained identifier
    view = torch.arange(views)[:, None].expand(views, len(inputs))
    shown = puzzles.apply_views(inputs, targets, ids // (n + 1) if spec.views_are_puzzles else ids, view, table,
                                VIEW_SEED, spec)  # fmt: skip
    correct = correct_fn(task)
    segmentwise = {segment_metric(k): None for k in range(1, SEGMENTS + 1)}
    segmentwise |= {"halted_exact_accuracy": None, "halted_segments_per_sample": None}
    if hasattr(model, "trace"):  # the original view traced through every segment: its last is the prediction
        tokens, halted_at = predict(model, shown.inputs[0], shown.puzzle_ids[0], trace=True)
        original = tokens[-1]
        for k in range(min(len(tokens), SEGMENTS)):
            solved = correct(answers(task, inputs, targets, tokens[k]), inputs, targets)
            segmentwise[segment_metric(k + 1)] = solved.float().mean().item()
        if halted_at is not None:
            stopped = tokens.gather(0, (halted_at - 1)[None, :, None].expand(1, *tokens.shape[1:]))[0]
            solved = correct(answers(task, inputs, targets, stopped), inputs, targets)
            segmentwise |= {"halted_exact_accuracy": solved.float().mean().item(),
                            "halted_segments_per_sample": halted_at.float().mean().item()}  # fmt: skip
    else:
        original = predict(model, shown.inputs[0], shown.puzzle_ids[0])
    rest = [predict(model, x, p) for x, p in zip(shown.inputs[1:], shown.puzzle_ids[1:])]
    candidates = shown.invert(torch.stack([original, *rest]))
    metrics, notes = passk.score(answers(task, inputs, targets, candidates), inputs, targets, correct=correct)
    return metrics | {"notes": notes}, segmentwise


def mean_curve(curves: dict, name: str) -> float | None:
    values = [v for v in (curves.get(name) or {}).get("values", []) if v is not None]
    return sum(values) / len(values) if values else None
