"""Timings that are not contaminated: with timing: exclusive the local profile's one timing slot keeps
training runs from overlapping; with timing: shared they overlap and each record counts the others."""

import copy
import json

import pytest

from conftest import snakemake

pytestmark = pytest.mark.slow

SCRIPT = """
import sys, time
start = time.time()
time.sleep(1.5)
print(f"step 1: val_loss 0.5 started {start:.3f} ended {time.time():.3f}")
"""
CONFIG = {
    "trainer": {"command": ["python", "train.py"], "launch": "plain", "args": {"seed": "seed", "batch": "micro_batch",
                "steps": "steps", "precision": "precision"}},  # fmt: skip
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
