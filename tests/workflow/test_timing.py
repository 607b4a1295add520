"""Timings that are not contaminated: with timing: exclusive the local profile's one timing slot keeps
training runs from overlapping; with timing: shared they overlap and each record counts the others."""

import copy
import json
import os
import subprocess

import pytest
import yaml
from conftest import BIN, REPO, SMALL, snakemake

from hwsweep.contracts.hardware import DEFAULT_RUNTIME_MIN

pytestmark = pytest.mark.slow

SCRIPT = """
import sys, time
start = time.time()
time.sleep(1.5)
print(f"step 1: val_loss 0.5 started {start:.3f} ended {time.time():.3f}")
"""
CONFIG = {
    "trainer": {"command": ["python", "train.py"], "launch": "plain", "args": {"seed": "seed", "batch": "micro_batch",
                "accumulation": "accumulation", "steps": "steps", "precision": "precision"}},  # fmt: skip
    "recipe": {"global_batch": 8, "micro_batch": 4, "schedule": {"steps": 1, "warmup_steps": 0}},
    "metrics": {"val_loss": {"goal": "min", "margin": 0.1},
                "started": {"goal": "min"}, "ended": {"goal": "min"}},  # fmt: skip
    "suites": {"t": {}},
    "seeds": [0, 1],
    "hardware": {"cpu1": {"accelerator": "cpu"}},
    "baseline": "cpu1",
}


def intervals(folder):
    out = []
    for seed in (0, 1):
        record = json.loads((folder / f"results/t/default/cpu1/seed{seed}/train.json").read_text())
        out.append((record["metrics"]["started"], record["metrics"]["ended"], record["provenance"]["contention"]))
    return sorted(out, key=lambda i: i[0])


@pytest.mark.alone  # counts the other runs on the node: only its own
@pytest.mark.parametrize("timing", ["exclusive", "shared"])
def test_exclusive_timing_runs_one_training_at_a_time(tmp_path, timing):
    (tmp_path / "train.py").write_text(SCRIPT)
    cfg = copy.deepcopy(CONFIG) | {"timing": timing}
    # The local profile's setting, on 2 cores: two 1-core runs would otherwise overlap.
    targets = [f"results/t/default/cpu1/seed{s}/train.json" for s in (0, 1)]
    proc = snakemake(tmp_path, cfg, *targets, "--cores", "2", "--resources", "timing_slot=1")  # targets first: --resources takes several
    assert proc.returncode == 0, proc.stderr[-3000:]
    (s0, e0, c0), (s1, e1, c1) = intervals(tmp_path)
    if timing == "exclusive":
        assert s1 >= e0 and c0["other_runs"] == c1["other_runs"] == 0
    else:
        assert s1 < e0 and c0["other_runs"] + c1["other_runs"] >= 1


