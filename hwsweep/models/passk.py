"""Metrics of the puzzle families: accuracies, pass@k by voting over views, training efficiency.

pass@k follows ARC practice: the model predicts every view of a puzzle (the original and its
augmented copies), each prediction is mapped back through its view's inverse transform,
identical answers pool their votes, and answers are ranked by votes (ties: the one first
seen, so the original view's wins). pass@k is the share of samples whose correct answer is
among the top k. With a single view there is one candidate per sample, so every pass@k
equals pass@1; `score` says so in a note rather than letting it pass for a finding.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from hwsweep.contracts.metrics import milestone_name
from hwsweep.models.blocks import IGNORE

KS = (1, 2, 10, 100)

# correct(pred, inputs, targets) -> (batch,) bool. Default: exact match with the target;
# sudoku scores a valid grid that keeps the givens (puzzles.sudoku_correct).
Correct = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def exact_match(pred: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Every target cell asked for (not padding) predicted."""
    return ((pred == targets) | (targets == IGNORE)).all(-1)


def ranked_candidates(answers: torch.Tensor) -> torch.Tensor:
    """One sample's distinct answers, most voted first: (views, length) -> (distinct, length)."""
    unique, inverse, votes = answers.unique(dim=0, return_inverse=True, return_counts=True)
    first = torch.full((len(unique),), len(answers), dtype=torch.long)
    first.scatter_reduce_(0, inverse.cpu(), torch.arange(len(answers)), "amin")
    order = first.argsort()  # by first view seen, then (stable) by votes
    order = order[(-votes.cpu()[order]).argsort(stable=True)]
    return unique[order.to(unique.device)]


def pass_at_k(candidates, inputs, targets, ks: Iterable[int] = KS, correct: Correct = exact_match) -> dict[str, float]:
    """pass_at_<k>: the share of samples with a correct answer among their top k.
    candidates: (views, batch, length), already in the original frame."""
    ks = sorted(set(ks))
    hits = [0] * len(ks)
    for i in range(candidates.shape[1]):
        ranked = ranked_candidates(candidates[:, i])
        right = correct(ranked, inputs[i].expand_as(ranked), targets[i].expand_as(ranked))
        if right.any():
            rank = int(right.nonzero()[0])
            hits = [h + (rank < k) for h, k in zip(hits, ks)]
    n = max(candidates.shape[1], 1)
    return {f"pass_at_{k}": h / n for k, h in zip(ks, hits)}


def score(candidates, inputs, targets, ks: Iterable[int] = KS, correct: Correct = exact_match):
    """(metrics, notes): exact_accuracy and token_accuracy of the original view (view 0), and
    pass@k over all views. token_accuracy compares with the stored target token by token over the
    cells asked for (padding, IGNORE, left out)."""
    if candidates.dim() == 2:
        candidates = candidates[None]
    first = candidates[0]
    asked = targets != IGNORE
    metrics = {
        "exact_accuracy": correct(first, inputs, targets).float().mean().item(),
        "token_accuracy": ((first == targets) & asked).sum().item() / max(int(asked.sum()), 1),
        **pass_at_k(candidates, inputs, targets, ks, correct),
    }
    notes = []
    if candidates.shape[0] == 1:
        notes.append("pass@k equals pass@1 for every k: one view per sample, one candidate (eval_views 0)")
    return metrics, notes


# -- training efficiency -----------------------------------------------------------------------
def first_step_reaching(curve: dict | None, threshold: float) -> int | None:
    """The first logged step whose value reaches `threshold`; None when none does ("not
    reached"), never the last step: a run that stopped short must not look as if it got there."""
    if not curve:
        return None
    for step, value in sorted(zip(curve["steps"], curve["values"])):
        if value is not None and value >= threshold:
            return int(step)
    return None


def training_efficiency(curves: dict, milestones: dict[str, Iterable[float]], prefix: str = "eval_") -> dict:
    """steps_to_<metric>_<percent> for each milestone, from the periodic-evaluation curves
    (`<prefix><metric>`: {"steps": [...], "values": [...]})."""
    return {milestone_name(metric, t): first_step_reaching(curves.get(prefix + metric), t)
            for metric, thresholds in milestones.items() for t in thresholds}  # fmt: skip
