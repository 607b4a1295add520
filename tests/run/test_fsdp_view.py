"""The view-tensor warning FSDP2 gives for a unit whose output is a view ("returned a view tensor ... will silently drop
the pre-backward hook ... wrong gradients"): the built-in families' heads (FSDP units) return no view (the
transformer's is given its positions flattened; the puzzle families' have no bias, and matmul returns no view), so
no FSDP run warns, and the gradients of a sharded model on a batch are DDP's on the same batch."""

import warnings
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset

from hwsweep.contracts.recipe import Parallel
from hwsweep.models import families
from hwsweep.plan.config import resolve
from hwsweep.run.device import select
from hwsweep.run.reduce import prepare

SUDOKU = {"name": "sudoku", "size": 4, "blanks": 6, "train_size": 64, "eval_size": 32}
PUZZLE = {"width": 16, "heads": 2, "mlp_ratio": 2, "puzzle_emb_ndim": 0, "positions": "rope"}
MODELS = {
    "transformer": ({"name": "transformer", "width": 32, "depth": 2, "heads": 2}, None),
    "deep_transformer": ({"name": "deep_transformer", "depth": 2} | PUZZLE, SUDOKU),
    "hrm": ({"name": "hrm", "h_layers": 1, "l_layers": 1, "h_cycles": 2, "l_cycles": 2, "halt_max_steps": 2,
             "halt_exploration_prob": 0.0, "act_mode": "fixed"} | PUZZLE, SUDOKU),
}  # fmt: skip


@pytest.fixture
def group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _grads(recipe, strategy: str, batch) -> tuple[dict, list[str]]:
    """Each parameter's gradient (whole) after one forward and backward of `batch`, the model built on meta and
    wrapped as run.wrap does under `strategy`, from seed 3; and the view warnings torch gave."""
    with torch.device("meta"):
        model = families.torch_side(recipe.model.name).build(recipe)
    wrap = SimpleNamespace(reproducibility="deterministic", parallel=Parallel(strategy, True), compile=False,
                           activation_checkpointing="none")  # fmt: skip
    plan = SimpleNamespace(accumulation=1, precision="fp32", nodes=1, devices_per_node=1)
    reduction = prepare(model, wrap, plan, select("cpu", 0), seed=3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        reduction.model(*batch).backward()
    said = [str(w.message) for w in seen if "returned a view tensor" in str(w.message)]
    full = lambda g: g.full_tensor() if hasattr(g, "full_tensor") else g  # noqa: E731 (a DTensor's shards, whole)
    return {n: full(p.grad) for n, p in model.named_parameters() if p.grad is not None}, said


@pytest.mark.parametrize("family", list(MODELS))
def test_fsdp_heads_return_no_view_and_give_ddps_gradients_on_the_same_batch(group, small_config, family):
    model, task = MODELS[family]
    small_config["recipe"]["model"] = model
    if task:
        small_config["recipe"]["task"] = task
    recipe = resolve(small_config).cells[0].recipe
    batch = TensorDataset(*families.torch_side(family).tables(recipe)[0])[:4]
    ddp, _ = _grads(recipe, "ddp", batch)
    fsdp, said = _grads(recipe, "fsdp", batch)
    assert said == [], said
    assert sorted(fsdp) == sorted(ddp) and len(ddp) > 4
    for name in ddp:
        torch.testing.assert_close(fsdp[name], ddp[name], rtol=1e-6, atol=1e-8, msg=name)
