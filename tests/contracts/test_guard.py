"""The divergence guard (hwsweep.contracts.guard) on real loss series, and wired into the runner of a user's command."""

import json
import math
import re

import pytest
from conftest import REPO

from hwsweep.contracts import guard
from hwsweep.contracts.guard import Guard, GuardConfig
from hwsweep.contracts.records import RunRecord, read
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import runner

SERIES = json.loads((REPO / "tests/data/loss_series.json").read_text())


def feed_all(config, series):
    g = Guard(config)
    said = [(s, v) for s, loss in zip(series["steps"], series["values"]) if (v := g.feed(s, loss))]
    return g, said


def _first_above(values, factor=10, early_steps=5):
    """0-based index of the first loss above factor x the lowest of the first early_steps (computed here)."""
    return next(i for i, v in enumerate(values) if v > factor * min(values[:early_steps]))


# With the defaults (factor 10, patience 10) and no dip back below the line in between (checked below).
BLOWN_UP_AT = _first_above(SERIES["lr10_fp32"]["values"]) + 10


def test_the_lr10_fp32_run_is_caught_with_the_step_and_values():
    g, said = feed_all(GuardConfig(), SERIES["lr10_fp32"])
    assert len(said) == 1  # said once, at the step the streak reached patience
    step, line = said[0]
    values = SERIES["lr10_fp32"]["values"]
    early = min(values[:5])
    first = _first_above(values)
    assert all(v > 10 * early for v in values[first:first + 10])
    assert step == BLOWN_UP_AT  # patience 10: the tenth consecutive step above 10 x early
    expected = f"loss blew up: {values[step - 1]:.6g} at step {step}, above 10 x its early value {early:.6g}"
    assert line.startswith(expected), line
    assert f"since step {first + 1}" in line and "lower recipe.optimizer.lr" in line and "\n" not in line
    assert g.finish() is None  # one verdict per run


def test_a_healthy_run_is_not_flagged_even_with_a_tight_guard():
    healthy = SERIES["lr0.003_fp32"]
    for config in (GuardConfig(), GuardConfig(factor=1.5, patience=1, early_steps=1)):
        g, said = feed_all(config, healthy)
        assert said == [] and g.finish() is None


@pytest.mark.parametrize(
    "config, losses, step, words",
    [
        (GuardConfig(patience=3), [3.0, 3.1, 40, 50, 60], 5, "for 3 consecutive steps since step 3"),
        (GuardConfig(patience=3), [3.0, 40, 50, 2.0, 40, 50, 60], 7, "since step 5"),  # a dip restarts the count
        (GuardConfig(factor=2, patience=2), [3.0, 2.0, 4.5, 5.0], 4, "above 2 x its early value 2 = 4"),
        (GuardConfig(), [2.0, math.nan], 2, "loss is nan at step 2 (last finite loss: 2 at step 1)"),
        (GuardConfig(), [math.inf], 1, "loss is inf at step 1 (last finite loss: none)"),
    ],
)
def test_verdicts(config, losses, step, words):
    g = Guard(config)
    said = [(s, v) for s, loss in enumerate(losses, 1) if (v := g.feed(s, loss))]
    assert [s for s, _ in said] == [step] and words in said[0][1], said


def test_chance_level_at_the_end():
    config = GuardConfig(chance_loss=math.log(16))
    assert guard.judge(config, [1, 2, 3], [2.9, 2.85, 2.8]).startswith("final loss 2.8 at step 3 is at chance level")
    assert guard.judge(config, [1, 2, 3], [2.9, 2.5, 2.1]) is None
    assert guard.judge(GuardConfig(), [1, 2, 3], [2.9, 2.85, 2.8]) is None  # not checked without a chance loss


def test_resuming_replays_the_recorded_losses_to_the_same_verdict():
    values, steps = SERIES["lr10_fp32"]["values"], SERIES["lr10_fp32"]["steps"]
    whole = guard.judge(GuardConfig(), steps, values)
    g = Guard(GuardConfig())
    for s, v in zip(steps[:6], values[:6]):  # the checkpoint's history, fed again after the restart
        g.feed(s, v)
    rest = [v for s, loss in zip(steps[6:], values[6:]) if (v := g.feed(s, loss))]
    assert rest == [whole]


