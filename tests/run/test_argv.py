"""One argv: the flags a user's script gets are in the order the config writes them, the order
`hwsweep plan --show-commands` shows, after spec.json (written with sorted keys) is read back by the train job."""

import json
import shlex
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, script_config

from hwsweep import cli
from hwsweep.contracts.spec import RunSpec, canonical_json, sha256
from hwsweep.plan.config import resolve
from hwsweep.run import launch

SCRIPTS = REPO / "tests" / "data" / "scripts"
EXAMPLES = sorted((REPO / "examples").glob("*/config.yaml"))


def order_config(**recipe_args):
    """order_matters.py, its flags written against the sorted order: --preset before --hidden (hidden wins)."""
    return script_config(
        {"command": ["python", "order_matters.py"], "args": {"steps": "steps", "batch": "micro_batch", "seed": "seed"}},
        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 0},
         "args": recipe_args or {"preset": "small", "hidden": 64}},
        {"loss": {"goal": "min"}})  # fmt: skip


def shown(capsys, path) -> dict[str, str]:
    """`hwsweep plan --show-commands`: each run's argv line."""
    assert cli.main(["plan", "--configfile", str(path), "--show-commands"]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {lines[i][:-1]: lines[i + 1].removeprefix("  argv: ") for i, line in enumerate(lines) if line.endswith(":")}


def job_argv(spec: RunSpec) -> str:
    """What the train job runs: spec.json's canonical text read back (hwsweep.run.launch), one node's command."""
    path = f"{spec.run_dir}/spec.json"
    back = RunSpec.from_dict(json.loads(canonical_json(spec)), "spec")
    assert canonical_json(back) == canonical_json(spec)  # the text, and so its hash, survive the round trip
    slurm = {"SLURM_NODEID": "{node_rank}", "SLURM_NNODES": str(spec.plan.nodes), "SLURM_JOB_ID": "0",
             "SLURM_LAUNCH_NODE_IPADDR": "{first_node}"} if spec.plan.nodes > 1 else {}  # fmt: skip
    return shlex.join(launch.command_line(back, path, spec.hardware.cpus_per_task, slurm))


@pytest.mark.parametrize("config", EXAMPLES + ["order"], ids=lambda c: c if c == "order" else c.parent.name)
def test_show_commands_is_the_argv_the_job_runs(config, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if config == "order":
        config = tmp_path / "order.yaml"
        config.write_text(yaml.safe_dump(order_config(), sort_keys=False))
    raw = yaml.safe_load(config.read_text())
    matrix = resolve(raw, config_dir=config.parent)
    lines = shown(capsys, config)
    assert len(lines) == len(matrix.runs()) > 0
    for run in matrix.runs():
        spec = matrix.spec(run.suite, run.variant, run.hardware, run.seed)
        assert lines[f"{run.suite}/{run.variant}/{run.hardware}/seed{run.seed}"] == job_argv(spec)


def test_the_written_order_is_kept_and_a_sorted_one_keeps_its_text():
    spec = resolve(order_config()).spec("s", "default", "cpu1", 0)
    text = json.loads(canonical_json(spec))
    assert text["recipe"]["args"] == [["preset", "small"], ["hidden", 64]]
    assert text["trainer"]["invocation"]["args"] == [["steps", "steps"], ["batch", "micro_batch"], ["seed", "seed"]]
    argv = job_argv(spec)
    assert argv.index("--preset=small") < argv.index("--hidden=64")
    assert canonical_json(resolve(order_config()).spec("s", "default", "cpu1", 0)) == canonical_json(spec)  # stable
    in_order = resolve(order_config(hidden=64, preset="small")).spec("s", "default", "cpu1", 0)
    assert json.loads(canonical_json(in_order))["recipe"]["args"] == {"hidden": 64, "preset": "small"}  # as before
    assert sha256(canonical_json(in_order)) != sha256(canonical_json(spec))  # another order, another argv, another run


def test_a_malformed_ordered_mapping_in_a_spec_is_refused():
    from hwsweep.contracts.typed import SpecError

    data = json.loads(canonical_json(resolve(order_config()).spec("s", "default", "cpu1", 0)))
    data["recipe"]["args"] = [["preset"]]
    with pytest.raises(SpecError, match=r"spec\.recipe\.args: expected a mapping or a list of \[name, value\] pairs"):
        RunSpec.from_dict(data, "spec")


@pytest.mark.slow
def test_the_script_receives_the_argv_shown(tmp_path, capsys, monkeypatch):
    """Through the launcher from spec.json's canonical text: the script's own sys.argv is the one shown, so the
    flag written last wins as the user meant (hidden 64, not the preset's 8)."""
    monkeypatch.chdir(tmp_path)
    cfg = order_config()
    (tmp_path / "order.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    argv = shlex.split(shown(capsys, tmp_path / "order.yaml")["s/default/cpu1/seed0"])
    spec = resolve(cfg, config_dir=tmp_path).spec("s", "default", "cpu1", 0)
    run = tmp_path / spec.run_dir
    run.mkdir(parents=True)
    (run / "spec.json").write_text(canonical_json(spec))
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", spec.run_dir + "/spec.json", "--threads", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    seen = json.loads((run / "argv.json").read_text())
    assert seen["argv"] == argv[2:] and seen["hidden"] == 64  # after the interpreter and the script's path


# -- a script's dotted flags swept: LightningCLI's --model.learning_rate 0.01, Hydra's optim.lr=0.01 ---------------


def cli_config(sweep=None):
    return script_config(
        {"command": ["python", "lightning_cli_like.py"], "arg_style": "--k v",
         "args": {"trainer.max_steps": "steps", "data.batch_size": "micro_batch", "seed_everything": "seed"}},
        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 0},
         "args": {"model.learning_rate": 0.1, "model.hidden": 16}},
        {"train_loss": {"goal": "min"}}, sweep or {"args.model.learning_rate": [0.001, 0.01]})  # fmt: skip


def hydra_config(sweep=None):
    return script_config(
        {"command": ["python", "hydra_like.py"], "arg_style": "k=v",
         "args": {"steps": "steps", "batch": "micro_batch", "seed": "seed"}},
        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 0}, "args": {"model.hidden": 16}},
        {"loss": {"goal": "min"}}, sweep or {"args": {"optim.lr": [0.001, 0.01]}})  # the nested form  # fmt: skip


