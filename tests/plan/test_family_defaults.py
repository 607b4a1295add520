"""A model family's own defaults: `model: {name: hrm}` alone trains with the original HRM's optimizer and schedule
(sapientinc/HRM config/cfg_pretrain.yaml, pretrain.py), the other families with the general ones (AdamW, cosine);
a value the config or a suite writes wins; the configuration reference shows both."""

from __future__ import annotations

import sys

import pytest
import yaml
from conftest import REPO

from hwsweep.plan.config import ConfigError, resolve
from hwsweep.plan.config.schema import family_defaults, load_schema

# The original's settings, read off its code: AdamATan2(lr, weight_decay=0.1, betas=(0.9, 0.95)), no clipping,
# lr_warmup_steps 2000 then lr_min_ratio 1.0 (constant), the sparse embedding's SignSGD at puzzle_emb_lr 1e-2 and
# puzzle_emb_weight_decay 0.1.
ORIGINAL = {"optimizer": {"name": "adam_atan2", "lr": 1e-4, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95,
                          "grad_clip": 0, "puzzle_emb_lr": 0.01, "puzzle_emb_weight_decay": 0.1},
            "schedule": {"warmup_steps": 2000, "decay": "constant", "min_lr_ratio": 1.0}}  # fmt: skip
SMALL = {"width": 16, "heads": 2, "h_layers": 1, "l_layers": 1, "depth": 2}


def _config(recipe: dict, suites: dict | None = None) -> dict:
    return {"recipe": recipe, "suites": suites or {"s": {}}, "seeds": [0], "baseline": "cpu1",
            "hardware": {"cpu1": {"accelerator": "cpu"}}}  # fmt: skip


def _settings(r) -> dict:
    return {section: {k: getattr(getattr(r, section), k) for k in ORIGINAL[section]} for section in ORIGINAL}


def test_a_minimal_hrm_config_resolves_to_the_original_settings():
    r = resolve(_config({"task": {"name": "sudoku"}, "model": {"name": "hrm"}})).cells[0].recipe
    assert _settings(r) == ORIGINAL
    assert r.schedule.steps > r.schedule.warmup_steps  # the warmup fits the family's steps
    alone = resolve(_config({"model": {"name": "hrm"}})).cells[0].recipe  # no task: the original's sudoku
    assert _settings(alone) == ORIGINAL and alone.task.name == "sudoku"


def test_a_model_family_written_as_family_is_answered_with_the_key_that_names_it():
    with pytest.raises(ConfigError) as refused:
        resolve(_config({"model": {"family": "hrm"}}))
    assert str(refused.value) == "recipe.model.family: unknown key; the model's family is its name: write name: 'hrm'"


def test_other_families_keep_the_general_defaults_and_written_values_win():
    plain = resolve(_config({"task": {"name": "sudoku"}, "model": {"name": "deep_transformer", **_only(SMALL, "depth")}}))
    r = plain.cells[0].recipe
    assert (r.optimizer.name, r.optimizer.lr, r.optimizer.grad_clip) == ("adamw", 0.003, 1.0)
    assert (r.schedule.decay, r.schedule.min_lr_ratio, r.schedule.warmup_steps) == ("cosine", 0.1, 30)
    written = {"task": {"name": "sudoku"}, "model": {"name": "hrm"}, "optimizer": {"lr": 0.003, "grad_clip": 1.0},
               "schedule": {"steps": 100, "warmup_steps": 10}}  # fmt: skip
    r = resolve(_config(written)).cells[0].recipe
    assert (r.optimizer.lr, r.optimizer.grad_clip, r.schedule.steps, r.schedule.warmup_steps) == (0.003, 1.0, 100, 10)
    assert (r.optimizer.name, r.schedule.decay, r.schedule.min_lr_ratio) == ("adam_atan2", "constant", 1.0)


def _only(model: dict, *keys: str) -> dict:
    return {k: v for k, v in model.items() if k in keys or k in ("width", "heads")}


def test_a_suite_that_names_another_family_takes_that_familys_defaults():
    recipe = {"task": {"name": "sudoku"}, "model": {"name": "deep_transformer", **_only(SMALL, "depth")},
              "schedule": {"steps": 3000}}  # fmt: skip
    suites = {"transformer": {}, "hrm": {"overrides": {"model": {"name": "hrm", **_only(SMALL, "h_layers", "l_layers")}}}}
    cells = {c.suite: c.recipe for c in resolve(_config(recipe, suites)).cells}
    assert cells["transformer"].optimizer.name == "adamw" and cells["transformer"].schedule.decay == "cosine"
    assert _settings(cells["hrm"]) == ORIGINAL and cells["hrm"].schedule.steps == 3000  # the recipe's steps stay
    back = {"hrm": {}, "plain": {"overrides": {"model": {"name": "deep_transformer", **_only(SMALL, "depth")}}}}
    cells = {c.suite: c.recipe for c in resolve(_config({"task": {"name": "sudoku"}, "model": {
        "name": "hrm", **_only(SMALL, "h_layers", "l_layers")}}, back)).cells}  # fmt: skip
    assert cells["hrm"].optimizer.name == "adam_atan2" and cells["plain"].optimizer.name == "adamw"


def test_the_shipped_hrm_configs_train_every_suite_under_the_original_optimizer_and_schedule():
    for path in ("config/hrm_cpu.yaml", "config/hrm.yaml"):
        raw = yaml.safe_load((REPO / path).read_text())
        defaults = {k: v for k, v in ORIGINAL["optimizer"].items() if k not in ("lr", "grad_clip")}
        assert {k: raw["recipe"]["optimizer"].get(k, v) for k, v in defaults.items()} == defaults, path
        for cell in resolve(raw).cells:  # the deep_transformer suite, another family, as well
            r = cell.recipe
            assert (r.optimizer.name, r.schedule.decay, r.schedule.min_lr_ratio) == ("adam_atan2", "constant", 1.0)


def test_the_configuration_reference_shows_the_family_defaults():
    assert family_defaults(load_schema())[("optimizer", "name")] == {"hrm": "adam_atan2"}
    sys.path.insert(0, str(REPO / "tools"))
    import reference

    page = reference.config_reference()
    name = page[page.index("### `recipe.optimizer.name`"):page.index("### `recipe.optimizer.lr`")]
    assert '**Default:** `"adamw"`' in name and '**Default with** `recipe.model.name: hrm`**:** `"adam_atan2"`' in name
