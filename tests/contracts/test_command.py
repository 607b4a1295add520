"""The command contract: plan values to flags, metrics from output, one-line config errors, and
the runner's verdict on a finished command (with small stand-in scripts, no torch)."""

import copy
import json
import re
import subprocess
import sys
import textwrap

import pytest

from hwsweep.contracts import command
from hwsweep.contracts.metrics import Metric, TextParser, parse_jsonl_line, summarise
from hwsweep.contracts.records import RunRecord, read
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import runner

STEP = r"\b(?:step|iter|iteration|global_step)\b\s*[:=#]?\s*(\d+)"

COMMAND = {
    "recipe": {"global_batch": 32, "micro_batch": 8, "schedule": {"steps": 20, "warmup_steps": 2}},
    "trainer": {
        "command": ["python", "script.py"],
        "args": {"bs": "micro_batch", "accum": "accumulation", "steps": "steps", "seed": "seed", "precision": "precision",
                 "out": "run_dir"},
        "values": {"precision": {"fp32": "float32"}},
    },
    "metrics": {"val_loss": {"goal": "min", "margin": 0.1}, "acc": {"goal": "max", "margin": 0.02, "bounds": [0, 1]}},
    "suites": {"s": {}},
    "seeds": [0, 1],
    "hardware": {"cpu1": {"accelerator": "cpu"}, "cpu2": {"accelerator": "cpu", "devices_per_node": 2}},
    "baseline": "cpu1",
}


def metric(name, **kw):
    base = {"name": name, "goal": "min", "margin": None, "primary": True, "stage": "train", "pattern": None,
            "key": None, "reduce": "last", "bounds": None}  # fmt: skip
    return Metric.from_dict(base | kw)


def script(tmp_path, body: str):
    (tmp_path / "script.py").write_text(textwrap.dedent(body))
    return tmp_path


def matrix(tmp_path, **changes):
    cfg = copy.deepcopy(COMMAND)
    for key, value in changes.items():
        cfg[key] = value
    return resolve(cfg, config_dir=tmp_path)


# -- flags --------------------------------------------------------------------------------


def test_plan_values_become_flags_in_each_style(tmp_path):
    script(tmp_path, "")
    m = matrix(tmp_path)
    spec = m.spec("s", "default", "cpu2", 1)
    values = command.plan_values(spec)
    assert values["micro_batches_per_step"] == 4 and values["per_device_batch"] == 16 and values["accumulation"] == 2
    inv = spec.trainer.invocation
    args = command.arguments(inv, values, {"n_layer": 4, "compile": False})
    assert args[:5] == ["--bs=8", "--accum=2", "--steps=20", "--seed=1", "--precision=float32"]
    assert args[5].startswith("--out=/") and args[5].endswith("results/s/default/cpu2/seed1")
    assert args[6:] == ["--n_layer=4", "--compile=false"]
    spaced = command.Invocation.from_dict(inv.to_dict() | {"arg_style": "--k v"})
    assert command.arguments(spaced, values, {})[:2] == ["--bs", "8"]
    hydra = command.Invocation.from_dict(inv.to_dict() | {"arg_style": "k=v"})
    assert command.arguments(hydra, values, {})[0] == "bs=8"
    flags = command.Invocation.from_dict(inv.to_dict() | {"args": {"tf32": "tf32", "det": "deterministic"},
                                                          "values": {"tf32": {"false": "@omit"},
                                                                     "deterministic": {"true": "@flag"}}})  # fmt: skip
    assert command.arguments(flags, values, {}) == ["--det"]


def test_torchrun_starts_every_command_tethered_to_its_agent(tmp_path):
    from hwsweep.run import tether

    inv = matrix(script(tmp_path, "")).trainer.invocation
    spec = matrix(tmp_path).spec("s", "default", "cpu2", 0)
    argv = command.command_argv(spec, inv)
    assert argv[0] == sys.executable and argv[1] == str(tmp_path / "script.py")  # found from any working folder
    assert tether.tethered(argv) == ["-m", "hwsweep.run.tether", *argv]


# -- metrics ------------------------------------------------------------------------------


