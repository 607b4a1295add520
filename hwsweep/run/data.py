"""A data order that does not depend on the world size.

A training set of N samples (a family's table, or any map-style dataset) is shuffled by each
seed once per epoch; global batch k is always the same G samples of that order, whatever
the number of processes. Rank r takes the contiguous slice r of global batch k and cuts
it into its micro-batches in order, so micro-batch j of the step (j = r * accumulation + i)
is the same set of samples at every world size.
"""

from __future__ import annotations

import torch


class GlobalOrder:
    """Sample indices of global batch `step` for a given seed, independent of world size. With a
    `device`, each epoch's permutation (drawn on the host, so the same everywhere) is copied there
    once and the batches are cut from it on the device: no host-to-device copy per batch."""

    def __init__(self, table_size: int, global_batch: int, seed: int, device: torch.device | None = None):
        self.table_size = table_size
        self.global_batch = global_batch
        self.seed = seed
        self.device = device
        self._epoch = -1
        self._perm = None

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_033 + epoch)
            self._perm = torch.randperm(self.table_size, generator=g).to(self.device)
            self._epoch = epoch
        return self._perm

    def batch(self, step: int) -> torch.Tensor:
        start, taken, parts = step * self.global_batch, 0, []
        while taken < self.global_batch:
            epoch, offset = divmod(start + taken, self.table_size)
            take = min(self.global_batch - taken, self.table_size - offset)
            parts.append(self._permutation(epoch)[offset : offset + take])
            taken += take
        return torch.cat(parts)  # a copy: the caller may keep it after the permutation moves on

    def epochs(self, steps: int) -> float:
        return steps * self.global_batch / self.table_size


def micro_batches(global_indices: torch.Tensor, rank: int, world_size: int, micro_batch: int) -> list[torch.Tensor]:
    """This rank's contiguous slice of a global batch, cut into micro-batches in order."""
    per_rank = len(global_indices) // world_size
    mine = global_indices[rank * per_rank : (rank + 1) * per_rank]
    return list(mine.split(micro_batch))


class GlobalBatchSampler(torch.utils.data.Sampler):
    """A DataLoader batch_sampler: this rank's micro-batches of steps start..steps-1, in order, each as
    (step, j, indices) where j = rank * accumulation + i is the micro-batch's place in the global batch
    (the same samples at every world size for the same micro-batch size)."""

    def __init__(self, order: GlobalOrder, rank: int, world_size: int, micro_batch: int, start: int, steps: int):
        self.order, self.rank, self.world_size, self.micro_batch = order, rank, world_size, micro_batch
        self.start, self.steps = start, steps
        self.accumulation = order.global_batch // (world_size * micro_batch)

    def __iter__(self):
        for step in range(self.start, self.steps):
            mine = micro_batches(self.order.batch(step), self.rank, self.world_size, self.micro_batch)
            for i, idx in enumerate(mine):
                yield step, self.rank * self.accumulation + i, idx

    def __len__(self) -> int:
        return (self.steps - self.start) * self.accumulation
