"""The whole workflow through the snakemake CLI: spec -> torchrun train -> evaluate -> aggregate -> report."""

import copy
import hashlib
import json
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO, snakemake

from hwsweep.contracts.spec import canonical_json
from hwsweep.models.families import SEQUENCE_METRICS
from hwsweep.plan.config import resolve

pytestmark = pytest.mark.slow


def test_end_to_end_local_run_and_report(tmp_path, small_config):
    # A deliberately misconfigured third hardware: same device, other precision.
    small_config["hardware"]["cpu1bf"] = {"accelerator": "cpu", "devices_per_node": 1, "precision": "bf16-mixed"}
    small_config["advisor"] = {"allow_precision_mismatch": True}
    # The paired test sees bf16's shift of the final loss on CPU (~1e-4) only at a margin below it.
    small_config["metrics"] = copy.deepcopy(SEQUENCE_METRICS)
    small_config["metrics"]["final_loss"]["margin"] = 1e-6
    proc = snakemake(tmp_path, small_config, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-4000:]

    run_dir = tmp_path / "results/tiny/default/cpu2/seed1"
    train = json.loads((run_dir / "train.json").read_text())
    assert train["status"] == "complete" and train["plan"]["world_size"] == 2
    assert train["plan"]["global_batch"] == 32 and train["plan"]["accumulation"] == 2
    losses = train["curves"]["loss"]["values"]
    assert len(losses) == 60 and losses[-1] < 0.9 * losses[0] and train["metrics"]["final_loss"] == losses[-1]
    assert train["samples_per_second"] > 0 and train["startup_seconds"] > 0
    prov = train["provenance"]
    assert prov["torch"] and prov["host"] and len(prov["devices"]) == 2
    assert train["spec"]["recipe"]["model"]["width"] == 32  # the resolved config travels with the run
    assert (tmp_path / "logs/tiny/default/cpu2/seed1/train.log").read_text().count("world size 2") == 1
    assert (tmp_path / "benchmarks/tiny/default/cpu2/seed1/train.tsv").exists()

    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert 0 < evaluation["metrics"]["token_accuracy"] <= 1 and evaluation["evaluator"] == "builtin"

    runs = pd.read_csv(tmp_path / "results/runs.csv")
    assert len(runs) == 6 and set(runs.hardware) == {"cpu1", "cpu2", "cpu1bf"}
    comparison = pd.read_csv(tmp_path / "results/comparison.csv")
    assert sorted(comparison.hardware) == ["cpu1", "cpu1bf", "cpu2"]
    assert (comparison.n_seeds == 2).all()
    base = comparison.set_index("hardware").loc["cpu1"]
    assert base.speedup == 1.0 and pd.isna(base.efficiency)  # no smaller count to measure cpu1 against
    other = comparison.set_index("hardware").loc["cpu2"]
    assert other.device_ratio == 2 and other.speedup > 0
    assert other.scaling_reference == "cpu1" and other.efficiency == pytest.approx(other.speedup / 2)
    cpu2 = runs[runs.hardware == "cpu2"].token_accuracy
    assert other.token_accuracy_mean == pytest.approx(cpu2.mean())
    assert base.token_accuracy_verdict == "baseline"
    assert other.token_accuracy_verdict in ("equivalent", "inconclusive", "different")

    # The misconfigured hardware is flagged and the diagnosis names the cause.
    bf = comparison.set_index("hardware").loc["cpu1bf"]
    assert bf.final_loss_verdict != "equivalent"
    assert bf.diagnosis.startswith("precision/TF32: precision bf16-mixed vs fp32")
    equivalence = pd.read_csv(tmp_path / "results/equivalence.csv")
    assert set(equivalence.metric) == {"token_accuracy", "exact_accuracy", "final_loss"}
    assert set(equivalence.hardware) == {"cpu2", "cpu1bf"} and (equivalence.margin > 0).all()
    speedup = pd.read_csv(tmp_path / "results/speedup.csv").set_index("hardware")
    assert speedup.loc["cpu2", "device_ratio"] == 2 and speedup.loc["cpu2", "n_pairs"] == 2
    # MFU and throughput per device from the records to runs.csv and the speedup table; startup in parts.
    assert ((runs.mfu > 0) & (runs.mfu < 1) & (runs.tflops_per_device > 0)).all()
    assert speedup.loc["cpu2", "mfu"] == pytest.approx(runs[runs.hardware == "cpu2"].mfu.mean())
    parts = runs[[f"startup_{p}_seconds" for p in ("imports", "process_group", "data", "model", "first_step")]]
    assert (parts.sum(axis=1) - runs.startup_seconds).abs().max() < 0.05
    page = (tmp_path / "results/tiny/tables/speedup.html").read_text()
    assert "<th>MFU</th>" in page
    # Without the local profile's timing slot the runs overlapped: whatever the records say is in the table.
    flagged = runs[runs.contended.fillna("") != ""].hardware
    assert all(f"⚠ {hw}: " in page for hw in set(flagged)) and (len(flagged) > 0) == ("⚠ " in page.split("</th>")[-1])
    plan = pd.read_csv(tmp_path / "results/plan.tsv", sep="\t").set_index("hardware")
    assert plan.loc["cpu1bf", "precision"] == "bf16-mixed" and "allowed" in plan.loc["cpu1bf", "warnings"]

    # Nothing left to do: a second run schedules nothing.
    again = snakemake(tmp_path, small_config, "-n", "--cores", "2")
    assert "Nothing to be done" in again.stdout + again.stderr

    report = tmp_path / "report.html"
    proc = snakemake(tmp_path, small_config, "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = report.read_text()
    for name in ("metric_token_accuracy.png", "metric_exact_accuracy.png", "speedup.png", "curves.png", "equivalence.png",
                 "time_breakdown.png", "comparison.csv", "equivalence.csv", "speedup.csv", "plan.tsv"):
        assert name in html
    assert len(re.findall(r"data:image/png;base64", html)) >= 4 or html.count(".png") >= 4


def test_a_finished_sweep_copied_elsewhere_is_up_to_date_and_its_report_builds(finished_two_suites, tmp_path):
    """A sweep folder moved or copied to another path (times kept) names no folder of the machine in its records:
    nothing reruns there (the config's folder, a job parameter, is named relative to the working directory), and
    the report built there leaves nothing out."""
    folder = tmp_path / "elsewhere" / "moved"
    shutil.copytree(finished_two_suites, folder, symlinks=True)
    proc = snakemake(folder, None, "-n", "--cores", "2")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    proc = snakemake(folder, None, "--report", str(folder / "report.html"))
    assert proc.returncode == 0 and "hwsweep warning" not in proc.stderr, proc.stderr[-3000:]
    html = (folder / "report.html").read_text()
    for item in ("results/comparison.html", "results/plan.html", "results/tiny/tables/comparison.html",
                 "results/other/tables/comparison.html"):  # fmt: skip
        assert item in html, item


def test_changing_one_suite_reruns_only_that_suite(two_suites):
    folder, cfg = two_suites  # suites tiny and other, every run finished
    cfg["suites"]["other"]["overrides"]["optimizer"] = {"lr": 0.001}
    proc = snakemake(folder, cfg, "-n", "--cores", "2")
    trains = re.findall(r"rule train:.*?wildcards: suite=(\w+)", proc.stdout, flags=re.S)
    assert trains and set(trains) == {"other"}, proc.stdout[-3000:]


def test_a_metric_figure_that_cannot_be_drawn_costs_no_other_figure_and_the_log_names_it(two_suites):
    """plot_suite draws every figure of a suite in one job: a metric whose figure fails (its column gone from
    runs.csv) gets a notice, the job and the other figures do not fail, and logs/{suite}/plot.log names it."""
    folder, cfg = two_suites
    runs = folder / "results/tiny/runs.csv"
    pd.read_csv(runs).drop(columns=["exact_accuracy"]).to_csv(runs, index=False)
    plots = folder / "results/tiny/plots"
    before = {p.name: p.stat().st_mtime_ns for p in plots.glob("*.png")}
    proc = snakemake(folder, cfg, "--cores", "1", "--allowed-rules", "plot_suite", "-f", "results/tiny/plots/curves.png")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p.name for p in plots.glob("*.png") if p.stat().st_mtime_ns > before[p.name]} == set(before)  # all redrawn
    log = (folder / "logs/tiny/plot.log").read_text()
    assert "figure results/tiny/plots/metric_exact_accuracy.png could not be drawn:" in log and "KeyError" in log
    assert log.count("could not be drawn") == 1  # token_accuracy, final_loss and the other figures were drawn