def test_default_pattern_reads_the_usual_log_lines():
    parser = TextParser([metric("loss"), metric("val_loss"), metric("acc", goal="max")], STEP)
    assert parser.feed("step 10: loss 0.4123") == [{"metric": "loss", "step": 10, "value": 0.4123}]
    assert parser.feed("iter 20: val loss 1.5e-1, acc=0.75") == [
        {"metric": "val_loss", "step": 20, "value": 0.15}, {"metric": "acc", "step": 20, "value": 0.75}]  # fmt: skip
    assert parser.feed("final val_loss: 0.2") == [{"metric": "val_loss", "step": None, "value": 0.2}]
    assert parser.feed("lossless 3 accuracy 4 my_loss 5 loss.txt") == []


WORD_LM = [  # the lines of the PyTorch word-language-model example's style (tests/data/scripts/word_lm_like.py)
    "| epoch   1 |    20/   24 batches | lr 20.00 | ms/batch  5.32 | loss  4.12 | ppl    61.36",
    "| end of epoch   1 | time:  0.12s | valid loss  4.10 | valid ppl    60.42",
    "| End of training | test loss  4.00 | test ppl    54.47",
]


def test_default_patterns_match_whole_names_only():
    parser = TextParser([metric("loss"), metric("test_loss"), metric("ppl")], r"\|\s*(\d+)/\s*\d+ batches")
    found = [parser.feed(line) for line in WORD_LM]
    assert found[0] == [{"metric": "loss", "step": 20, "value": 4.12}, {"metric": "ppl", "step": 20, "value": 61.36}]
    assert found[1] == []  # valid loss, valid ppl: other names
    assert found[2] == [{"metric": "test_loss", "step": None, "value": 4.0}]  # not loss, not ppl
    assert parser.longer == {"loss": {"valid loss"}, "ppl": {"valid ppl", "test ppl"}}  # test loss: test_loss
    alone = TextParser([metric("loss"), metric("acc"), metric("val_loss")], STEP)
    assert alone.feed("step 3 | train loss 0.5 | batch loss 0.4") == []
    seen = alone.feed("step 4: loss 0.3 val_loss nan acc 0.5")  # a value before a name is no word of it
    assert [(o["metric"], o["value"]) for o in seen if o["metric"] != "val_loss"] == [("loss", 0.3), ("acc", 0.5)]
    assert alone.feed("final val_loss 0.2, last loss: 0.1") == [  # final / last say when, not what
        {"metric": "loss", "step": None, "value": 0.1}, {"metric": "val_loss", "step": None, "value": 0.2}]  # fmt: skip
    mine = TextParser([metric("loss", pattern=r"test loss\s+([0-9.]+)")], STEP)  # a user's pattern says otherwise
    assert mine.feed(WORD_LM[2]) == [{"metric": "loss", "step": None, "value": 4.0}]


def test_a_metric_printed_only_inside_longer_names_fails_with_one_line_naming_them(tmp_path, capsys):
    code, _ = run_stage(tmp_path, """
        for step in range(1, 21):
            print(f"step {step} | train loss {1 / step:.4f} | valid loss {2 / step:.4f} | acc 0.5")
    """, metrics={"loss": {"goal": "min"}, "acc": {"goal": "max"}})
    assert code == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert ("metric loss not found in its output (metric loss printed only inside longer names: train loss, valid "
            "loss; declare those, e.g. train_loss, or give metrics.loss.pattern)") in line


def test_a_user_pattern_may_name_its_step_and_value():
    parser = TextParser([metric("ppl", pattern=r"\[(?P<step>\d+)/\d+\] ppl=(?P<value>[0-9.]+)")], STEP)
    assert parser.feed("[30/100] ppl=12.5") == [{"metric": "ppl", "step": 30, "value": 12.5}]


def test_summary_keeps_the_later_value_of_a_replayed_step_and_applies_the_reduction():
    obs = [{"metric": "l", "step": s, "value": v} for s, v in [(1, 5.0), (2, 4.0), (3, 3.0), (2, 3.5), (3, 2.5)]]
    obs.append({"metric": "l", "step": None, "value": 2.0})
    finals, curves = summarise(obs, [metric("l")])
    assert curves["l"] == {"steps": [1, 2, 3], "values": [5.0, 3.5, 2.5]} and finals["l"] == 2.0
    assert summarise(obs, [metric("l", reduce="max")])[0]["l"] == 5.0
    assert summarise(obs, [metric("l", reduce="min")])[0]["l"] == 2.0


