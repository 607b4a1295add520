"""The loader: a map-style dataset's micro-batches in the plan's global order (run.loader), on the device."""

from __future__ import annotations

import hashlib
import math

import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate, get_worker_info

from hwsweep.run import data, repro

DEVICE_TABLE_FRACTION = 0.25  # a TensorDataset up to this share of a GPU's memory is kept on the GPU


def table_budget_bytes(device: torch.device) -> float:
    """How many bytes of tables the loader keeps on `device`: DEVICE_TABLE_FRACTION of a GPU's memory
    (the rest is the model's, its activations' and the optimizer's); on a CPU the tables already are
    in host memory, so any size."""
    if device.type == "cuda":
        return DEVICE_TABLE_FRACTION * torch.cuda.get_device_properties(device).total_memory
    return math.inf


def table_placement(dataset, num_workers: int, budget_bytes: float) -> str:
    """"device": a TensorDataset without workers whose tables fit the budget is indexed on the device;
    "host": anything else goes through a DataLoader and each micro-batch is copied to the device."""
    if not isinstance(dataset, TensorDataset) or num_workers:
        return "host"
    return "device" if sum(t.nbytes for t in dataset.tensors) <= budget_bytes else "host"


class Loader:
    """Micro-batches of a map-style dataset in the plan's global order, from the resumed step on.

    Random draws inside the dataset (augmentations) use RNGs seeded per (seed, step, micro-batch
    place in the global batch), so they are the same at any world size and any num_workers, and
    after a resume. A TensorDataset is indexed as a whole micro-batch (it draws nothing); when it fits
    (table_placement) its tables are copied to the device once and indexed there, without a DataLoader:
    the same micro-batches, bitwise, with no copy per micro-batch."""

    def __init__(self, run, dataset, kwargs: dict, budget_bytes: float | None = None):
        self.run, self.dataset = run, dataset
        self._seeded = _Seeded(dataset, run.seed, kwargs.pop("collate_fn", default_collate))
        self.kwargs = kwargs
        self._it = None
        budget = table_budget_bytes(run.device) if budget_bytes is None else budget_bytes
        self.placement = table_placement(dataset, run.recipe.num_workers, budget)
        self._tables = tuple(t.to(run.device) for t in dataset.tensors) if self.placement == "device" else None

    def _sampler(self) -> data.GlobalBatchSampler:
        run = self.run
        on = run.device if self._tables is not None else None
        order = data.GlobalOrder(len(self.dataset), run.plan.global_batch, run.seed, device=on)
        return data.GlobalBatchSampler(order, run.rank, run.world_size, run.plan.micro_batch, run.start or 0,
                                       run.plan.steps)  # fmt: skip

    def peek(self):
        """The next micro-batch, without taking it (e.g. to count FLOPs on a real one)."""
        key = next(iter(self._sampler()))
        if self._tables is not None:
            return tuple(t[key[2]] for t in self._tables)
        return _to(self._seeded.__getitems__(key), self.run.device)

    def next(self):
        if self._tables is not None:
            if self._it is None:
                self._it = iter(self._sampler())
            _, _, indices = next(self._it)
            return tuple(t[indices] for t in self._tables)
        if self._it is None:
            loader = DataLoader(
                self._seeded, batch_sampler=self._sampler(), collate_fn=_identity,
                num_workers=self.run.recipe.num_workers, generator=torch.Generator().manual_seed(self.run.seed),
                **self.kwargs,
            )  # fmt: skip
            self._it = iter(loader)
        return _to(next(self._it), self.run.device)


class _Seeded(torch.utils.data.Dataset):
    def __init__(self, dataset, seed: int, collate):
        self.dataset, self.seed, self.collate = dataset, seed, collate

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, key):
        step, j, indices = key
        if isinstance(self.dataset, TensorDataset):
            return tuple(t[indices] for t in self.dataset.tensors)
        seed = int.from_bytes(hashlib.blake2b(f"{self.seed}/{step}/{j}".encode(), digest_size=8).digest(), "little")
        # A worker's RNGs are its own; in the training process the training streams are put back.
        saved = repro.rng_state() if get_worker_info() is None else None
        repro.seed_everything(seed >> 1)
        try:
            return self.collate([self.dataset[int(i)] for i in indices])
        finally:
            if saved is not None:
                repro.set_rng_state(saved)


def _identity(batch):
    return batch


def _to(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch
