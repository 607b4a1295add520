"""trainer.env: environment variables for a user's script, checked at planning (POSIX names, none of those hwsweep
and torchrun set), shown by --show-commands with secrets masked, and given to the script's processes."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import script_config

from hwsweep import cli
from hwsweep.contracts import secrets
from hwsweep.contracts.spec import canonical_json
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import runner


def config(env=None):
    trainer = {"command": ["python", "needs_env.py"]} | ({"env": env} if env is not None else {})
    return script_config(trainer, {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 0}},
                         {"loss": {"goal": "min"}})


@pytest.mark.parametrize("env, words", [
    ({"RANK": "0"}, "trainer.env.RANK: is set by hwsweep or torchrun for every process of the run; remove it"),
    ({"HWSWEEP_SPEC": "x"}, "trainer.env.HWSWEEP_SPEC: is set by hwsweep or torchrun"),
    ({"OMP_NUM_THREADS": 4}, "trainer.env.OMP_NUM_THREADS: is set by hwsweep or torchrun"),
    ({"1BAD": "x"}, "trainer.env"),
    ({"A-B": "x"}, "trainer.env"),
    ({"OK": {"nested": 1}}, "trainer.env.OK"),
])  # fmt: skip
def test_a_variable_hwsweep_sets_or_no_shell_could_name_is_refused_in_one_line(env, words):
    with pytest.raises(ConfigError) as e:
        resolve(config(env))
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


def test_the_variables_reach_the_command_and_show_masked_where_secret(tmp_path, capsys, monkeypatch):
    env = {"NEEDS_ENV_FLAG": 1, "WANDB_API_KEY": "s3cr3t", "DATA_URL": "https://user:pw@host/data", "NOTE": "a b"}
    monkeypatch.setattr(os, "environ", dict(os.environ))  # where resolve puts the sealed secrets, for the jobs
    spec = resolve(config(env)).spec("s", "default", "cpu1", 0)
    assert "s3cr3t" not in canonical_json(spec) and "pw@" not in canonical_json(spec)  # sealed in spec.json
    given = runner.train_environment(spec, "spec.json", 1, base=dict(os.environ))
    assert given["NEEDS_ENV_FLAG"] == "1" and given["WANDB_API_KEY"] == "s3cr3t" and given["NOTE"] == "a b"
    assert given["DATA_URL"] == "https://user:pw@host/data"
    with pytest.raises(secrets.SecretMissing, match="HWSWEEP_SECRET_TRAINER_ENV_WANDB_API_KEY is not set"):
        runner.train_environment(spec, "spec.json", 1, base={})  # a job started without the sealed values
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config(env)))
    assert cli.main(["plan", "--configfile", str(tmp_path / "my.yaml"), "--show-commands"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  env:")]
    assert "NEEDS_ENV_FLAG=1" in line and "NOTE='a b'" in line and "WANDB_API_KEY=***" in line
    assert "s3cr3t" not in line and "pw@" not in line and "DATA_URL='https://***@host/data'" in line


def test_a_config_without_env_keeps_its_spec_text():
    text = json.loads(canonical_json(resolve(config()).spec("s", "default", "cpu1", 0)))
    assert "env" not in text["trainer"]  # specs written before trainer.env keep their hash
    with_env = json.loads(canonical_json(resolve(config({"NEEDS_ENV_FLAG": "1"})).spec("s", "default", "cpu1", 0)))
    assert with_env["trainer"]["env"] == {"NEEDS_ENV_FLAG": "1"}


def test_the_built_in_trainer_takes_no_env():
    cfg = {k: v for k, v in config().items() if k not in ("trainer", "metrics")} | {"trainer": {"env": {"A": "1"}}}
    with pytest.raises(ConfigError, match=r"^trainer\.env: only applies to a command"):
        resolve(cfg)


@pytest.mark.slow
def test_a_script_that_needs_a_variable_runs_with_it(tmp_path):
    for env, code in (({"NEEDS_ENV_FLAG": "1"}, 0), (None, 1)):
        spec = resolve(config(env)).spec("s", "default", "cpu1", 0)
        folder = tmp_path / ("with" if env else "without")
        run = folder / spec.run_dir
        run.mkdir(parents=True)
        (run / "spec.json").write_text(canonical_json(spec))
        proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", f"{spec.run_dir}/spec.json", "--threads",
                               "1"], cwd=folder, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "NEEDS_ENV_FLAG is not 1" in proc.stderr.strip().splitlines()[-1]