def test_jsonl_lines_with_and_without_step():
    ms = [metric("loss"), metric("acc", key="accuracy")]
    assert parse_jsonl_line('{"step": 3, "loss": 1.5, "accuracy": 0.5}', ms) == [
        {"metric": "loss", "step": 3, "value": 1.5}, {"metric": "acc", "step": 3, "value": 0.5}]  # fmt: skip
    assert parse_jsonl_line('{"loss": 1}', ms) == [{"metric": "loss", "step": None, "value": 1.0}]
    assert parse_jsonl_line('{"loss": tru', ms) == [] and parse_jsonl_line('{"loss": true}', ms) == []


# -- bad input: one line naming the field, before any job ----------------------------------


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"trainer": {"command": ["python", "nothere.py"]}}, "trainer.command: script 'nothere.py' not found"),
        ({"trainer": {"command": ["no-such-program-xyz"]}}, "trainer.command: 'no-such-program-xyz' is not an executable"),
        ({"trainer": {"command": ["./script.py"]}}, "make it executable"),
        ({"trainer": {"command": ["python", "script.py"], "workdir": "missing"}}, "trainer.workdir:"),
        ({"trainer": {"command": ["python", "script.py"], "args": {"bs": "micro_bach"}}},
         "trainer.args.bs: 'micro_bach' is not a plan value; did you mean micro_batch?"),
        ({"trainer": {"command": ["python", "script.py"], "values": {"precison": {"fp32": "x"}}}},
         "trainer.values.precison: neither a plan value nor a flag of trainer.args"),
        ({"metrics": {"v": {"goal": "min", "pattern": "v ([0-9.]+"}}}, "metrics.v.pattern: 'v ([0-9.]+' does not compile"),
        ({"metrics": {"v": {"goal": "min", "pattern": "v [0-9.]+"}}}, "metrics.v.pattern: 'v [0-9.]+' has 0 groups"),
        ({"metrics": {"v": {"goal": "min", "stage": "eval"}}}, "metrics.v.stage: eval, but there is no evaluation stage"),
        ({"metrics": None}, "metrics: missing; declare what your script reports"),
        ({"statistics": {"margins": {"acc": 0.1}}}, "statistics.margins: margins moved to the metrics"),
        ({"recipe": {"micro_batch": "auto"}}, "recipe.micro_batch: auto needs the built-in trainer's memory model"),
        ({"recipe": {"model": {"width": 8}}}, "recipe.model: only for the built-in trainer"),
        ({"evaluation": "builtin"}, "evaluation: builtin evaluates the reference models only"),
        ({"trainer": {"command": ["python", "script.py"], "resume": {"when": "ckpt.pt"}}}, "trainer.resume: give both"),
        ({"trainer": {"command": ["python", "script.py"], "plan_check": {"global_batch": "gb"}}},
         "trainer.plan_check.global_batch.pattern: 'gb' has 0 groups"),
        ({"trainer": {"command": ["python", "script.py"], "launch": "plain"},
          "hardware": {"cpu1": {"accelerator": "cpu"}, "two": {"accelerator": "cpu", "nodes": 2}}},
         "hardware.two.nodes: trainer.launch plain runs one process per run"),
    ],
)
def test_bad_command_config_is_one_line_naming_the_field(tmp_path, change, expected):
    script(tmp_path, "")
    (tmp_path / "script.py").chmod(0o644)
    cfg = copy.deepcopy(COMMAND)
    for key, value in change.items():
        if value is None:
            del cfg[key]
        elif key == "recipe":
            cfg[key] = cfg[key] | value
        else:
            cfg[key] = value
    with pytest.raises(ConfigError) as err:
        resolve(cfg, config_dir=tmp_path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_script_without_a_seed_or_precision_flag_is_usable_and_says_so(tmp_path):
    script(tmp_path, "")
    m = matrix(tmp_path, trainer={"command": ["python", "script.py"],
                                  "args": {"bs": "micro_batch", "acc": "accumulation", "n": "steps"}})
    assert not m.trainer.seeded
    text = " ".join(m.warnings)
    assert "every seed repeats the same run" in text and "the precision is not passed" in text


def test_stop_at_target_with_a_command_says_only_the_runtime_stops(tmp_path):
    script(tmp_path, "")
    targets = [{"metric": "acc", "value": 0.9}]
    m = matrix(tmp_path, targets=targets, recipe=COMMAND["recipe"] | {"schedule": {"steps": 20, "warmup_steps": 2, "stop_at": "target"}})
    said = [w for w in m.warnings if w.startswith("recipe.schedule.stop_at: target (suite s)")]
    assert len(said) == 1 and "an unmodified command trains every step" in said[0]
    assert not any("stop_at" in w for w in matrix(tmp_path, targets=targets).warnings)


# -- the runner: what counts as a finished run ---------------------------------------------


def run_stage(tmp_path, body, **changes):
    m = matrix(script(tmp_path, body), **changes)
    spec = m.spec("s", "default", "cpu1", 0)
    spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    argv = command.command_argv(spec, spec.trainer.invocation)
    code = runner.train(spec, str(tmp_path / "spec.json"), argv, threads=1)
    return code, tmp_path / "run" / "train.json"


UNVERIFIED = ("unverified: no process of the command ran a torch backward pass or optimizer step hwsweep could see, "
              "so its device, batch and steps are unverified")


def test_a_script_that_prints_its_metrics_gives_a_record(tmp_path, capsys):
    code, path = run_stage(tmp_path, """
        import sys
        args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:])
        print("global batch size:", int(args["bs"]) * 4)
        for step in range(1, int(args["steps"]) + 1):
            print(f"step {step}: val_loss {1 / step:.4f} acc {step / 40:.3f}")
    """, trainer=COMMAND["trainer"] | {"plan_check": {"global_batch": r"global batch size: (\d+)"}})
    assert code == 0
    record = read(RunRecord, path)
    assert record.metrics == {"val_loss": 0.05, "acc": 0.5}
    assert record.curve("val_loss").steps == list(range(1, 21))
    # no torch: nothing to observe, and a one-process plan says so instead of passing silently
    assert record.checks == [UNVERIFIED] and record.observed is None
    assert record.provenance["script"]["sha256"] and record.trainer == "command"
    assert "step 20: val_loss" in capsys.readouterr().out  # passed through to the job's log


def test_a_script_that_ignores_the_plan_is_flagged(tmp_path, capsys):
    code, path = run_stage(tmp_path, """
        print("global batch size: 12")
        print("step 1: val_loss 0.5 acc 0.5")
    """, trainer=COMMAND["trainer"] | {"plan_check": {"global_batch": r"global batch size: (\d+)"}})
    assert code == 0
    assert read(RunRecord, path).checks == ["the script logged global_batch 12, the plan says 32: it does not follow the plan",
                                            UNVERIFIED]  # fmt: skip
    assert "does not follow the plan" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body, message",
    [
        ("print('hello')\nprint('done')", "exited 0 but wrote no metrics (looked for val_loss, acc in its output); last 5 lines: hello | done"),
        ("print('step 1: val_loss 0.5')", "metric acc not found in its output; last 5 lines: step 1: val_loss 0.5"),
        ("print('val_loss 0.5 acc 1.7')", "metric acc is 1.7, outside its bounds [0, 1]"),
        ("print('val_loss nan acc 0.5')", "metric val_loss is nan"),
        ("import sys\nprint('boom')\nsys.exit(3)", "the command exited 3: boom"),
    ],
)
def test_a_run_that_did_not_deliver_fails_with_one_line_and_no_record(tmp_path, capsys, body, message):
    code, path = run_stage(tmp_path, body)
    assert code != 0 and not path.exists()
    assert message in capsys.readouterr().err


