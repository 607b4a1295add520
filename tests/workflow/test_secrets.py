"""Secrets never leave the process, end to end: distinct canaries planted through every entry (the config's
recipe.args, the trainer's command, a `--config` override, the environment, a tracker URI) into a real tiny sweep
of a user's command; no byte written under the work folder (results/, logs/, .snakemake/, benchmarks/, the
report) and nothing printed holds one, while the script itself received each real value; an MLflow store read
back with MLflow's own client holds none in its params or tags."""

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, REPO, write_config

pytestmark = pytest.mark.slow

# Each canary is distinct, so a finding names its entry; none is a word hwsweep could write by itself.
CANARIES = {
    "recipe.args by name": "CANARYargsN4me7q",
    "recipe.args URI userinfo": "CANARYuserinfo8w",
    "recipe.args known prefix": "hf_CANARYprefix3k",
    "trainer.command flag value": "CANARYcmdflag5v",
    "trainer.command --k=v": "CANARYcmdeq2z",
    "--config override": "CANARYoverride9x",
    "environment WANDB_API_KEY": "CANARYenvwandb6j",
    "environment HF_TOKEN": "CANARYenvhf4t",
    "environment AWS_SECRET_ACCESS_KEY": "CANARYenvaws1m",
    "environment MLFLOW_TRACKING_PASSWORD": "CANARYenvmlflow0p",
    "trainer.env by name": "CANARYtrainerenv3d",
}
SCRIPT = """
import hashlib, json, os, sys
seen = {"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in ENV}}
digest = lambda s: hashlib.sha256(s.encode()).hexdigest()
json.dump({"argv": [digest(a) for a in seen["argv"]], "env": {k: digest(v or "") for k, v in seen["env"].items()}},
          open(os.path.join(os.environ["HWSWEEP_RUN_DIR"], "seen.json"), "w"))
print("the script got", seen, flush=True)  # a script that echoes its arguments and environment
for step in range(1, 6):
    print(f"step {step}: loss {1 / step}", flush=True)
"""
ENV = ("WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_PASSWORD", "SERVICE_TOKEN")


def _config(folder: Path) -> dict:
    c = CANARIES
    return {
        "recipe": {
            "schedule": {"steps": 5, "warmup_steps": 1}, "global_batch": 4, "micro_batch": 4,
            "args": {"api_key": c["recipe.args by name"], "endpoint": f"https://bob:{c['recipe.args URI userinfo']}@example.com/x",
                     "model_repo": c["recipe.args known prefix"], "depth": 2},
        },
        "trainer": {"command": ["python", "script.py", "--hf_token", c["trainer.command flag value"],
                                f"--password={c['trainer.command --k=v']}"],
                    "workdir": str(folder), "launch": "plain", "args": {"steps": "steps", "seed": "seed"},
                    "env": {"SERVICE_TOKEN": c["trainer.env by name"]}},
        "metrics": {"loss": {"goal": "min", "margin": 0.5}},
        "evaluation": "none",
        "tracking": {"backends": ["mlflow"], "mlflow": {"uri": str(folder / "mlruns")}},
        "suites": {"tiny": {}},
        "seeds": [0, 1],
        "hardware": {"cpu1": {"accelerator": "cpu"}, "cpu1b": {"accelerator": "cpu"}},
        "baseline": "cpu1",
    }  # fmt: skip


def _env() -> dict:
    planted = {name: CANARIES[f"environment {name}"] for name in ENV[:4]}
    return os.environ | planted | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}


def _snakemake(work: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    override = f"recipe={{args: {{api_token: {CANARIES['--config override']}}}}}"
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(work), "--configfile",
           str(config), "--replace-workflow-config", "--config", override, *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env())


def _leaks(text: str) -> list[str]:
    return [entry for entry, canary in CANARIES.items() if canary in text]


