"""Every value the schema accepts plans, runs and aggregates (issue 26): configs at the ends of the schema's
numeric ranges either get one line naming the field or a plan; a plan's runs, as the built-in trainer records
them at that boundary (one step: no timed step, train_seconds 0), go through the real aggregate, the figures,
status and the report's landing page without an error. Two real sweeps at every minimum are slow."""

import copy
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, SMALL, snakemake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwsweep.analysis import validation
from hwsweep.analysis.aggregate import aggregate, prices_of
from hwsweep.analysis.status import write_status
from hwsweep.contracts import io
from hwsweep.contracts.records import EvalRecord, RunRecord
from hwsweep.contracts.spec import EVAL_RECORD, TRAIN_RECORD, canonical_json
from hwsweep.plan.config import ConfigError, load_schema, resolve
from hwsweep.plan.config.schema import _deref
from hwsweep.report import landing, plots

SCHEMA = load_schema()
TINY = 1e-6  # above an exclusive minimum of 0


def _ends(schema: dict, prefix: str) -> list[tuple[str, object]]:
    """(dotted key, value) at both ends of every numeric range under `schema`'s properties."""
    out = []
    for key, sub in _deref(schema, SCHEMA).get("properties", {}).items():
        sub = _deref(sub, SCHEMA)
        options = sub.get("anyOf", [sub])
        for option in options:
            kinds = option.get("type") if isinstance(option.get("type"), list) else [option.get("type")]
            if "integer" in kinds or "number" in kinds:
                low = option.get("minimum", option.get("exclusiveMinimum", 0) + (TINY if "exclusiveMinimum" in option else 0))
                high = option.get("maximum", option.get("exclusiveMaximum"))
                integer = "integer" in kinds
                out += [(f"{prefix}{key}", int(v) if integer else v) for v in (low, high) if v is not None]
        if sub.get("type") == "object" and key not in ("args",):
            out += _ends(sub, f"{prefix}{key}.")
    return out


BOUNDARIES = (_ends(SCHEMA["$defs"]["recipe"], "recipe.") + _ends(SCHEMA["$defs"]["tasks"]["sort"], "recipe.task.")
              + _ends(SCHEMA["$defs"]["models"]["transformer"], "recipe.model.")
              + _ends(SCHEMA["$defs"]["hardware"], "hardware.cpu2.")
              + _ends(SCHEMA["properties"]["guard"], "guard.") + _ends(SCHEMA["properties"]["statistics"], "statistics."))  # fmt: skip
MINIMA = {}
for _key, _value in BOUNDARIES:
    MINIMA.setdefault(_key, _value)  # the low end comes first


def _set(cfg: dict, dotted: str, value) -> None:
    *parents, leaf = dotted.split(".")
    node = cfg
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


def test_the_boundaries_cover_the_schema():
    keys = {k for k, _ in BOUNDARIES}
    assert {"recipe.schedule.steps", "recipe.global_batch", "recipe.micro_batch", "recipe.optimizer.lr",
            "recipe.task.length", "recipe.model.width", "hardware.cpu2.price_per_hour", "guard.factor"} <= keys
    assert MINIMA["recipe.schedule.steps"] == 1 and MINIMA["recipe.optimizer.lr"] == TINY


def _record(spec, seed_offset: float) -> tuple[RunRecord, EvalRecord]:
    """train.json and eval.json as the built-in trainer and evaluator write them at this plan: the first step is
    startup, so one step leaves no timed step (train_seconds 0, throughput 0)."""
    steps = spec.plan.steps
    step_seconds = [0.01 + seed_offset] * (steps - 1)
    losses = [2.0 / (1 + s + seed_offset) for s in range(steps)]
    timed = sum(step_seconds)
    speed = spec.plan.global_batch * (steps - 1) / timed if timed else 0.0
    train = RunRecord(
        status="complete", suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
        trainer="builtin", spec=spec.to_dict(), plan=spec.plan.__dict__ | {"threads_per_process": 1},
        metrics={"final_loss": losses[-1]}, curves={"loss": {"steps": list(range(1, steps + 1)), "values": losses}},
        train_seconds=timed, startup_seconds=1.0, wall_seconds=1.0 + timed, samples_per_second=speed,
        data_order={"sampler": "global-order"}, segments=[{"start_step": 0}], restarts=0, resumed_from_step=None,
        provenance={}, seeded=True, step_seconds=step_seconds, checkpoint="final.pt",
    )  # fmt: skip
    evaluation = EvalRecord(suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
                            evaluator="builtin", metrics={"token_accuracy": 0.5, "exact_accuracy": 0.25},
                            eval_seconds=0.1)  # fmt: skip
    return train, evaluation


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=st.lists(st.sampled_from(BOUNDARIES), unique_by=lambda b: b[0], max_size=6),
       one_step=st.booleans(), one_seed=st.booleans())  # fmt: skip