def test_metrics_from_a_jsonl_file_the_script_writes(tmp_path):
    body = """
        import json, sys
        out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--out=")][0]
        with open(out + "/m.jsonl", "w") as f:
            for step in (1, 2):
                f.write(json.dumps({"step": step, "val_loss": 1.0 / step, "accuracy": 0.4 * step}) + "\\n")
    """
    metrics = {"val_loss": {"goal": "min", "margin": 0.1}, "acc": {"goal": "max", "key": "accuracy"}}
    code, path = run_stage(tmp_path, body, metrics=metrics, trainer=COMMAND["trainer"] | {"metrics_file": "m.jsonl"})
    assert code == 0 and read(RunRecord, path).metrics == {"val_loss": 0.5, "acc": 0.8}


ESCAPES = [
    ("metrics_file", "a/../../../../etc/passwd", "has a '..' part, which leads out of the run folder"),
    ("metrics_file", "m/..", "has a '..' part"),
    ("metrics_file", "train.json", "is hwsweep's own train.json in the run folder"),
    ("resume", {"when": "*/../../../*", "args": ["--resume"]}, "has a '..' part"),
    ("resume", {"when": "spec.json", "args": ["--resume"]}, "is hwsweep's own spec.json"),
]


@pytest.mark.parametrize("key, value, words", ESCAPES, ids=[str(v)[:30] for _, v, _ in ESCAPES])
def test_a_path_the_config_names_in_the_run_folder_stays_in_it(tmp_path, key, value, words):
    script(tmp_path, "")
    field = f"trainer.{key}" + (".when" if key == "resume" else "")
    with pytest.raises(ConfigError) as err:
        matrix(tmp_path, trainer=COMMAND["trainer"] | {key: value})
    assert str(err.value).startswith(f"{field}: ") and words in str(err.value) and "\n" not in str(err.value)
    evaluation = {"command": ["python", "script.py"], key: value}
    if key == "metrics_file":  # the evaluation command's metrics file too
        with pytest.raises(ConfigError, match=rf"^evaluation.metrics_file: .*{re.escape(words)}"):
            matrix(tmp_path, evaluation=evaluation)