def _every_byte(folder: Path) -> dict[str, list[str]]:
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            leaks = _leaks(path.read_bytes().decode("latin-1"))
            if leaks:
                found[str(path.relative_to(folder))] = leaks
    return found


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The tiny sweep of the canary-carrying config, run to its end, with its status and report: the folder and
    everything snakemake and `hwsweep plan` printed."""
    work = tmp_path_factory.mktemp("secrets")
    (work / "script.py").write_text(f"ENV = {ENV!r}\n" + SCRIPT)
    config = write_config(work, _config(work))
    printed = []
    for args in (("--cores", "1", "all"), ("--cores", "1", "-f", "status"), ("--report", str(work / "report.html"))):
        proc = _snakemake(work, config, *args)
        printed += [proc.stdout, proc.stderr]
        assert proc.returncode == 0, proc.stderr[-3000:]
    for extra in ((), ("--show-commands",), ("--format", "tsv"), ("--estimate",)):
        plan = subprocess.run([str(BIN / "hwsweep"), "plan", "--configfile", str(config), *extra], cwd=work,
                              capture_output=True, text=True, timeout=120, env=_env())  # fmt: skip
        printed += [plan.stdout, plan.stderr]
        assert plan.returncode == 0, plan.stderr
    return work, "\n".join(printed)


def test_no_canary_in_any_byte_written_or_printed(swept):
    work, printed = swept
    assert (work / "report.html").stat().st_size > 0 and (work / "results/tiny/default/cpu1b/seed1/train.json").exists()
    assert _leaks(printed) == []
    # the user's own file, and nothing else
    assert _every_byte(work) == {"config.yaml": list(CANARIES)[:5] + ["trainer.env by name"]}
    log = (work / "logs/tiny/default/cpu1/seed0/train.log").read_text()
    assert "the script got" in log and "***" in log  # the script's echo reached the log, masked


def test_the_script_received_every_real_value(swept):
    work, _ = swept
    seen = json.loads((work / "results/tiny/default/cpu1/seed0/seen.json").read_text())
    digest = lambda s: hashlib.sha256(s.encode()).hexdigest()  # noqa: E731
    c = CANARIES
    for given in (c["trainer.command flag value"], f"--password={c['trainer.command --k=v']}",
                  f"--api_key={c['recipe.args by name']}", f"--model_repo={c['recipe.args known prefix']}",
                  f"--endpoint=https://bob:{c['recipe.args URI userinfo']}@example.com/x",
                  f"--api_token={c['--config override']}"):  # fmt: skip
        assert digest(given) in seen["argv"], given
    planted = {name: c[f"environment {name}"] for name in ENV[:4]} | {"SERVICE_TOKEN": c["trainer.env by name"]}
    assert seen["env"] == {name: digest(value) for name, value in planted.items()}
    spec = (work / "results/tiny/default/cpu1/seed0/spec.json").read_text()
    assert "@@HWSWEEP_SECRET_RECIPE_ARGS_API_KEY@@" in spec  # what the files hold in its place


def test_the_mlflow_store_read_back_with_its_own_client_holds_no_secret(swept):
    work, _ = swept
    code = f"""
import json, mlflow
client = mlflow.MlflowClient(tracking_uri={str(work / "mlruns")!r})
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
print(json.dumps([{{"params": r.data.params, "tags": r.data.tags}} for r in runs]))
"""
    env = os.environ | {"MLFLOW_ALLOW_FILE_STORE": "true"}  # MLflow 3 reads a file store only when told
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True, env=env)
    runs = json.loads(out.stdout)
    assert sum(bool(r["params"]) for r in runs) == 4  # each run's plan as params (the suite's tables have none)
    assert _leaks(out.stdout) == []
    assert any("@@HWSWEEP_SECRET_" in v for r in runs for v in r["params"].values())


def test_a_run_started_by_hand_without_the_sealed_variables_is_one_line(swept, tmp_path):
    work, _ = swept
    env = {k: v for k, v in _env().items() if not k.startswith("HWSWEEP_SECRET_")}
    spec = work / "results/tiny/default/cpu1/seed0/spec.json"
    proc = subprocess.run([str(BIN / "python"), "-m", "hwsweep.run.launch", str(spec)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=work)  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "HWSWEEP_SECRET_" in proc.stderr and _leaks(proc.stderr) == []


def test_credentials_in_a_tracker_uri_are_refused_without_printing_them(tmp_path):
    cfg = copy.deepcopy(_config(tmp_path))
    (tmp_path / "script.py").write_text("")
    for uri in ("http://alice:CANARYuri1q@127.0.0.1:5000", "https://127.0.0.1/x?token=CANARYuri2q",
                "http://CANARYuri3q@127.0.0.1:5000"):
        cfg["tracking"]["mlflow"]["uri"] = uri
        config = write_config(tmp_path, cfg)
        for cmd in ([str(BIN / "hwsweep"), "plan", "--configfile", str(config)],
                    [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
                     "--configfile", str(config), "--replace-workflow-config", "-n", "all"]):  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
            assert proc.returncode != 0 and "tracking.mlflow.uri" in proc.stderr, proc.stderr
            assert "CANARYuri" not in proc.stdout + proc.stderr and "***" in proc.stderr
