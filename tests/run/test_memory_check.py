"""Each rank's memory in the record, held against the plan: a rank's growth above what it held before the model was
built, beside the plan's figure per device and the declared budget; a run over its plan beyond the tolerance is
flagged in the record's checks (hwsweep.contracts.memory_check), one within it is not."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import helper_env, launcher

from hwsweep.contracts import io, memory_check
from hwsweep.contracts.hardware import GB
from hwsweep.contracts.records import RunRecord, run_row
from hwsweep.contracts.spec import EVAL_RECORD, TRAIN_RECORD, RunSpec
from hwsweep.plan.config import resolve
from hwsweep.report.headline import check_sentences

CONTEXT = 600 * 2**20


def ranks(*growth_mb, baseline=0.25) -> list[dict]:
    return [{"peak_gb": baseline + mb * 2**20 / GB, "baseline_gb": baseline} for mb in growth_mb]


def test_a_rank_over_its_plan_beyond_the_tolerance_is_flagged_by_name_and_one_within_it_is_not():
    planned = 1.0  # GB per device; on a CPU the first-use allowance is added
    allowed_mb = 1024 + memory_check.FIRST_USE_BYTES / 2**20
    assert memory_check.over_plan(planned, "cpu", CONTEXT, ranks(100, allowed_mb * 1.14)) is None
    check = memory_check.over_plan(planned, "cpu", CONTEXT, ranks(100, allowed_mb * 1.16, 200))
    assert check.startswith("memory: rank 1 used ") and "by 16% (tolerance 15%)" in check, check
    assert memory_check.flagged(["divergence: x", check]) and not memory_check.flagged(["divergence: x"])
    # compile's first use is allowed for; a GPU's allocator does not see the CUDA context the plan holds
    assert memory_check.over_plan(planned, "cpu", CONTEXT, ranks(allowed_mb * 1.16), compiled=True) is None
    gpu_allowed_mb = 1024 - CONTEXT / 2**20
    assert memory_check.over_plan(planned, "cuda", CONTEXT, ranks(gpu_allowed_mb * 1.14, baseline=0)) is None
    assert memory_check.over_plan(planned, "cuda", CONTEXT, ranks(gpu_allowed_mb * 1.16, baseline=0))
    assert memory_check.over_plan(None, "cpu", CONTEXT, ranks(10_000)) is None  # a user's model: no plan figure


def _spec(tmp_path, small_config, name: str, strategy: str, processes: int) -> RunSpec:
    cfg = small_config
    cfg["recipe"] |= {"checkpoint_every": 100, "parallel": {"strategy": strategy}}
    cfg["recipe"]["schedule"] = {"steps": 4, "warmup_steps": 0}
    cfg["hardware"] = {"hw": {"accelerator": "cpu", "devices_per_node": processes}}
    cfg["baseline"] = "hw"
    spec = resolve(cfg).spec("tiny", "default", "hw", 0)
    spec = RunSpec.from_dict(spec.to_dict() | {"run_dir": str(tmp_path / name)})
    io.write_json(tmp_path / name / "spec.json", spec.to_dict())
    return spec


def _train(tmp_path, spec, processes: int, *over: str) -> dict:
    run = spec.run_dir
    cmd = [*launcher(processes), "-m", "runtime_memory", f"{run}/spec.json", str(tmp_path / "grown"), *over]
    proc = subprocess.run(cmd, env=helper_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((tmp_path / spec.run_dir / TRAIN_RECORD).read_text())


def _evaluate(spec) -> dict:
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.evaluate", f"{spec.run_dir}/spec.json", "--threads", "2"],
                          env=helper_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((Path(spec.run_dir) / EVAL_RECORD).read_text())


@pytest.mark.slow
def test_every_ranks_memory_is_recorded_beside_the_plan_and_a_run_forced_over_it_is_flagged(tmp_path, small_config):
    """A small DDP run keeps within its plan (its growth is torch's first use: no check), and so does its evaluation
    (one process); an FSDP run on 2 processes whose rank 1 holds 300 MB more than its plan counts in its last step is
    flagged in its record, naming rank 1; its sharded evaluation, on 2 processes, is not."""
    normal = _spec(tmp_path, small_config, "normal", "ddp", 1)
    record = _train(tmp_path, normal, 1)
    assert record["planned_memory_gb"] == normal.plan.est_memory_gb
    assert record["memory_budget_gb"] == normal.plan.memory_gb
    (rank,) = record["rank_memory"]
    assert 0.1 < rank["baseline_gb"] < rank["peak_gb"] == record["peak_memory_gb"], record["rank_memory"]
    assert record["checks"] == [], record["checks"]
    evaluated = _evaluate(normal)
    assert len(evaluated["rank_memory"]) == 1 and evaluated["checks"] == [], evaluated
    assert evaluated["peak_memory_gb"] == evaluated["rank_memory"][0]["peak_gb"]

    over = _spec(tmp_path, small_config, "over", "fsdp", 2)
    record = _train(tmp_path, over, 2, "1:300")
    assert len(record["rank_memory"]) == 2 and record["peak_memory_source"] == "host_rss"
    grown = [r["peak_gb"] - r["baseline_gb"] for r in record["rank_memory"]]
    assert grown[1] - grown[0] > 0.25, record["rank_memory"]
    assert [c for c in record["checks"] if memory_check.flagged([c])] == [
        memory_check.over_plan(over.plan.est_memory_gb, "cpu", CONTEXT, record["rank_memory"])]
    assert record["checks"][-1].startswith("memory: rank 1 used "), record["checks"]
    row = run_row(RunRecord.from_dict(record), None, [])  # runs.csv's checks: the report's warning line reads them
    assert check_sentences(pd.DataFrame([{"hardware": "hw", "checks": row["checks"]}])) == [
        f"⚠ hw, runs' checks: {record['checks'][-1]}."]
    evaluated = _evaluate(over)
    assert evaluated["processes"] == 2 and len(evaluated["rank_memory"]) == 2 and evaluated["checks"] == [], evaluated