def test_guard_config_defaults_chance_auto_and_refusals(small_config):
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0)
    assert spec.guard == GuardConfig(action="fail", factor=10, patience=10, early_steps=5, chance_loss=None)
    small_config["guard"] = {"action": "flag", "chance_loss": "auto"}
    small_config["suites"]["tiny"]["sweep"] = {"task.vocab_size": [16, 64]}
    m = resolve(small_config)
    assert [m.spec("tiny", v, "cpu1", 0).guard.chance_loss for v in ("vocab_size-16", "vocab_size-64")] == [
        math.log(16), math.log(64)]  # fmt: skip
    for bad, words in (({"action": "warn"}, "guard.action: 'warn' is invalid"), ({"factor": 1}, "guard.factor: 1"),
                       ({"patience": 2.0}, "guard.patience: 2.0 is invalid; write 2, an integer without a dot or an exponent")):  # fmt: skip
        small_config["guard"] = bad
        with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
            resolve(small_config)


# -- the runner of a user's command: the parsed loss series --------------------------------

DIVERGING = """
    import json, os
    losses = json.loads(open(os.path.join(os.path.dirname(__file__), "losses.json")).read())
    for step, loss in enumerate(losses, 1):
        print(f"step {step}: val_loss {loss} acc 0.5")
"""


def _command_run(tmp_path, action):
    from test_command import run_stage

    (tmp_path / "losses.json").write_text(json.dumps(SERIES["lr10_fp32"]["values"][:20]))
    return run_stage(tmp_path, DIVERGING, guard={"action": action},
                     recipe={"global_batch": 32, "micro_batch": 8, "schedule": {"steps": 20, "warmup_steps": 2}})  # fmt: skip


def test_a_diverging_command_fails_under_action_fail(tmp_path, capsys):
    code, path = _command_run(tmp_path, "fail")
    err = capsys.readouterr().err
    assert code == 1 and not path.exists()
    assert "loss blew up: " in err and f"at step {BLOWN_UP_AT}," in err and "guard.action: fail" in err


def test_a_diverging_command_is_kept_and_flagged_under_action_flag(tmp_path):
    code, path = _command_run(tmp_path, "flag")
    checks = read(RunRecord, path).checks
    assert code == 0 and len(checks) == 2 and checks[0].startswith("divergence: loss blew up: ")
    assert f"at step {BLOWN_UP_AT}," in checks[0]
    assert checks[1].startswith("unverified: no process of the command")  # the script trains no torch model


def test_the_guard_watches_the_loss_metric():
    from test_command import metric

    assert runner.loss_metric([metric("acc", goal="max"), metric("val_loss")]) == "val_loss"
    assert runner.loss_metric([metric("train_loss"), metric("x", key="loss")]) == "x"
    assert runner.loss_metric([metric("acc", goal="max"), metric("val_loss", stage="eval")]) is None


LONG_DIVERGING = """
    import json, os, pathlib, sys, time
    args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:])
    losses = json.loads(open(os.path.join(os.path.dirname(__file__), "losses.json")).read())
    losses += [losses[-1]] * 2000  # still blown up: a run that would go on for minutes
    out = pathlib.Path(args["out"]); out.mkdir(parents=True, exist_ok=True)
    for step, loss in enumerate(losses, 1):
        line = {"step": step, "val_loss": loss, "acc": 0.5}
        with open(out / "m.jsonl", "a") as f:
            f.write(json.dumps(line) + "\\n")
        print(f"step {step}: val_loss {loss} acc 0.5", flush=True)
        time.sleep(0.01)
"""


@pytest.mark.parametrize("source", ["output", "metrics_file"])
def test_a_diverging_command_is_stopped_when_the_guard_fires_not_at_its_end(tmp_path, capsys, source):
    from test_command import COMMAND, run_stage

    (tmp_path / "losses.json").write_text(json.dumps(SERIES["lr10_fp32"]["values"][:20]))
    trainer = COMMAND["trainer"] | ({"metrics_file": "m.jsonl"} if source == "metrics_file" else {})
    code, path = run_stage(tmp_path, LONG_DIVERGING, guard={"action": "fail"}, trainer=trainer,
                           recipe={"global_batch": 32, "micro_batch": 8, "schedule": {"steps": 2020, "warmup_steps": 2}})  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1 and not path.exists()
    assert f"at step {BLOWN_UP_AT}," in err and "stopped early" in err, err
    # Stopped within a few lines of the verdict, long before the script's 2,020 steps (its output is the log's).
    last = max(int(n) for n in re.findall(r"^step (\d+):", out, re.M))
    assert BLOWN_UP_AT <= last < BLOWN_UP_AT + 50