def test_naming_a_tracker_later_retrains_nothing_and_hides_no_pending_job(two_suites):
    """Issue 22: which trackers watch is not part of what trains, so adding one rewrites each run's tracking.json
    and schedules no train job of a finished run. Issue 34: the dry run after it still lists an unfinished run's
    pending jobs (they were hidden when a rule rewrote tracking.json: snakemake plans nothing after an ancient
    input's rule that reruns)."""
    folder, cfg = two_suites
    unfinished = folder / "results/other/default/cpu2/seed0"
    for path in (unfinished / "train.json", unfinished / "eval.json", folder / "results/other/runs.csv"):
        path.unlink()  # as if that run had not finished: nor were its suite's tables made
    cfg["tracking"] = ["tensorboard"]
    proc = snakemake(folder, cfg, "-n", "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trains = re.findall(r"rule train:.*?wildcards: suite=(\w+), variant=\w+, hardware=(\w+)", proc.stdout, flags=re.S)
    assert trains == [("other", "cpu2")], proc.stdout[-3000:]
    assert "rule evaluate:" in proc.stdout and "rule aggregate_suite:" in proc.stdout
    assert "tracking.json would be rewritten by a real run (nothing retrains" in proc.stderr, proc.stderr[-3000:]
    finished = folder / "results/tiny/default/cpu1/seed0"
    assert json.loads((finished / "tracking.json").read_text())["backends"] == []  # a dry run writes nothing

    trained = (finished / "train.json").stat().st_mtime_ns
    proc = snakemake(folder, cfg, "--cores", "2", "results/tiny/runs.csv")  # tiny's runs are finished
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert json.loads((finished / "tracking.json").read_text())["backends"] == ["tensorboard"]
    assert (finished / "train.json").stat().st_mtime_ns == trained


def test_a_report_after_a_single_suite_run_leaves_out_the_older_all_suites_tables_and_says_so(two_suites):
    """Issue 25, item 4: `snakemake suite_third` updates only that suite; the combined tables ("All suites")
    still hold the two older suites, so the report built then leaves them out and its landing page says why,
    until `all` has brought them up to date."""
    folder, cfg = two_suites
    cfg["suites"]["third"] = {"overrides": {"model": {"width": 16}}}
    proc = snakemake(folder, cfg, "--cores", "2", "suite_third")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(pd.read_csv(folder / "results/comparison.csv").suite) == {"tiny", "other"}  # older: not rebuilt

    proc = snakemake(folder, None, "--report", str(folder / "report.html"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (folder / "report.html").read_text()
    assert "results/third/tables/comparison.html" in html
    assert "results/comparison.html" not in html and "results/plan.html" not in html
    landing = (folder / ".snakemake/hwsweep/landing.rst").read_text()
    for table in ("results/comparison.csv", "results/plan.tsv"):
        assert f"- {table}" in landing and "left out of this report" in landing, landing
        assert f"hwsweep warning: {table}" in proc.stderr, proc.stderr[-3000:]

    proc = snakemake(folder, None, "--cores", "2", "all")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = snakemake(folder, None, "--report", str(folder / "report.html"))
    assert proc.returncode == 0 and "hwsweep warning" not in proc.stderr, proc.stderr[-3000:]
    html = (folder / "report.html").read_text()
    assert "results/comparison.html" in html and "results/plan.html" in html
    assert "left out of this report" not in (folder / ".snakemake/hwsweep/landing.rst").read_text()


def test_a_report_after_a_suite_changed_leaves_out_its_older_tables_until_all_reruns_it(two_suites):
    """Issue 33, item 3: after the sweep, suite other changes (a wider model); its tables are made from runs of the
    older config. The report built before rerunning leaves them out, with the All-suites tables made from them,
    and its landing page and stderr say why, as `status` says those runs are stale; `all` brings them back."""
    folder, cfg = two_suites
    cfg["suites"]["other"]["overrides"]["model"]["width"] = 48
    proc = snakemake(folder, cfg, "--report", str(folder / "report.html"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (folder / "report.html").read_text()
    assert "results/tiny/tables/comparison.html" in html and "results/tiny/plots/curves.png" in html
    # (the landing page names results/other/comparison.csv and runs.csv: the reason they are left out)
    for item in ("results/other/tables/", "results/other/plots/", "results/other/speedup.csv",
                 "results/comparison.html", "results/plan.html"):  # fmt: skip
        assert item not in html, item
    landing = (folder / ".snakemake/hwsweep/landing.rst").read_text()
    why = ("results/other/comparison.csv is out of date: of the 2 runs suite other has now, 2 were trained under "
           "another config (\\`snakemake -f status\\` names them): left out of this report; \\`snakemake all\\`, then "
           "the report again, brings it up to date.")  # fmt: skip
    sections = dict(re.findall(r"^\*\*Suite (\w+)\*\*.*?\n\n(.*?)\n\n(?=\*\*Suite |\*\*All suites)", landing, re.M | re.S))
    assert sections["other"] == f"**Out of date** — {why}", landing  # none of its old verdicts
    assert sections["tiny"].startswith("- Overall against cpu1"), landing
    assert "- results/comparison.csv was made from results/other/" in landing, landing
    assert "hwsweep warning: results/other/comparison.csv is out of date" in proc.stderr, proc.stderr[-3000:]

    proc = snakemake(folder, None, "--cores", "1", "-f", "status")
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = pd.read_csv(folder / "results/partial/status.csv").groupby("suite").state.agg(set)
    assert states.to_dict() == {"tiny": {"done"}, "other": {"stale"}}  # the same judgement as the report's

    proc = snakemake(folder, None, "--cores", "2", "all")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = snakemake(folder, None, "--report", str(folder / "report.html"))
    assert proc.returncode == 0 and "hwsweep warning" not in proc.stderr, proc.stderr[-3000:]
    assert "results/other/tables/comparison.html" in (folder / "report.html").read_text()
    assert "Out of date" not in (folder / ".snakemake/hwsweep/landing.rst").read_text()


def test_a_report_after_the_statistics_changed_leaves_out_tables_made_with_the_older_ones(two_suites):
    """The runs stay current when only the statistics change, but every suite's tables (and the landing page's
    verdicts, read from them) hold intervals at the older confidence: left out until `all` reruns the aggregates,
    which it does without training."""
    folder, cfg = two_suites
    cfg["statistics"] = {"confidence": 0.9}
    proc = snakemake(folder, cfg, "--report", str(folder / "report.html"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    landing = (folder / ".snakemake/hwsweep/landing.rst").read_text()
    for suite in ("tiny", "other"):
        why = (f"**Out of date** — results/{suite}/comparison.csv was made with other settings than this config's "
               f"(baseline, statistics, metrics, prices, references or targets; results/{suite}/settings.sha256): "
               "left out of this report")  # fmt: skip
        assert why in landing, landing
        assert f"results/{suite}/tables/" not in (folder / "report.html").read_text()
    assert "Overall against" not in landing

    proc = snakemake(folder, None, "--cores", "2", "all")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rule aggregate_suite:" in proc.stderr and "rule train:" not in proc.stderr, proc.stderr[-3000:]
    proc = snakemake(folder, None, "--report", str(folder / "report.html"))
    assert proc.returncode == 0 and "hwsweep warning" not in proc.stderr, proc.stderr[-3000:]
    assert "Overall against" in (folder / ".snakemake/hwsweep/landing.rst").read_text()


def test_jobs_see_exactly_the_replaced_config_and_refuse_a_changed_spec(tmp_path, small_config):
    # A workflow config beside the run that must not leak into it (the repo's config/config.yaml case).
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text((REPO / "config/config.yaml").read_text())
    small_config["recipe"].pop("schedule")  # the schema default (600 steps), not config.yaml's 400
    run = "results/tiny/default/cpu1/seed0"
    proc = snakemake(tmp_path, small_config, "--cores", "1", "plan")
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = pd.read_csv(tmp_path / "results/plan.tsv", sep="\t")
    assert set(plan.suite) == {"tiny"} and (plan.steps == 600).all()
    # spec.json is written by the snakemake that schedules the run (no job writes it), from the same config.
    (tmp_path / run).mkdir(parents=True)
    (tmp_path / run / "spec.json").write_text(canonical_json(resolve(small_config).spec("tiny", "default", "cpu1", 0)))
    spec = json.loads((tmp_path / run / "spec.json").read_text())
    assert spec["plan"]["steps"] == 600 and spec["suite"] == "tiny"

    scheduled = hashlib.sha256((tmp_path / run / "spec.json").read_bytes()).hexdigest()
    spec["seed"] = 5  # edited behind the workflow's back
    (tmp_path / run / "spec.json").write_text(json.dumps(spec))
    proc = snakemake(tmp_path, small_config, "-n", "--cores", "1", f"{run}/train.json")
    assert proc.returncode == 0 and f"{run}/spec.json is not the config's spec" in proc.stderr, proc.stderr[-3000:]
    assert "would rewrite from the config" in proc.stderr  # a real run rewrites it before scheduling the job
    # A spec changed after scheduling is refused by the job itself.
    launch = [sys.executable, "-m", "hwsweep.run.launch", f"{run}/spec.json", "--spec-sha256", scheduled]
    proc = subprocess.run(launch, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "is not the spec this run was scheduled with" in proc.stderr
    assert not (tmp_path / run / "train.json").exists()
