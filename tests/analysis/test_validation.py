"""Records validation (hwsweep.analysis.validation) and setting damaged files aside (hwsweep.analysis.quarantine): one
judgement of what is done, for status and for the workflow."""

import copy
import dataclasses
import json
import os

import pytest

from hwsweep.analysis import quarantine, validation
from hwsweep.contracts import io
from hwsweep.contracts.records import EvalRecord, RunRecord
from hwsweep.contracts.spec import canonical_json
from hwsweep.plan.config import resolve


@pytest.fixture
def run(tmp_path, monkeypatch, small_config):
    """A finished run on disk (records as the built-in trainer and evaluator write them), in tmp_path."""
    monkeypatch.chdir(tmp_path)
    small_config["recipe"]["schedule"] = {"steps": 6, "warmup_steps": 2}
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0)
    train = RunRecord(
        status="complete", suite="tiny", variant="default", hardware="cpu1", seed=0, trainer="builtin",
        spec=spec.to_dict(), plan=spec.plan.__dict__ | {"threads_per_process": 1}, metrics={"final_loss": 0.5},
        curves={"loss": {"steps": [1, 2, 3, 4, 5, 6], "values": [2.8, 2.1, 1.4, 0.9, 0.6, 0.5]}},
        train_seconds=1.0, startup_seconds=0.5, wall_seconds=2.0, samples_per_second=100.0,
        data_order={"sampler": "global-order"}, segments=[{"start_step": 0}], restarts=0, resumed_from_step=None,
        provenance={}, seeded=True,
    )  # fmt: skip
    evaluation = EvalRecord(suite="tiny", variant="default", hardware="cpu1", seed=0, evaluator="builtin",
                            metrics={"token_accuracy": 0.9, "exact_accuracy": 0.5}, eval_seconds=0.1)  # fmt: skip
    io.write_text(spec.path("spec.json"), canonical_json(spec))
    io.write_json(spec.path("train.json"), train.to_dict())
    io.write_json(spec.path("eval.json"), evaluation.to_dict())
    spec.path("final.pt").write_bytes(b"the model")  # what the built-in evaluator reads
    return spec


def edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_finished_run_is_done(run):
    assert validation.run_state(run) == validation.Verdict("done")


DAMAGE = [
    ("eval.json", lambda d: d["metrics"].update(token_accuracy=1.7), "metric token_accuracy is 1.7, outside its bounds"),
    ("eval.json", lambda d: d["metrics"].update(exact_accuracy=-3), "metric exact_accuracy is -3, outside its bounds"),
    ("eval.json", lambda d: d.update(seed="0"), "seed is '0', not int"),
    ("eval.json", lambda d: d.update(eval_seconds=-1), "eval_seconds is -1, not a finite number >= 0"),
    ("eval.json", lambda d: d.update(seed=1), "it is the record of tiny/default/cpu1/seed1"),
    ("train.json", lambda d: d["curves"]["loss"]["values"].__setitem__(2, float("nan")), "not a finite loss"),
    ("train.json", lambda d: d["curves"]["loss"].update(steps=[1, 2, 3], values=[2.8, 2.1, 0.5]),
     "curve loss has 3 steps, the plan says 6"),
    ("train.json", lambda d: d["plan"].update(steps=60), "plan.steps is 60, the plan says 6"),
    ("train.json", lambda d: d.update(restarts=-1), "restarts is -1"),
    ("train.json", lambda d: d.update(train_seconds="fast"), "train_seconds is 'fast', not float"),
    ("train.json", lambda d: d["metrics"].update(final_loss=float("inf")), "metric final_loss is inf"),
    ("train.json", lambda d: d.update(status="running"), "status 'running', not complete"),
    ("train.json", lambda d: d.pop("curves"), "curves: missing"),
    ("train.json", lambda d: d.update(seeded="yes"), "seeded is 'yes', not"),
    # The record against itself: a final loss its own curve contradicts.
    ("train.json", lambda d: d["metrics"].update(final_loss=2.0), "metric final_loss is 2.0, but the last of its curve loss is 0.5"),
    ("train.json", lambda d: d["curves"]["loss"]["values"].__setitem__(5, 0.4), "the last of its curve loss is 0.4"),
]  # fmt: skip


@pytest.mark.parametrize("name, change, words", DAMAGE, ids=[w[:30] for _, _, w in DAMAGE])
def test_a_damaged_or_implausible_record_makes_the_run_corrupt_and_is_named(run, name, change, words):
    edit(run.path(name), change)
    verdict = validation.run_state(run)
    assert verdict.state == "corrupt" and verdict.path == run.path(name)
    assert verdict.reason.startswith(str(run.path(name))) and words in verdict.reason, verdict.reason


