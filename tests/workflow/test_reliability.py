"""Failures a shared cluster produces: SIGKILL and SIGTERM mid-run, NaN losses, a failing cell in a sweep."""

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import BIN, launcher, one_thread, snakemake, snakemake_command, stopped_after_a_checkpoint, workers

from hwsweep.contracts import io
from hwsweep.plan.config import resolve

pytestmark = pytest.mark.slow


def _strict_cfg(small_config):
    small_config["recipe"] |= {"reproducibility": "strict", "checkpoint_every": 20}
    small_config["recipe"]["schedule"] = {"steps": 300, "warmup_steps": 5}
    small_config["hardware"] = {"cpu2": {"accelerator": "cpu", "devices_per_node": 2}}
    small_config |= {"baseline": "cpu2", "seeds": [0]}
    return small_config


RUN = "results/tiny/default/cpu2/seed0"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference: the same run, never interrupted."""
    import copy

    from conftest import SMALL

    whole = tmp_path_factory.mktemp("whole")
    assert snakemake(whole, _strict_cfg(copy.deepcopy(SMALL)), "--cores", "2", f"{RUN}/eval.json").returncode == 0
    return whole


def test_sigkill_then_snakemake_rerun_is_bitwise_equal_to_an_uninterrupted_run(tmp_path, small_config, uninterrupted):
    """Killed twice: after the first checkpoint, then again after the fifth in the rerun that resumed from it; the
    plain rerun after that resumes once more and ends bitwise equal to the run never interrupted (each resume must
    be exact for that)."""
    cfg = _strict_cfg(small_config)
    run = RUN
    cut, whole = tmp_path / "cut", uninterrupted
    cut.mkdir()
    target = f"{run}/eval.json"
    ckpts = cut / run / "checkpoints"

    for checkpoints_before_kill in (1, 5):
        cmd, env = snakemake_command(cut, cfg, "--cores", "2", target)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            names = sorted(p.name for p in ckpts.glob("step*.pt")) if ckpts.exists() else []
            steps = [int(n[4:-3]) for n in names]
            if steps and max(steps) >= 20 * checkpoints_before_kill:
                break
            time.sleep(0.05)
        # This sweep's trainer alone (not `pkill -f`): a sweep of another test beside it (pytest-xdist) runs the
        # same command line in its own folder.
        for pid in workers(cut, f"hwsweep.run.train {run}/spec.json"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode != 0, f"the killed job must fail its snakemake run ({checkpoints_before_kill})"
        assert not (cut / run / "train.json").exists() and list(ckpts.glob("step*.pt"))

    assert snakemake(cut, cfg, "--cores", "2", target).returncode == 0  # a plain rerun resumes
    a = json.loads((cut / run / "train.json").read_text())
    b = json.loads((whole / run / "train.json").read_text())
    starts = [segment["start_step"] for segment in a["segments"]]
    assert a["restarts"] == 2 and not starts[0] and starts[1] >= 20 and starts[2] >= 20 * 5, starts
    assert a["resumed_from_step"] == starts[2]
    assert a["curves"]["loss"] == b["curves"]["loss"]
    pa = torch.load(cut / run / "final.pt", weights_only=False)["model"]
    pb = torch.load(whole / run / "final.pt", weights_only=False)["model"]
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    ea, eb = (json.loads((d / run / "eval.json").read_text()) for d in (cut, whole))
    assert ea["metrics"] == eb["metrics"]


def test_sigterm_to_torchrun_checkpoints_and_its_rerun_resumes_bitwise(tmp_path, small_config, uninterrupted):
    """The same run started by hand under torchrun (2 processes), SIGTERM to torchrun once a checkpoint is written:
    its workers checkpoint and exit 75 (preempted, their output says) without a record, and the same command again
    resumes from that checkpoint to the bits of `uninterrupted` (the same spec, through snakemake, never
    interrupted)."""
    spec = resolve(_strict_cfg(small_config)).spec("tiny", "default", "cpu2", 0).to_dict()
    io.write_json(tmp_path / "cut.json", spec | {"run_dir": str(tmp_path / "cut")})
    cmd = [*launcher(2), "-m", "hwsweep.run.train", str(tmp_path / "cut.json")]
    env = one_thread()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _, cut_at = stopped_after_a_checkpoint(proc, tmp_path / "cut" / "checkpoints")  # 'exiting 75' in its output
    assert not (tmp_path / "cut" / "train.json").exists()
    assert 0 < cut_at < spec["plan"]["steps"]

    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)  # the rerun resumes on its own
    cut = json.loads((tmp_path / "cut" / "train.json").read_text())
    whole = json.loads((uninterrupted / RUN / "train.json").read_text())
    assert cut["restarts"] == 1 and cut["resumed_from_step"] == cut_at and whole["restarts"] == 0
    assert cut["curves"]["loss"]["values"] == whole["curves"]["loss"]["values"]
    a = torch.load(tmp_path / "cut" / "final.pt", weights_only=False)
    b = torch.load(uninterrupted / RUN / "final.pt", weights_only=False)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_nan_loss_fails_at_once_with_the_step_and_no_record(tmp_path, small_config):
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict()
    spec["run_dir"] = str(tmp_path / "run")
    spec["plan"]["lr"] = 1e30  # any finite start, then the weights blow up
    io.write_json(tmp_path / "spec.json", spec)
    proc = subprocess.run([*launcher(1), "-m", "hwsweep.run.train",
                           str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "FloatingPointError: loss is" in out and "at step" in out and "last finite loss" in out
    assert not (tmp_path / "run" / "train.json").exists() and not (tmp_path / "run" / "final.pt").exists()


@pytest.mark.parametrize("action", ["fail", "flag"])
def test_the_built_in_trainer_guards_a_blown_up_loss(tmp_path, small_config, action):
    # fp32 at lr 10: the loss rises far above its early value and stays there (no NaN)
    small_config["guard"] = {"action": action, "factor": 2.0, "patience": 5}
    small_config["recipe"]["optimizer"] = {"lr": 10.0}
    small_config["recipe"]["schedule"] = {"steps": 40, "warmup_steps": 2}
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict()
    spec["run_dir"] = str(tmp_path / "run")
    io.write_json(tmp_path / "spec.json", spec)
    proc = subprocess.run([*launcher(1), "-m", "hwsweep.run.train",
                           str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=300)  # fmt: skip
    record = tmp_path / "run" / "train.json"
    if action == "fail":
        assert proc.returncode != 0 and "loss blew up" in proc.stdout + proc.stderr and not record.exists()
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]
        (check,) = json.loads(record.read_text())["checks"]
        assert check.startswith("divergence: loss blew up") and "at step" in check


def test_one_failing_cell_does_not_stop_the_sweep(tmp_path, small_config):
    small_config["recipe"]["schedule"] = {"steps": 20, "warmup_steps": 2}
    # The baseline's two runs are the cells that must finish (a 2-device hardware adds processes, not a check).
    del small_config["hardware"]["cpu2"]
    # A cell that plans fine and fails at run time: its checkpoint folder cannot be made (a file is in the way).
    small_config["hardware"]["gpu1"] = {"accelerator": "cpu", "devices_per_node": 1}
    for seed in (0, 1):
        blocked = tmp_path / f"results/tiny/default/gpu1/seed{seed}/checkpoints"
        blocked.parent.mkdir(parents=True)
        blocked.write_text("not a folder")
    t0 = time.monotonic()
    proc = snakemake(tmp_path, small_config, "--cores", "2", "--keep-going")
    assert proc.returncode != 0 and time.monotonic() - t0 < 600
    for seed in (0, 1):
        assert (tmp_path / f"results/tiny/default/cpu1/seed{seed}/eval.json").exists()
        assert not (tmp_path / f"results/tiny/default/gpu1/seed{seed}/train.json").exists()
        log = (tmp_path / f"logs/tiny/default/gpu1/seed{seed}/train.log").read_text()
        assert "checkpoints" in log

    assert snakemake(tmp_path, small_config, "--cores", "1", "-f", "status").returncode == 0
    status = pd.read_csv(tmp_path / "results/partial/status.csv")
    states = status.groupby("hardware").state.agg(set).to_dict()
    assert states == {"cpu1": {"done"}, "gpu1": {"failed"}}
    partial = pd.read_csv(tmp_path / "results/partial/tiny/comparison.csv")
    assert sorted(partial.hardware) == ["cpu1"]
    combined = pd.read_csv(tmp_path / "results/partial/comparison.csv").set_index("hardware")
    assert combined.loc["gpu1", "failed"] == 2 and pd.isna(combined.loc["gpu1", "n_seeds"])  # shown as missing
    assert combined.loc["cpu1", "done"] == 2 and combined.loc["cpu1", "n_seeds"] == 2
    report = tmp_path / "partial.html"
    proc = snakemake(tmp_path, small_config, "--report", str(report), "status")
    assert proc.returncode == 0 and "status.csv" in report.read_text()


def _states(folder, cfg) -> dict:
    assert snakemake(folder, cfg, "--cores", "1", "-f", "status").returncode == 0
    status = pd.read_csv(folder / "results/partial/status.csv")
    return {(r.suite, r.hardware): r.state for r in status.itertuples()}


def test_damaged_spec_and_records_are_settled_by_plain_all(two_suites):
    folder, cfg = two_suites  # suites tiny and other on cpu1 and cpu2, every run finished
    run = folder / "results/tiny/default/cpu1/seed0"
    record, evaluation, spec = run / "train.json", run / "eval.json", run / "spec.json"
    good = record.read_text()
    untouched = {("other", "cpu1"): "done", ("other", "cpu2"): "done"}

    spec.write_text("garbage")  # the record is good: nothing is retrained, the spec is rewritten
    proc = snakemake(folder, cfg, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "spec.json is damaged; rewritten from the config" in proc.stderr, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stderr + proc.stdout and record.read_text() == good
    assert json.loads(spec.read_text())["run_dir"] == "results/tiny/default/cpu1/seed0"

    # Two damages of one suite, settled by one status and one all: a hand-edited evaluation (cpu1) and a record
    # cut short (cpu2: a full disk, an external copy cut short).
    data = json.loads(evaluation.read_text())
    data["metrics"] |= {"token_accuracy": 1.7, "exact_accuracy": -3}  # hand-edited
    evaluation.write_text(json.dumps(data))
    cut = folder / "results/tiny/default/cpu2/seed0"
    cut_record = cut / "train.json"
    cut_record.write_text(cut_record.read_text()[:100])
    assert _states(folder, cfg) == {("tiny", "cpu1"): "corrupt", ("tiny", "cpu2"): "corrupt"} | untouched
    assert evaluation.exists()  # status only reports
    proc = snakemake(folder, cfg, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{run.relative_to(folder)}/eval.json: metric token_accuracy is 1.7" in proc.stderr, proc.stderr[-3000:]
    assert json.loads((run / "eval.json.corrupt").read_text())["metrics"]["token_accuracy"] == 1.7
    assert 0 <= json.loads(evaluation.read_text())["metrics"]["token_accuracy"] <= 1
    assert "train.json -> train.json.corrupt" in proc.stderr, proc.stderr[-3000:]
    assert json.loads(cut_record.read_text())["status"] == "complete" and (cut / "train.json.corrupt").exists()
    assert record.read_text() == good  # the evaluation alone was redone
    assert _states(folder, cfg) == {("tiny", "cpu1"): "done", ("tiny", "cpu2"): "done"} | untouched
    runs = pd.read_csv(folder / "results/runs.csv")
    assert len(runs) == 4 and runs.token_accuracy.between(0, 1).all()


def test_sigusr2_also_checkpoints_and_exits_with_the_preempted_code(tmp_path, small_config):
    from hwsweep.run.train import EXIT_PREEMPTED

    cfg = _strict_cfg(small_config)
    cfg["recipe"]["schedule"]["steps"] = 3000
    spec = resolve(cfg).spec("tiny", "default", "cpu2", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    io.write_json(tmp_path / "spec.json", spec)
    # Run the workers without torchrun's agent, as SLURM's --signal reaches every process of the step.
    env = one_thread() | {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(29000 + os.getpid() % 1000),
                          "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    procs = [subprocess.Popen([str(BIN / "python"), "-m", "hwsweep.run.train", str(tmp_path / "spec.json")],
                              env=env | {"RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]  # fmt: skip
    ckpts = tmp_path / "run" / "checkpoints"
    deadline = time.monotonic() + 120
    while not list(ckpts.glob("step*.pt")) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in procs:
        p.send_signal(signal.SIGUSR2)
    codes = [p.wait(timeout=120) for p in procs]
    out = procs[0].stdout.read()
    assert codes == [EXIT_PREEMPTED, EXIT_PREEMPTED], out[-2000:]
    stopped_at = int(out.split("stop requested; checkpoint at step ")[1].split(",")[0])
    assert (ckpts / f"step{stopped_at:09d}.pt").exists()  # written at the signal, at the step all ranks agreed on
    assert torch.load(ckpts / f"step{stopped_at:09d}.pt", weights_only=False)["step"] == stopped_at < 3000


def test_status_while_a_sweep_trains_says_running(tmp_path):
    from test_orphans import _gone_within, _start

    proc = _start(tmp_path)  # snakemake training one long run in tmp_path
    try:
        for rank in workers(tmp_path, "hwsweep.run.train"):  # training on, on the CPU status leaves (not 2 cores)
            for thread in Path(f"/proc/{rank}/task").iterdir():
                with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                    os.setpriority(os.PRIO_PROCESS, int(thread.name), 19)
        cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
        status = snakemake(tmp_path, cfg, "--cores", "1", "-f", "status")
        assert status.returncode == 0, status.stderr[-2000:]
        states = pd.read_csv(tmp_path / "results/partial/status.csv")
        assert states.state.tolist() == ["running"], (states.to_dict("records"), status.stderr[-2000:])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert _gone_within(tmp_path, 40) == []


def test_a_lost_final_checkpoint_is_repaired_by_plain_all_and_status_names_every_repair(two_suites):
    folder, cfg = two_suites
    run = folder / "results/tiny/default/cpu1/seed0"
    (run / "final.pt").unlink()  # deleted by hand, while the evaluation must be redone
    (run / "eval.json").write_text("garbage")
    (run / "spec.json").write_text("garbage")
    proc = snakemake(folder, cfg, "--cores", "1", "-f", "status")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the next all: " in proc.stderr and "the final checkpoint is missing" in proc.stderr, proc.stderr[-3000:]
    assert "spec.json is damaged; would rewrite" in proc.stderr

    proc = snakemake(folder, cfg, "--cores", "2")  # plain all: retrained (from its checkpoints) and evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "train.json -> train.json.corrupt" in proc.stderr and (run / "final.pt").exists()
    assert json.loads((run / "train.json").read_text())["restarts"] == 1  # resumed, not trained again
    assert 0 <= json.loads((run / "eval.json").read_text())["metrics"]["token_accuracy"] <= 1

    proc = snakemake(folder, cfg, "--cores", "1", "-f", "status")
    assert "spec.json is damaged; rewritten from the config" in proc.stderr  # what the last all set right
    assert "an earlier all (" in proc.stderr and "the final checkpoint is missing" in proc.stderr
    status = pd.read_csv(folder / "results/partial/status.csv")
    assert set(status.state) == {"done"} and status.repairs.notna().sum() == 1


# -- file system faults on a finished sweep (issue 36): one line each, nothing lost, the next `all` repairs ----------

def _snapshot(results, but: str = "") -> dict:
    """The files of every run folder (records, checkpoints, specs) but `but`'s, by content: what `nothing lost`
    compares (a suite's tables are made again whenever one of its runs is)."""
    return {str(p.relative_to(results)): p.read_bytes() for p in sorted(results.rglob("seed*/**/*"))
            if p.is_file() and not (but and str(p.relative_to(results)).startswith(but))}  # fmt: skip


def _hwsweep_lines(proc) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("hwsweep: ")]


