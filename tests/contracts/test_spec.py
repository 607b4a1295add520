"""RunSpec: the trainer's only input round-trips and refuses unknown or missing keys."""

import json

import pytest
import yaml
from conftest import REPO

from hwsweep.contracts.spec import RunSpec
from hwsweep.contracts.typed import SpecError
from hwsweep.plan.config import resolve


def _spec():
    return resolve(yaml.safe_load((REPO / "config/config.yaml").read_text())).spec("width", "width-64", "cpu2", 1)


def test_round_trip_through_json(tmp_path):
    spec = _spec()
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    assert RunSpec.load(path) == spec
    assert spec.plan.micro_batch * spec.plan.world_size * spec.plan.accumulation == spec.plan.global_batch


@pytest.mark.parametrize("where", ["top", "recipe.model", "plan"])
def test_unknown_key_fails_loudly(where):
    data = _spec().to_dict()
    node = data if where == "top" else data[where.split(".")[0]] if "." not in where else data["recipe"]["model"]
    node["typo"] = 1
    with pytest.raises(SpecError, match=r"typo: unknown key"):
        RunSpec.from_dict(data, "spec")


def test_missing_key_fails_loudly():
    data = _spec().to_dict()
    del data["recipe"]["schedule"]["steps"]
    with pytest.raises(SpecError, match=r"^spec.recipe.schedule.steps: missing$"):
        RunSpec.from_dict(data, "spec")
