"""The model-family contract (hwsweep/models/families.py), checked for every registered family."""

from types import SimpleNamespace

import pytest
import torch

from hwsweep.models.families import FAMILIES, family, torch_side
from hwsweep.plan.config import resolve
from hwsweep.run.evaluate import costs


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_honours_the_contract(name, small_config):
    if name == "transformer":
        small_config["recipe"]["model"]["name"] = name
    else:  # the puzzle families: a small 4x4 sudoku, every other key from the schema's defaults
        small_config["recipe"]["task"] = {"name": "sudoku", "size": 4, "blanks": 4, "train_size": 64, "eval_size": 32}
        small_config["recipe"]["model"] = {"name": name, "width": 32, "heads": 2}
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0)
    recipe = spec.recipe
    fam = torch_side(name)
    train, held_out = fam.tables(recipe)
    again, _ = fam.tables(recipe)
    assert all(torch.equal(a, b) for a, b in zip(train, again))  # fixed seeds, never the run's
    assert len({len(t) for t in train}) == 1 and len({len(t) for t in held_out}) == 1
    torch.manual_seed(0)
    model = fam.build(recipe)
    idx = torch.arange(8)
    loss = model(*[t[idx] for t in train])
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    model.eval()
    with torch.no_grad():
        metrics = fam.evaluate(model, recipe, tuple(t[:16] for t in held_out), curves={})  # the final evaluation
    metrics |= costs(spec, SimpleNamespace(flops_per_step=1e9), 10, metrics)  # from the training record's FLOPs
    declared = {m: body for m, body in family(name).metrics.items() if body["stage"] == "eval"}
    assert set(metrics) == set(declared)
    for m, v in metrics.items():
        low, high = declared[m].get("bounds", [0, 1])
        assert v is None or low <= v <= high, (m, v)


def test_an_unknown_family_is_named():
    with pytest.raises(ValueError, match="recipe.model.name: unknown model family 'nope'"):
        family("nope")
