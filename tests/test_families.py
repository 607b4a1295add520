"""The model-family contract (hwsweep/families.py), checked for every registered family."""

import pytest
import torch

from hwsweep.config import resolve
from hwsweep.families import FAMILIES, family, torch_side


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_honours_the_contract(name, small_config):
    small_config["recipe"]["model"]["name"] = name
    recipe = resolve(small_config).spec("tiny", "default", "cpu1", 0).recipe
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
        metrics = fam.evaluate(model, recipe, tuple(t[:16] for t in held_out))
    declared = {m for m, body in family(name).metrics.items() if body["stage"] == "eval"}
    assert set(metrics) == declared
    assert all(v is None or 0 <= v <= 1 for v in metrics.values())


def test_an_unknown_family_is_named():
    with pytest.raises(ValueError, match="recipe.model.name: unknown model family 'nope'"):
        family("nope")