def variant_argvs(cfg) -> dict[str, list[str]]:
    matrix = resolve(cfg)
    return {c.variant: shlex.split(job_argv(matrix.spec("s", c.variant, "cpu1", 0))) for c in matrix.cells}


@pytest.mark.parametrize("sweep", [{"args.model.learning_rate": [0.001, 0.01]},
                                   {"args": {"model.learning_rate": [0.001, 0.01]}},
                                   {"args": {"model": {"learning_rate": [0.001, 0.01]}}}])  # fmt: skip
def test_a_dotted_flag_is_swept_in_its_scripts_style(sweep):
    argvs = variant_argvs(cli_config(sweep))
    assert sorted(argvs) == ["learning_rate-0.001", "learning_rate-0.01"]
    for variant, argv in argvs.items():
        value = variant.split("-", 1)[1]
        assert argv[argv.index("--model.learning_rate") + 1] == value and argv.count("--model.learning_rate") == 1
        assert argv[-4:-2] == ["--model.learning_rate", value]  # in recipe.args' place, before model.hidden
    argvs = variant_argvs(hydra_config())
    assert [a for argv in argvs.values() for a in argv if a.startswith("optim.lr=")] == ["optim.lr=0.001", "optim.lr=0.01"]


@pytest.mark.parametrize("sweep, words", [
    ({"model.learning_rate": [0.001, 0.01]},
     "suites.s.sweep.model.learning_rate: not a recipe key; did you mean args.model.learning_rate? (a script's flag "
     "is swept as args.<flag>; recipe.args has args.model.learning_rate, args.model.hidden)"),
    ({"optimizer.lrr": [0.1, 0.2]}, "suites.s.sweep.optimizer.lrr: not a recipe key; did you mean optimizer.lr"),
    ({"args.trainer.max_steps": [3, 4]}, "recipe.args.trainer.max_steps: trainer.args already passes"),
])  # fmt: skip
def test_a_sweep_key_neither_the_recipes_nor_a_flag_is_refused_naming_the_args(sweep, words):
    from hwsweep.plan.config import ConfigError

    with pytest.raises(ConfigError) as e:
        resolve(cli_config(sweep))
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
    assert "model.mlp_ratio" not in str(e.value)  # the built-in model's keys are not a script's


@pytest.mark.slow
@pytest.mark.parametrize("config, read", [(cli_config, lambda seen: seen["learning_rate"]),
                                          (hydra_config, lambda seen: seen["config"]["optim"]["lr"])])  # fmt: skip
def test_each_swept_variant_runs_with_its_value(config, read, tmp_path):
    matrix = resolve(config())
    assert len(matrix.cells) == 2
    for cell in matrix.cells:
        spec = matrix.spec("s", cell.variant, "cpu1", 0)
        run = tmp_path / spec.run_dir
        run.mkdir(parents=True)
        (run / "spec.json").write_text(canonical_json(spec))
        proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", f"{spec.run_dir}/spec.json", "--threads",
                               "1"], cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        seen = json.loads((run / "argv.json").read_text())
        assert read(seen) == float(cell.variant.split("-", 1)[1]) == list(cell.sweep_values.values())[0]
        assert seen["argv"] == shlex.split(job_argv(spec))[2:]