@pytest.mark.alone
def test_the_local_profile_runs_timed_trainings_one_at_a_time_by_default(tmp_path):
    """No `timing` in the config and no --resources: the local profile's timing_slot=1 alone serialises them."""
    (tmp_path / "train.py").write_text(SCRIPT)
    targets = [f"results/t/default/cpu1/seed{s}/train.json" for s in (0, 1)]
    proc = snakemake(tmp_path, copy.deepcopy(CONFIG), *targets, "--profile", str(REPO / "profiles/local"), "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (s0, e0, c0), (s1, e1, c1) = intervals(tmp_path)
    assert s1 >= e0 and c0["other_runs"] == c1["other_runs"] == 0


def sbatch_args(tmp_path, cfg, *args) -> list[str]:
    """What sbatch is given for a train job under the slurm profile (a stand-in sbatch records it and refuses
    the job)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{tmp_path}/sbatch.args'\nexit 1\n")
    for name in ("squeue", "sinfo"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(path), "--replace-workflow-config", "--profile", str(REPO / "profiles/slurm"),
           "--retries", "0", "--jobs", "1", "results/tiny/default/cpu1/seed0/train.json",
           # the profile's 20 s wait before the first status check, idled here after the refusal: 1 s will do
           "--slurm-init-seconds-before-status-checks", "1", *args]  # fmt: skip
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode != 0  # the stand-in refused the job: nothing ran
    return (tmp_path / "sbatch.args").read_text().splitlines()


def signalled_after(args: list[str]) -> int:
    """Seconds from a job's start to its SIGTERM: its time limit (-t, minutes) less the --signal lead. The run's job
    also holds its evaluation's minutes (workflow/rules/allocation.smk), and its signal comes that much earlier."""
    (lead,) = [int(a.split("@")[1]) for a in args if a.startswith("--signal=TERM@")]
    return int(args[args.index("-t") + 1].strip("'")) * 60 - lead


def test_a_three_minute_runtime_is_submitted_with_a_quarter_of_it_as_the_signal_lead(tmp_path):
    """Hardware.signal_lead reaches sbatch: 45 s before a 3-minute training's limit, not 180 s (signalled as it
    starts)."""
    cfg = copy.deepcopy(SMALL)
    cfg["hardware"]["cpu1"]["runtime"] = 3
    args = sbatch_args(tmp_path, cfg)
    assert signalled_after(args) == 3 * 60 - 45, args


@pytest.mark.parametrize("timing", ["exclusive", "shared", "auto"])
def test_the_slurm_profile_asks_for_exclusive_nodes_for_timed_runs(tmp_path, timing):
    """auto, the default, does not take whole nodes on a cluster."""
    args = sbatch_args(tmp_path, copy.deepcopy(SMALL) | {"timing": timing})
    assert signalled_after(args) == DEFAULT_RUNTIME_MIN * 60 - 180  # the checkpoint-before-the-limit signal stays
    assert "--requeue" in args and "--open-mode=append" in args  # a checkpointed stop requeues the job itself
    assert ("--exclusive" in args) == (timing == "exclusive")


@pytest.mark.parametrize("extra, kept, dropped, ours", [
    ("--mail-type=END", ["--mail-type=END", "--exclusive"], [], True),  # added to, not replaced
    ("--signal=TERM@50", ["--signal=TERM@50", "--exclusive"], [], False),  # named: the profile's
    ("--no-requeue", ["--no-requeue"], ["--requeue"], True),  # its opposite named: the profile's
])  # fmt: skip
def test_a_profiles_slurm_extra_for_train_is_merged_with_hwsweeps(tmp_path, extra, kept, dropped, ours):
    args = sbatch_args(tmp_path, copy.deepcopy(SMALL) | {"timing": "exclusive"},
                       "--set-resources", f"train:slurm_extra='{extra}'")  # fmt: skip
    assert all(a in args for a in kept) and not any(a in args for a in dropped), args
    assert (signalled_after(args) == DEFAULT_RUNTIME_MIN * 60 - 180) == ours, args  # hwsweep's signal, or the profile's


def test_a_local_snakemake_without_a_timing_slot_is_warned_once(tmp_path):
    warning = "hwsweep warning: timing: auto, but this snakemake offers no timing_slot"
    bare = snakemake(tmp_path, copy.deepcopy(SMALL), "-n", "--cores", "2")
    assert bare.returncode == 0 and bare.stderr.count(warning) == 1, bare.stderr[-2000:]
    for args in (["--resources", "timing_slot=1"], ["--profile", str(REPO / "profiles/local")]):
        proc = snakemake(tmp_path, copy.deepcopy(SMALL), "-n", *args, "--cores", "2")
        assert proc.returncode == 0 and warning not in proc.stderr, (args, proc.stderr[-2000:])
    shared = snakemake(tmp_path, copy.deepcopy(SMALL) | {"timing": "shared"}, "-n", "--cores", "2")
    assert shared.returncode == 0 and warning not in shared.stderr
