"""The shipped examples end to end through the snakemake CLI, each run as the docs give it (docs/index.md): from the
root of a copy of the repository (its config/config.yaml included), with
`snakemake --cores 2 --configfile examples/NAME/config.yaml --replace-workflow-config all`, the example's
config shortened (fewer steps and seeds)."""

import json
import os
import re

import pandas as pd
import pytest
from conftest import example, example_snakemake

pytestmark = pytest.mark.slow


def tracked(folder, suite: str, metrics: list[str], every_step: bool = True) -> None:
    """Every run of the sweep is one MLflow run whose curves are the record's, and one TensorBoard run; the
    suite's tables reached both (read back with MlflowClient and EventAccumulator)."""
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 opens its file store only when told
    client = MlflowClient(tracking_uri=(folder / "results/mlruns").as_uri())
    runs = client.search_runs([client.get_experiment_by_name(suite).experiment_id])
    records = sorted(folder.glob(f"results/{suite}/*/*/seed*/train.json"))
    assert len(runs) == len(records) + 1  # one per run, and the suite's tables
    by_name = {r.info.run_name: r for r in runs}
    for path in records:
        record = json.loads(path.read_text())
        run = by_name[f"{record['variant']}/{record['hardware']}/seed{record['seed']}"]
        taken = {"state": "ok", "why": None, "dropped": 0, "undelivered": 0}  # each took every row
        assert record["tracking"]["backends"] == {"tensorboard": taken, "mlflow": taken}
        events = EventAccumulator(str(path.parent / "tensorboard"), size_guidance={"scalars": 0})
        events.Reload()
        for name in metrics:
            history = client.get_metric_history(run.info.run_id, name)
            assert [e.step for e in events.Scalars(name)] == [m.step for m in history], name
            if name not in record["curves"]:  # logged for the trackers only (lr): once per log step
                assert len({m.step for m in history}) == len(history) > 0, name
                continue
            curve = dict(zip(record["curves"][name]["steps"], record["curves"][name]["values"]))
            points = [(m.step, m.value) for m in history]
            assert points == [(step, curve.get(step)) for step, _ in points] and points[-1][0] == max(curve), name
            # a command's parsed lines are forwarded as they come; the runtime sends the loss at its log steps
            assert len(points) == len(curve) if every_step else sorted(set(points)) == points, name
    tables = by_name[f"{suite} tables"]
    assert {a.path for a in client.list_artifacts(tables.info.run_id)} == {"comparison.csv", "equivalence.csv", "speedup.csv"}
    texts = EventAccumulator(str(folder / f"results/{suite}/tensorboard"))
    texts.Reload()
    assert set(texts.PluginTagToContent("text")) == {"comparison", "equivalence", "speedup"}


def check_sweep(folder, example_name: str, suite: str, metrics: list[str], per_step: set[str], report=None,
                tables="results"):
    """The sweep's tables (runs and comparison from `tables`: all suites' or one suite's folder), figures and
    report (`report`: snakemake's --report already run, else run here)."""
    runs = pd.read_csv(folder / tables / "runs.csv")
    assert len(runs) == 4 and set(runs.hardware) == {"cpu1", "cpu2"} and (runs.trainer == "command").all()
    for name in metrics:
        assert runs[name].notna().all(), name
    comparison = pd.read_csv(folder / tables / "comparison.csv").set_index("hardware")
    assert comparison.loc["cpu1", "val_acc_verdict"] == "baseline"
    assert comparison.loc["cpu2", "val_acc_verdict"] in ("equivalent", "inconclusive", "different")
    assert comparison.loc["cpu2", "speedup"] > 0 and comparison.loc["cpu2", "n_seeds"] == 2
    curves = pd.read_csv(folder / f"results/{suite}/curves.csv")
    assert set(curves.metric) == per_step
    for name in ["curves.png", "equivalence.png", "speedup.png"] + [f"metric_{m}.png" for m in metrics]:
        assert (folder / f"results/{suite}/plots" / name).stat().st_size > 0
    if report is None:
        report = example_snakemake(folder, None, example_name, "--report", str(folder / "report.html"))
    assert report.returncode == 0, report.stderr[-3000:]
    assert "metric_val_acc.png" in (folder / "report.html").read_text()
    return runs