def _on_small_disk(folder, small_disk, slack_mb: float):
    """results/ moved onto a tmpfs of its size plus `slack_mb`, files and times kept (nothing is out of date)."""
    import shutil

    results, saved = folder / "results", folder / "results.saved"
    results.rename(saved)
    used = sum(p.stat().st_size for p in saved.rglob("*") if p.is_file())
    small_disk(results, used / 2**20 + slack_mb + 1)
    shutil.copytree(saved, results, dirs_exist_ok=True, symlinks=True)
    shutil.rmtree(saved)
    return results


def test_a_full_disk_is_named_in_the_log_status_and_report_and_the_next_all_repairs(two_suites, small_disk, monkeypatch):
    from conftest import fill

    from hwsweep.contracts.failure import log_reason
    from hwsweep.report import landing

    folder, cfg = two_suites
    results = _on_small_disk(folder, small_disk, slack_mb=3)
    run = results / "tiny/default/cpu2/seed0"
    for name in ("train.json", "eval.json", "final.pt", "checkpoints"):  # lost: the run is trained again
        subprocess.run(["rm", "-rf", str(run / name)], check=True)
    before = _snapshot(results, but="tiny/default/cpu2/seed0")
    filler = fill(results, leave=1_150_000)  # past the start-of-run check (1 MiB), short of a checkpoint's need

    proc = snakemake(folder, cfg, "--cores", "2")
    assert proc.returncode != 0
    log = folder / "logs/tiny/default/cpu2/seed0/train.log"
    line = f"hwsweep: {run.relative_to(folder)}/checkpoints: no space left on device ("
    text = log.read_text()
    assert line in text and "unexpected pos" not in text and "inline_container" not in text, text[-3000:]
    assert log_reason(log).startswith(line) and "then run snakemake again" in log_reason(log)

    status = snakemake(folder, cfg, "--cores", "1", "-f", "status")  # the 1 MB left hold status's tables
    assert status.returncode == 0, status.stderr[-2000:]
    rows = pd.read_csv(results / "partial/status.csv").set_index(["suite", "hardware", "seed"])
    assert rows.loc[("tiny", "cpu2", 0), "state"] == "failed"
    assert rows.loc[("tiny", "cpu2", 0), "problem"].startswith(line), rows.loc[("tiny", "cpu2", 0), "problem"]
    monkeypatch.chdir(folder)
    _, reasons = landing.run_states(resolve(cfg), "tiny")  # the report's failure list
    assert len(reasons) == 1 and line in reasons[0]

    fill(results)  # nothing left at all: refused before any job, in one line
    for args in (["--cores", "2"], ["--cores", "1", "-f", "status"]):
        proc = snakemake(folder, cfg, *args)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
        lines = _hwsweep_lines(proc)
        assert len(lines) == 1 and lines[0].startswith("hwsweep: results: no space left on device (0 bytes free"), lines
        if "status" in args:  # what status knows, on the terminal all the same
            assert any(line.split()[:4] == ["tiny", "default", "cpu2", "0"] and " failed " in line
                       for line in proc.stderr.splitlines()), proc.stderr[-2000:]  # fmt: skip

    filler.unlink()  # the fault removed: plain all trains the lost run and nothing else
    (run / "checkpoints").mkdir(exist_ok=True)
    for stale in (run / "checkpoints/.step000000005.pt.k1ll3d.tmp", run / ".train.json.k1ll3d.tmp"):
        stale.write_bytes(b"")  # what a write killed half-way leaves (a SIGKILL, a node that went down)
    proc = snakemake(folder, cfg, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "removed 2 temporary file(s) a killed write left" in log.read_text()
    assert _snapshot(results, but="tiny/default/cpu2/seed0") == before  # nothing lost, no other run redone
    assert json.loads((run / "train.json").read_text())["status"] == "complete" and (run / "eval.json").exists()
    assert not list(run.rglob(".*.tmp"))


def test_an_unwritable_results_folder_is_one_line_before_any_job_and_nothing_is_lost(two_suites, read_only):
    """Both faults, one after the other, on one copy of the sweep: a read-only file system (EROFS, root too) and a
    folder this user may not write (EACCES); each refused in one line before any job, nothing lost, and the
    first `all` after them repairs."""
    from conftest import WITHOUT_OVERRIDE

    folder, cfg = two_suites
    results = folder / "results"
    (results / "tiny/default/cpu1/seed0/eval.json").unlink()  # something to redo
    before = _snapshot(results)
    for fault in ("read-only", "permission denied"):
        prefix = WITHOUT_OVERRIDE if fault == "permission denied" else []
        if fault == "read-only":
            read_only(results)
        else:
            results.chmod(0o555)

        def run(*args):
            cmd, env = snakemake_command(folder, cfg, *args)
            return subprocess.run(prefix + cmd, capture_output=True, text=True, env=env, timeout=600)

        words = "read-only file system" if fault == "read-only" else "permission denied for user root"
        for args in (["--cores", "2"], ["--cores", "1", "-f", "status"]):
            proc = run(*args)
            lines = _hwsweep_lines(proc)
            assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, (fault, proc.stderr[-3000:])
            assert lines == [f"hwsweep: results: {words}; " + lines[0].split("; ", 1)[1]] and "run snakemake again" in lines[0]
        dry = run("-n")  # a dry run only reads: snakemake's own word on the outputs it could not replace, no traceback
        assert "Traceback" not in dry.stdout + dry.stderr, (fault, dry.stderr[-2000:])

        if fault == "read-only":
            read_only.undo()
        else:
            results.chmod(0o755)
        assert _snapshot(results) == before, fault  # nothing lost
    proc = snakemake(folder, cfg, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = _snapshot(results)
    assert json.loads(after.pop("tiny/default/cpu1/seed0/eval.json"))["metrics"] and after == before


def test_a_failing_scripts_one_line_is_in_snakemakes_console_without_its_escapes(tmp_path):
    """Without the profile's show-failed-logs: the job's stderr says the cause right above "Error in rule train",
    and status says the same line, neither with the colour the script's message had."""
    from conftest import script_config

    (tmp_path / "fails.py").write_text("print('step 1: loss 0.5', flush=True)\n"
                                       "raise ValueError('\\x1b[1;31mno labels in\\x1b[0m data/train.csv')\n")  # fmt: skip
    cfg = script_config({"command": ["python", "fails.py"], "workdir": str(tmp_path)},
                        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 3, "warmup_steps": 0}},
                        {"loss": {"goal": "min"}})  # fmt: skip
    proc = snakemake(tmp_path, cfg, "--cores", "1", "results/s/default/cpu1/seed0/train.json")
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    said = [i for i, line in enumerate(lines) if "train failed (exit 1): ValueError: no labels in data/train.csv" in line]
    error = [i for i, line in enumerate(lines) if line.startswith("Error in rule train")]
    assert said and error and said[0] < error[0], proc.stderr[-3000:]
    assert "\x1b" not in lines[said[0]]
    assert snakemake(tmp_path, cfg, "--cores", "1", "-f", "status").returncode == 0
    [problem] = pd.read_csv(tmp_path / "results/partial/status.csv").problem
    assert problem.endswith("ValueError: no labels in data/train.csv"), problem
