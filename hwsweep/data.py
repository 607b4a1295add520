"""Tasks and a data order that does not depend on the world size.

The training set is a fixed, procedurally generated table of samples. Each seed shuffles
it once per epoch; global batch k is always the same G samples of that order, whatever
the number of processes. Rank r takes the contiguous slice r of global batch k and cuts
it into its micro-batches in order, so micro-batch j of the step (j = r * accumulation + i)
is the same set of samples at every world size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Fixed seeds for the sample tables: the held-out set must not move with the run's seed.
TRAIN_TABLE_SEED = 1_000_003
EVAL_TABLE_SEED = 2_000_029


@dataclass(frozen=True)
class SortTask:
    """Input: `length` random tokens from `vocab_size`; target: the same tokens sorted."""

    length: int
    vocab_size: int

    def make(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        x = torch.randint(0, self.vocab_size, (n, self.length), generator=g)
        return x, x.sort(dim=1).values


TASKS = {"sort": SortTask}


def build_task(task_cfg):
    if task_cfg.name not in TASKS:
        raise ValueError(f"recipe.task.name: unknown task {task_cfg.name!r}; use one of {sorted(TASKS)}")
    return TASKS[task_cfg.name](length=task_cfg.length, vocab_size=task_cfg.vocab_size)


def train_table(task, size: int):
    return task.make(size, TRAIN_TABLE_SEED)


def eval_table(task, size: int):
    return task.make(size, EVAL_TABLE_SEED)


class GlobalOrder:
    """Sample indices of global batch `step` for a given seed, independent of world size."""

    def __init__(self, table_size: int, global_batch: int, seed: int):
        self.table_size = table_size
        self.global_batch = global_batch
        self.seed = seed
        self._epoch = -1
        self._perm = None

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_033 + epoch)
            self._perm = torch.randperm(self.table_size, generator=g)
            self._epoch = epoch
        return self._perm

    def batch(self, step: int) -> torch.Tensor:
        start = step * self.global_batch
        out = []
        while len(out) < self.global_batch:
            epoch, offset = divmod(start + len(out), self.table_size)
            take = min(self.global_batch - len(out), self.table_size - offset)
            out.extend(self._permutation(epoch)[offset : offset + take].tolist())
        return torch.tensor(out)

    def epochs(self, steps: int) -> float:
        return steps * self.global_batch / self.table_size


def micro_batches(global_indices: torch.Tensor, rank: int, world_size: int, micro_batch: int) -> list[torch.Tensor]:
    """This rank's contiguous slice of a global batch, cut into micro-batches in order."""
    per_rank = len(global_indices) // world_size
    mine = global_indices[rank * per_rank : (rank + 1) * per_rank]
    return list(mine.split(micro_batch))
