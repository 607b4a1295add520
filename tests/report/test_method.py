"""The report's method text as the runs were made (hwsweep.report.method): where the records say a script received
no flag for a recipe setting (not_passed), the sentence that says the schedule and the precision are the recipe's
on every hardware names what the recipe held and what each suite's script chose itself."""

import json

import pytest
from conftest import REPO, script_config

from hwsweep.contracts import io
from hwsweep.plan.config import resolve
from hwsweep.report import method

WARMUP, PRECISION, DECAY = "recipe.schedule.warmup_steps", "recipe.precision", "recipe.optimizer.weight_decay"


def matrix():
    cfg = script_config({"command": ["python", "no_step.py"], "args": {"steps": "steps", "batch": "micro_batch"}},
                        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 1}},
                        {"loss": {"goal": "min"}})  # fmt: skip
    cfg["suites"]["t"] = {}
    cfg["seeds"] = [0, 1]
    return resolve(cfg)


def test_the_template_holds_the_sentence_the_records_may_change():
    assert method.LOCKED in (REPO / "workflow/report/workflow.rst").read_text()


def test_every_setting_received_keeps_the_sentence_and_each_unpassed_one_is_named():
    assert method.locked_sentence({}) == method.LOCKED
    said = method.locked_sentence({"s": [WARMUP, PRECISION], "t": [DECAY]})
    assert said.startswith("The global batch and the number of optimizer steps are the recipe's on every hardware (")
    assert "schedule (in optimizer steps)" not in said and "precision are" not in said
    assert "the script of suite ``s`` received no flag for ``warmup_steps`` and ``precision``; the script of suite " \
           "``t`` received no flag for ``weight_decay``: it used its own values there" in said  # fmt: skip
    assert said.endswith("the records' ``not_passed``);")
    decay_only = method.locked_sentence({"s": [DECAY, "recipe.optimizer.name"]})
    assert decay_only.startswith("The global batch, the schedule (in optimizer steps) and the precision are the ")
    assert "no flag for ``weight_decay`` and ``optimizer``:" in decay_only


def test_the_records_say_what_each_suites_script_did_not_receive(tmp_path):
    m = matrix()
    runs = {(r.suite, r.seed): r.run_dir for r in m.runs()}
    io.write_json(tmp_path / runs["s", 0] / "train.json", {"not_passed": [WARMUP, PRECISION]})
    io.write_json(tmp_path / runs["s", 1] / "train.json", {"not_passed": [WARMUP, DECAY]})
    (tmp_path / runs["t", 0]).mkdir(parents=True)
    (tmp_path / runs["t", 0] / "train.json").write_text("{damaged")  # and t's seed 1 not trained: nothing to say
    assert method.not_passed(m, tmp_path) == {"s": [WARMUP, PRECISION, DECAY]}
    io.write_json(tmp_path / runs["t", 1] / "train.json", {"not_passed": []})  # a script that got every setting
    assert method.not_passed(m, tmp_path) == {"s": [WARMUP, PRECISION, DECAY]}
    written = method.template(REPO / "workflow/report/workflow.rst", m, tmp_path / "out.rst", tmp_path)
    text = written.read_text()
    assert method.LOCKED not in text and "suite ``s`` received no flag for ``warmup_steps``, ``precision`` and " \
        "``weight_decay``" in text and "only the split into devices" in text  # fmt: skip


@pytest.mark.slow
def test_the_reports_method_text_names_what_the_example_script_did_not_receive(plain_ddp_swept):
    folder, _, report = plain_ddp_swept
    assert report.returncode == 0, report.stderr[-3000:]
    record = json.loads((folder / "results/plain_ddp/hidden-32/cpu1/seed0/train.json").read_text())
    assert record["not_passed"]  # the example maps no weight decay, betas, ...
    landing = (folder / ".snakemake/hwsweep/landing.rst").read_text()
    assert method.LOCKED not in landing and "the script of suite ``plain_ddp`` received no flag for" in landing