@pytest.mark.parametrize("name, change, words", DAMAGE[:1] + DAMAGE[5:6], ids=["eval", "train"])
def test_records_read_by_the_caller_are_judged_as_the_files_are_and_not_read_again(run, name, change, words):
    """status reads each record once and hands its JSON to run_state: the same verdict as run_state's own reading,
    for a finished run and a damaged one, and no record file read again."""
    from hwsweep.analysis.status import read_records

    for damaged in (False, True):
        if damaged:
            edit(run.path(name), change)
        given, alone = read_records(run), validation.run_state(run)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(io, "read_json", lambda path: pytest.fail(f"{path} read again"))
            assert validation.run_state(run, read_json=given) == alone
        assert (alone.state == "corrupt" and words in alone.reason) if damaged else alone.state == "done"


def test_states_in_pipeline_order(run):
    run.path("eval.json").unlink()
    assert validation.run_state(run).state == "trained"
    assert validation.run_state(run, evaluated=False).state == "done"
    other = copy.deepcopy(run.to_dict())
    other["recipe"]["optimizer"]["lr"] = 0.1  # the record of an earlier config
    edit(run.path("train.json"), lambda d: d.update(spec=other))
    assert validation.run_state(run).state == "stale"
    run.path("train.json").unlink()
    assert validation.run_state(run).state == "missing"
    log = run.path("x").parent.as_posix().replace("results", "logs", 1)
    os.makedirs(log)
    open(f"{log}/train.log", "w").close()
    assert validation.run_state(run).state == "failed"


def test_quarantine_moves_the_damaged_record_and_what_was_made_from_it_aside(run, tmp_path):
    (tmp_path / "results/tiny").mkdir(exist_ok=True)
    (tmp_path / "results/tiny/runs.csv").write_text("a\n1\n")
    run.path("train.json").write_text(run.path("train.json").read_text()[:100])
    run.path("train.json.corrupt").write_text("an earlier one, kept")
    lines = quarantine.settle_runs([run], tmp_path / "results/tiny", evaluated=True, dry_run=True)
    assert len(lines) == 1 and "would move aside" in lines[0] and run.path("train.json").exists()
    assert (tmp_path / "results/tiny/runs.csv").exists()  # a dry run changes nothing

    lines = quarantine.settle_runs([run], tmp_path / "results/tiny", evaluated=True)
    assert len(lines) == 1 and lines[0].startswith(f"hwsweep: {run.path('train.json')}: ")
    assert "train.json -> train.json.corrupt.1, eval.json -> eval.json.corrupt" in lines[0]
    assert not run.path("train.json").exists() and not run.path("eval.json").exists()
    assert run.path("train.json.corrupt").read_text() == "an earlier one, kept"
    assert not (tmp_path / "results/tiny/runs.csv").exists()  # the tables made from it go too
    assert validation.run_state(run).state == "missing"


def test_a_damaged_spec_is_rewritten_older_than_the_record_it_made(run):
    spec_path, record = run.path("spec.json"), run.path("train.json")
    spec_path.write_text("garbage")
    os.utime(record, (1000, 1000))
    assert "is damaged; rewritten" in quarantine.settle_spec(run)[0]
    assert spec_path.read_text() == canonical_json(run) and spec_path.stat().st_mtime < record.stat().st_mtime
    spec_path.unlink()  # deleted by hand: regenerated the same way
    assert "is missing; rewritten" in quarantine.settle_spec(run)[0]
    assert spec_path.stat().st_mtime < record.stat().st_mtime
    assert quarantine.settle_spec(run) == []  # nothing to do once it is right


def test_a_spec_of_another_run_is_rewritten_and_left_newer(run):
    spec_path, record = run.path("spec.json"), run.path("train.json")
    spec_path.write_text("{")
    edit(record, lambda d: d.update(restarts=-5))  # the record is damaged too: it must be redone
    os.utime(record, (1000, 1000))
    quarantine.settle_spec(run)
    assert spec_path.stat().st_mtime > record.stat().st_mtime


def test_a_command_trainers_final_may_add_values_without_a_step_but_not_contradict_a_min(run):
    data = json.loads(run.path("train.json").read_text())
    data["trainer"] = "command"
    metric = next(m for m in run.metrics if m.name == "final_loss")
    for reduce, final, ok in (("last", 0.45, True), ("min", 0.45, True), ("min", 0.6, False), ("max", 2.9, True)):
        spec = dataclasses.replace(run, metrics=[dataclasses.replace(metric, reduce=reduce)])
        record = RunRecord.from_dict(data | {"metrics": {"final_loss": final}})
        assert (validation.train_problems(record, spec) == []) == ok, (reduce, final)


