"""The checkpoint manager on one process: keep-k, newest complete checkpoint of this run, RNG, final link."""

import random

import torch

from hwsweep.run.checkpoint import CheckpointManager, step_file


def _manager(folder, fp="run-a", keep=2):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    return CheckpointManager(folder, fp, {"model": model, "optimizer": opt}, keep=keep), model, opt


def _train(model, opt):
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    opt.zero_grad()


def test_save_keeps_the_newest_k_and_load_restores_weights_optimizer_and_rng(tmp_path):
    ckpt, model, opt = _manager(tmp_path)
    for step in (10, 20, 30):
        _train(model, opt)
        ckpt.save(step)
    assert sorted(p.name for p in tmp_path.glob("step*.pt")) == [step_file(tmp_path, s).name for s in (20, 30)]
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    after_save = (torch.rand(3), random.random())

    other, model2, opt2 = _manager(tmp_path)
    assert other.load() == 30
    assert all(torch.equal(model2.state_dict()[k], v) for k, v in expected.items())
    assert opt2.state_dict()["state"][0]["step"] == 3
    assert torch.equal(torch.rand(3), after_save[0]) and random.random() == after_save[1]  # the RNG streams go on
    assert other.load(step=20) == 20 and other.load(step=25) == 0


def test_damaged_and_foreign_checkpoints_are_skipped_and_final_is_the_newest(tmp_path):
    ckpt, model, opt = _manager(tmp_path, keep=3)
    ckpt.save(10)
    _train(model, opt)
    ckpt.save(20)
    step_file(tmp_path, 30).write_bytes(b"torn")  # a kill while writing outside the atomic path
    foreign, *_ = _manager(tmp_path, fp="run-b")
    assert foreign.load() == 0  # another run's checkpoints are never resumed
    again, model2, _ = _manager(tmp_path)
    assert again.load() == 20
    again.link_final(tmp_path / "final.pt")
    final = torch.load(tmp_path / "final.pt", weights_only=False)
    assert final["step"] == 20 and torch.equal(final["model"]["weight"], model.weight.detach())