def test_configs_at_the_schemas_boundaries_plan_and_their_runs_aggregate(tmp_path_factory, monkeypatch, chosen, one_step,
                                                                         one_seed):  # fmt: skip
    cfg = copy.deepcopy(SMALL)
    cfg["seeds"] = [0] if one_seed else [0, 1]
    for key, value in chosen + ([("recipe.schedule.steps", 1), ("recipe.schedule.warmup_steps", 0)] if one_step else []):
        _set(cfg, key, value)
    try:
        matrix = resolve(cfg)
    except ConfigError as e:  # refused: one line naming a field
        assert "\n" not in str(e) and ":" in str(e).split(" ")[0], str(e)
        return
    if any(spec.plan.steps > 1000 for spec in (matrix.spec(r.suite, r.variant, r.hardware, r.seed)
                                               for r in matrix.runs())):  # fmt: skip
        return  # a record of that many steps is no cheaper to check than to describe; the schema's minima matter here
    folder = tmp_path_factory.mktemp("sweep")
    monkeypatch.chdir(folder)
    for i, run in enumerate(matrix.runs()):
        spec = matrix.spec(run.suite, run.variant, run.hardware, run.seed)
        train, evaluation = _record(spec, 0.001 * i)
        io.write_text(spec.path("spec.json"), canonical_json(spec))
        io.write_json(spec.path(TRAIN_RECORD), train.to_dict())
        io.write_json(spec.path(EVAL_RECORD), evaluation.to_dict())
        spec.path("final.pt").write_bytes(b"model")
        assert validation.run_state(spec).state == "done", validation.run_state(spec)
    status = write_status(matrix)
    assert set(status.state) == {"done"}
    results = Path("results/tiny")
    out = {n: results / f"{n}.csv" for n in ("runs", "curves", "equivalence", "speedup", "comparison")}
    dirs = [Path(r.run_dir) for r in matrix.runs("tiny")]
    comparison = aggregate([d / TRAIN_RECORD for d in dirs], [d / EVAL_RECORD for d in dirs], matrix.baseline,
                           matrix.statistics, list(matrix.metrics), out, prices_of(matrix.hardware))  # fmt: skip
    speedup = pd.read_csv(out["speedup"])
    # the plan decides, not how the boundary was drawn: BOUNDARIES holds steps 1 too
    if all(matrix.spec(r.suite, r.variant, r.hardware, r.seed).plan.steps == 1 for r in matrix.runs()):
        # nothing timed: no speedup, never a division by zero
        assert speedup.speedup.isna().all() and speedup.device_hours.isna().all()
    else:
        assert speedup.speedup.map(math.isfinite).all()
    plots.speedup_by_devices(speedup, comparison, matrix.baseline, results / "speedup.png")
    plots.time_breakdown(comparison, matrix.baseline, results / "time.png")
    page = landing.write(matrix, {"tiny": True}, REPO / "workflow/report/workflow.rst", Path("landing.rst"))
    assert "No results" not in page.read_text()


def _minimal_config() -> dict:
    """SMALL at every minimum the schema allows for the reference transformer (one step, batch 1, width 4...)."""
    cfg = copy.deepcopy(SMALL)
    cfg["recipe"] = {"task": {"length": 2, "vocab_size": 2, "train_size": 1, "eval_size": 1},
                     "model": {"width": 4, "depth": 1, "heads": 1, "mlp_ratio": 1},
                     "schedule": {"steps": 1, "warmup_steps": 0}, "global_batch": 2, "micro_batch": 1,
                     "checkpoint_every": 1, "log_every": 1, "eval_subset": 1}  # fmt: skip
    cfg["seeds"] = [0]
    return cfg


@pytest.mark.slow
def test_a_sweep_at_the_schemas_minima_trains_aggregates_and_reports(tmp_path):
    cfg = _minimal_config()
    proc = snakemake(tmp_path, cfg, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(tmp_path / "results/runs.csv")
    assert len(runs) == 2 and (runs.train_seconds == 0).all()  # one step: the first step is startup
    assert snakemake(tmp_path, cfg, "--cores", "1", "-f", "status").returncode == 0
    assert set(pd.read_csv(tmp_path / "results/partial/status.csv").state) == {"done"}
    proc = snakemake(tmp_path, cfg, "--report", str(tmp_path / "report.html"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / ".snakemake/hwsweep/landing.rst").read_text()
    assert "No results" not in page and "Suite tiny" in page
