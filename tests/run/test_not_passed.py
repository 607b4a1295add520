"""Nothing unpassed unsaid: every recipe setting no flag gives a user's script (warmup, decay, optimizer, gradient
clip, precision) is named once at planning, in `hwsweep plan`'s table and in the record's not_passed; the table shows
the values the script gets; a startup no printed step ends is unknown, not 0."""

import json
import subprocess
import sys

import pytest
from conftest import script_config

from hwsweep.contracts.records import RunRecord, read
from hwsweep.contracts.spec import canonical_json
from hwsweep.plan.config import resolve
from hwsweep.plan.table import plan_rows

UNPASSED = ["recipe.optimizer.lr", "recipe.optimizer.weight_decay", "recipe.optimizer.beta1", "recipe.optimizer.beta2",
            "recipe.optimizer.grad_clip", "recipe.optimizer.name", "recipe.schedule.warmup_steps",
            "recipe.schedule.min_lr_ratio", "recipe.precision"]  # fmt: skip


def config(args=None, recipe_args=None):
    return script_config(
        {"command": ["python", "no_step.py"], "args": args or {"steps": "steps", "batch": "micro_batch"}},
        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 1}, "args": recipe_args or {}},
        {"loss": {"goal": "min"}})


def test_every_setting_no_flag_passes_is_warned_once_and_shown_in_the_plan():
    from hwsweep.contracts.command import not_passed

    matrix = resolve(config())
    spec = matrix.spec("s", "default", "cpu1", 0)
    assert not_passed(spec.trainer, spec.recipe.args) == UNPASSED
    for key in UNPASSED:  # each named in exactly one warning
        assert sum(key.removeprefix("recipe.") in w for w in matrix.warnings) == 1, (key, matrix.warnings)
    [row] = plan_rows(matrix)
    assert row["not_passed"].split() == ["lr", "weight_decay", "beta1", "beta2", "grad_clip", "optimizer",
                                         "warmup_steps", "min_lr", "precision"]  # fmt: skip
    passed = resolve(config(args={"steps": "steps", "batch": "micro_batch", "w": "warmup_steps", "o": "optimizer",
                                  "r": "min_lr_ratio", "p": "precision"}))  # fmt: skip
    spec = passed.spec("s", "default", "cpu1", 0)
    assert [k for k in UNPASSED if k not in not_passed(spec.trainer, spec.recipe.args)] == [
        "recipe.optimizer.name", "recipe.schedule.warmup_steps", "recipe.schedule.min_lr_ratio", "recipe.precision"]


def test_the_plan_shows_the_values_the_script_gets():
    matrix = resolve(config(recipe_args={"lr": 20, "warmup_steps": 0, "optimizer": "sgd"}))
    [row] = plan_rows(matrix)
    assert row["lr"] == 20  # the script's, not the recipe's 0.003
    assert row["not_passed"].split() == ["weight_decay", "beta1", "beta2", "grad_clip", "min_lr", "precision"]
    from hwsweep.contracts.command import as_passed

    plan, spec = as_passed(matrix.spec("s", "default", "cpu1", 0))
    assert (plan["lr"], plan["warmup_steps"]) == (20, 0)
    assert spec["recipe"]["optimizer"]["name"] == "sgd" and spec["recipe"]["schedule"]["warmup_steps"] == 0


@pytest.mark.slow
def test_a_script_that_prints_no_step_has_an_unknown_startup_and_its_unpassed_settings_on_record(tmp_path):
    spec = resolve(config()).spec("s", "default", "cpu1", 0)
    run = tmp_path / spec.run_dir
    run.mkdir(parents=True)
    (run / "spec.json").write_text(canonical_json(spec))
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", f"{spec.run_dir}/spec.json", "--threads", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = read(RunRecord, run / "train.json")
    assert record.startup_seconds is None and record.train_seconds > 0
    assert record.not_passed == UNPASSED and record.observed["optimizer_steps"] == 3
    assert json.loads((run / "train.json").read_text())["startup_seconds"] is None