def test_plain_ddp_script_sweeps_unmodified(plain_ddp_swept):
    """conftest's plain_ddp_swept: its suite plain_ddp (its suite broken, failing beside it, is test_report's)."""
    name = "plain_ddp"
    folder, sweep, report = plain_ddp_swept
    failed = {re.search(r"output: results/(\w+)/", block)[1]  # the suite of each failed job
              for block in re.findall(r"^Error in rule \w+:\n((?:    .*\n)+)", sweep.stderr, flags=re.M)}
    assert failed == {"broken"}, sweep.stderr[-4000:]  # no job of suite plain_ddp failed
    # A sweep with a failed suite makes no all-suites tables: suite plain_ddp's own
    runs = check_sweep(folder, name, "plain_ddp", ["loss", "val_loss", "val_acc"], {"loss", "val_loss", "val_acc"},
                       report, tables="results/plain_ddp")
    tracked(folder, "plain_ddp", ["loss", "val_acc"])
    assert (runs.val_acc > 0.5).all()  # it learned: chance is 0.25
    record = json.loads((folder / "results/plain_ddp/hidden-32/cpu2/seed1/train.json").read_text())
    assert record["plan"]["world_size"] == 2 and record["checks"] == []  # it logged the planned global batch
    assert record["curves"]["val_acc"]["steps"] == [30, 60]
    assert record["provenance"]["script"]["sha256"]
    log = (folder / "logs/plain_ddp/hidden-32/cpu2/seed1/train.log").read_text()
    assert "--nproc_per_node 2 -m hwsweep.run.tether " in log  # every worker tethered to torchrun's agent
    assert "examples/plain_ddp/train.py --batch_size=16" in log and "--grad_accum=2" in log and "--seed=1" in log


def test_lightning_script_gets_the_plan_through_its_trainer_flags(tmp_path):
    name = "lightning"
    folder, cfg = example(tmp_path, name, schedule={"steps": 40, "warmup_steps": 4})
    proc = example_snakemake(folder, cfg, name)
    assert proc.returncode == 0, proc.stderr[-4000:]
    check_sweep(folder, name, "lightning", ["train_loss", "val_loss", "val_acc"], {"train_loss"})
    log = (folder / "logs/lightning/default/cpu2/seed1/train.log").read_text()
    for flag in ("--devices 2", "--accumulate_grad_batches 2", "--batch_size 16", "--precision 32-true",
                 "--max_steps 40", "--seed 1", "--deterministic"):  # fmt: skip
        assert flag in log, flag


def test_runtime_api_script_sweeps_with_its_own_record(tmp_path):
    name = "runtime_api"
    folder, cfg = example(tmp_path, name, schedule={"steps": 60, "warmup_steps": 5})
    cfg["recipe"]["args"]["eval_every"] = 30
    cfg["tracking"] = ["tensorboard", "mlflow"]  # the script's runtime feeds the trackers; the runner forwards nothing
    proc = example_snakemake(folder, cfg, name)
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = check_sweep(folder, name, "runtime_api", ["loss", "val_loss", "val_acc"], {"loss", "val_loss", "val_acc"})
    tracked(folder, "runtime_api", ["loss", "val_acc", "lr"], every_step=False)  # lr: only the runtime logs it
    assert (runs.val_acc > 0.5).all()  # it learned: chance is 0.25
    assert (runs.data_order == "global-order/size4096/workers0").all()  # the runtime wrote the record
    # no seed flag, yet seeded by the runtime: the same seed on two hardware is a pair
    assert runs.seeded.all()
    assert set(pd.read_csv(folder / "results/equivalence.csv").test) == {"paired TOST"}
    # strict mode: one and two processes trained the same bits, seed by seed
    for seed in (0, 1):
        one, two = (json.loads((folder / f"results/runtime_api/default/{hw}/seed{seed}/train.json").read_text())
                    for hw in ("cpu1", "cpu2"))  # fmt: skip
        assert one["curves"] == two["curves"] and one["metrics"] == two["metrics"]
        assert two["curves"]["val_acc"]["steps"] == [30, 60] and len(two["curves"]["loss"]["steps"]) == 60