def test_a_metrics_file_that_links_out_of_the_run_folder_is_not_read(tmp_path, capsys):
    (tmp_path / "outside.jsonl").write_text('{"step": 1, "val_loss": 0.5, "acc": 0.5}\n')
    body = f"""
        import os, sys
        out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--out=")][0]
        os.symlink({str(tmp_path / "outside.jsonl")!r}, out + "/m.jsonl")
    """
    code, path = run_stage(tmp_path, body, trainer=COMMAND["trainer"] | {"metrics_file": "m.jsonl"})
    assert code != 0 and not path.exists()
    assert "metrics file m.jsonl is a link out of the run folder" in capsys.readouterr().err


def test_preemption_resumes_with_the_declared_arguments_and_keeps_earlier_steps(tmp_path):
    body = """
        import os, signal, sys, time
        out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--out=")][0]
        resumed = "--resume" in sys.argv
        start = int(open(out + "/ckpt.txt").read()) if resumed else 0
        signal.signal(signal.SIGUSR2, lambda *a: sys.exit(9))
        for step in range(start + 1, 21):
            print(f"step {step}: val_loss {1 / step:.4f} acc 0.5", flush=True)
            open(out + "/ckpt.txt", "w").write(str(step))
            if step == 5 and not resumed:
                print("waiting", flush=True)
                time.sleep(30)
    """
    trainer = COMMAND["trainer"] | {"resume": {"when": "ckpt.txt", "args": ["--resume"]}, "signal": "USR2"}
    m = matrix(script(tmp_path, body), trainer=trainer)
    spec = m.spec("s", "default", "cpu1", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    cmd = [sys.executable, "-m", "hwsweep.run.launch", str(tmp_path / "spec.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    for line in proc.stdout:
        if "waiting" in line:
            break
    proc.terminate()  # what SLURM sends ahead of the time limit; the script wants USR2
    assert proc.wait(timeout=30) == runner.EXIT_PREEMPTED
    assert not (tmp_path / "run" / "train.json").exists()
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp_path, timeout=60)
    record = read(RunRecord, tmp_path / "run" / "train.json")
    assert record.curve("val_loss").steps == list(range(1, 21))  # steps 1-5 from the first attempt
    assert record.restarts == 1 and record.resumed_from_step == 5


def test_an_evaluation_command_reports_the_eval_stage(tmp_path):
    script(tmp_path, "print('step 1: val_loss 0.4 acc 0.5')")
    (tmp_path / "evaluate.py").write_text("import sys\nprint('checkpoint', sys.argv[1])\nprint('test_acc: 0.875')\n")
    metrics = COMMAND["metrics"] | {"test_acc": {"goal": "max", "margin": 0.01, "stage": "eval", "bounds": [0, 1]}}
    m = matrix(tmp_path, metrics=metrics, evaluation={"command": ["python", "evaluate.py"], "args": {"ckpt": "run_dir"}})
    spec = m.spec("s", "default", "cpu1", 0)
    spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    assert [x.name for x in spec.metrics_of("eval")] == ["test_acc"]
    assert runner.evaluate(spec, str(tmp_path / "spec.json"), threads=1) == 0
    record = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert record["metrics"] == {"test_acc": 0.875} and record["evaluator"] == "command"
    assert record["device"] is None  # a command's evaluation: hwsweep does not know its device