def _lose_the_checkpoint(run, eval_json):
    run.path("final.pt").unlink()
    if eval_json == "missing":
        run.path("eval.json").unlink()
    elif eval_json == "damaged":
        run.path("eval.json").write_text("garbage")


@pytest.mark.parametrize("eval_json", ["missing", "damaged"])
def test_a_lost_final_checkpoint_with_an_evaluation_to_redo_retrains_the_run(run, tmp_path, eval_json):
    _lose_the_checkpoint(run, eval_json)
    verdict = validation.run_state(run)
    assert verdict.state == "corrupt" and verdict.path == run.path("train.json")
    assert verdict.reason.startswith(f"{run.path('final.pt')}: the final checkpoint is missing")
    assert validation.run_state(run, evaluated=False).state == "done"  # nothing to evaluate: nothing needed
    (line,) = quarantine.settle_runs([run], None, evaluated=True)
    assert "train.json -> train.json.corrupt" in line and not run.path("train.json").exists()
    assert validation.run_state(run).state == "missing"  # snakemake trains it (resuming from checkpoints/)


def test_a_lost_final_checkpoint_of_an_evaluated_run_is_named_and_needs_nothing(run):
    _lose_the_checkpoint(run, "kept")
    verdict = validation.run_state(run)
    assert verdict.state == "done" and "final checkpoint is missing (not needed" in verdict.reason
    assert quarantine.settle_runs([run], None, evaluated=True) == []


def test_status_names_the_repairs_the_next_all_needs_and_those_made_before(run):
    run.path("spec.json").write_text("garbage")
    _lose_the_checkpoint(run, "damaged")
    (rewrite, move) = quarantine.repairs(run, evaluated=True)
    assert rewrite.startswith("the next all: ") and "spec.json is damaged; would rewrite from the config" in rewrite
    assert move.startswith("the next all: ") and "final checkpoint is missing" in move and "would move aside" in move
    quarantine.settle_runs([run], None, evaluated=True)
    made = quarantine.repairs(run, evaluated=True)
    assert len(made) == 2 and all(line.startswith("an earlier all (20") for line in made)  # status writes nothing
    assert "spec.json is damaged; rewritten from the config" in made[0] and "moved aside" in made[1]


def test_status_says_evaluating_while_a_trained_runs_evaluation_runs_here_or_in_slurm(run):
    from hwsweep.analysis import status
    from hwsweep.analysis.holders import Scheduler, job_comment
    from hwsweep.contracts.scheduler import Job

    run.path("eval.json").unlink()  # trained; its evaluation is under way, its log says nothing yet
    run.log_path("evaluate.log").parent.mkdir(parents=True, exist_ok=True)
    run.log_path("evaluate.log").write_text("")
    nobody = Scheduler(ask=lambda: [])
    assert status.run_status(run, True, set(), nobody) == {"state": "trained", "problem": "empty log", "scheduler": ""}
    here = frozenset({os.path.abspath(run.path("spec.json"))})  # hwsweep.run.evaluate of it runs on this node
    assert status.run_status(run, True, set(), nobody, here) == {"state": "evaluating", "problem": "", "scheduler": ""}
    job = Job(id="12", state="RUNNING", nodes="h100-1", comment=job_comment("evaluate", run), workdir=os.getcwd())
    row = status.run_status(run, True, set(), Scheduler(ask=lambda: [job]))
    assert row == {"state": "evaluating", "problem": "", "scheduler": "job 12 RUNNING, on h100-1"}
    # The run's one SLURM job (train and evaluate grouped: workflow/rules/allocation.smk), newer than an old one.
    group = f"rule_run_{run.suite}_{run.variant}_{run.hardware_name}_seed{run.seed}_evaluate_train"
    jobs = [job, Job(id="13", state="RUNNING", nodes="h100-2", comment=group, workdir=os.getcwd())]
    row = status.run_status(run, True, set(), Scheduler(ask=lambda: jobs))
    assert row == {"state": "evaluating", "problem": "", "scheduler": "job 13 RUNNING, on h100-2"}
    run.path("train.json").unlink()  # not trained: the same job is training it
    row = status.run_status(run, True, set(), Scheduler(ask=lambda: jobs[1:]))
    assert row["state"] == "running" and row["scheduler"] == "job 13 RUNNING, on h100-2"
