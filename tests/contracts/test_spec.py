"""RunSpec: the trainer's only input round-trips and refuses unknown or missing keys."""

import json

import pytest
import yaml
from conftest import REPO

from hwsweep.contracts import typed
from hwsweep.contracts.spec import RunSpec, canonical_json
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


@pytest.mark.parametrize("config", ["config/config.yaml", "config/hrm_cpu.yaml"])
def test_canonical_json_is_the_specs_own_data(config):
    """spec.json's text is made from records shared between runs (typed.shared_dict): it is each spec's to_dict all
    the same, and a to_dict changed by its caller, before or after a text was made, changes no spec's text."""
    for made_first in (False, True):
        matrix = resolve(yaml.safe_load((REPO / config).read_text()))
        specs = [matrix.spec(r.suite, r.variant, r.hardware, r.seed) for s in matrix.suites for r in matrix.runs(s)]
        first, second = specs[0], next(s for s in specs[1:] if s.recipe is specs[0].recipe)
        if made_first:
            canonical_json(first)
        first.to_dict()["recipe"]["optimizer"]["lr"] = -1.0
        assert '"lr": -1.0' not in canonical_json(second)
        assert typed.shared_dict(second.recipe) is typed.shared_dict(first.recipe)  # made into data once
        for spec in specs:
            assert canonical_json(spec) == json.dumps(spec.to_dict(), sort_keys=True) + "\n"


def test_a_specs_text_leaves_its_records_as_they_were():
    """Making spec.json's text keeps nothing on the records it reads: their fields (__dict__, read as the record's
    fields by the trainer's provenance and the estimate) are the same before and after."""
    spec = _spec()
    before = {name: dict(vars(getattr(spec, name))) for name in ("recipe", "plan", "hardware", "trainer")}
    before["model"] = dict(vars(spec.recipe.model))
    canonical_json(spec)
    after = {name: dict(vars(getattr(spec, name))) for name in ("recipe", "plan", "hardware", "trainer")}
    after["model"] = dict(vars(spec.recipe.model))
    assert after == before
