"""Data order: global batch k is the same samples at any world size."""

from types import SimpleNamespace

import torch

from hwsweep.models.transformer import tables
from hwsweep.run.data import GlobalOrder, micro_batches


def test_global_batch_is_split_contiguously_and_in_order():
    order = GlobalOrder(table_size=1000, global_batch=48, seed=3)
    for step in (0, 5, 20, 21):  # 21 wraps into the second epoch
        batch = order.batch(step)
        for world_size, micro in ((1, 12), (2, 12), (4, 12), (4, 6), (3, 4)):
            pieces = [mb for rank in range(world_size) for mb in micro_batches(batch, rank, world_size, micro)]
            assert all(len(p) == micro for p in pieces)
            assert torch.equal(torch.cat(pieces), batch)


def test_each_epoch_visits_every_sample_once_and_seeds_differ():
    order = GlobalOrder(table_size=96, global_batch=32, seed=0)
    epoch0 = torch.cat([order.batch(k) for k in range(3)])
    epoch1 = torch.cat([order.batch(k) for k in range(3, 6)])
    assert sorted(epoch0.tolist()) == list(range(96)) == sorted(epoch1.tolist())
    assert not torch.equal(epoch0, epoch1)
    assert not torch.equal(GlobalOrder(96, 32, seed=1).batch(0), order.batch(0))


def test_tables_are_fixed_and_targets_are_sorted():
    recipe = SimpleNamespace(task=SimpleNamespace(length=6, vocab_size=10, train_size=50, eval_size=50))
    (tx, _), (x, y) = tables(recipe)
    (_, _), (x2, _) = tables(recipe)
    assert torch.equal(x, x2)  # the held-out set does not depend on anything but its size
    assert torch.equal(y, x.sort(dim=1).values)
    assert not torch.equal(tx, x)
