"""`hwsweep plan --estimate`: FLOPs counted on the meta device, the estimate's arithmetic, and the
estimate from a measured run against the next real run."""

import copy
import dataclasses
import io as stdio
import json
import os
import shutil
import subprocess
from contextlib import redirect_stdout
from importlib import metadata

import pandas as pd
import pytest
from conftest import BIN, launcher, one_thread, snakemake, write_config

from hwsweep import cli
from hwsweep.contracts import catalog, io
from hwsweep.contracts.spec import canonical_json
from hwsweep.models import flops, transformer
from hwsweep.plan import estimate, predictions
from hwsweep.plan.config import resolve
from hwsweep.plan.table import format_table


def test_flops_on_meta_equal_flops_of_a_real_cpu_step(small_config):
    small_config["recipe"]["model"] = {"width": 48, "depth": 2, "heads": 4}
    recipe = resolve(small_config).cells[0].recipe
    model = transformer.build(recipe)
    (x, y), _ = transformer.tables(recipe)
    real = flops.train_step_flops(model, (x[:6], y[:6]))
    assert real > 0 and all(p.grad is None for p in model.parameters())  # the count leaves no gradients behind
    meta_model, batch = estimate.model_and_batch(recipe.task, recipe.model, 6)
    assert batch[0].device.type == "meta" and next(meta_model.parameters()).device.type == "meta"
    assert flops.train_step_flops(meta_model, batch) == real


@pytest.mark.slow
def test_a_count_is_kept_for_the_next_process_under_a_key_of_everything_it_depends_on(tmp_path, small_config,
                                                                                     monkeypatch, read_only):
    """hwsweep.plan.counted: a second process gets the first one's count without importing torch; another model,
    torch version or model source is another key; a damaged or unwritable cache costs a count, not a number."""
    env = os.environ | {"HWSWEEP_MEMORY_CACHE": str(tmp_path / "cache" / "memory.json")}
    write_config(tmp_path, small_config)
    code = ("import sys, yaml; from hwsweep.plan import estimate; from hwsweep.plan.config import resolve; "
            "r = resolve(yaml.safe_load(open(sys.argv[1]))).cells[0].recipe; "
            "print(estimate._micro_batch_flops(r.task, r.model, 4), estimate._predict_flops(r.task, r.model), "
            "'torch' in sys.modules)")  # fmt: skip

    def count() -> list[str]:
        out = subprocess.run([str(BIN / "python"), "-c", code, str(tmp_path / "config.yaml")], env=env,
                             capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
        return out.stdout.split()

    recipe = resolve(small_config).cells[0].recipe
    real = [str(estimate._count_micro_batch(recipe.task, recipe.model, 4)),
            str(estimate._count_predict(recipe.task, recipe.model))]
    assert count() == [*real, "True"]  # counted (torch imported) and stored
    assert count() == [*real, "False"]  # the next process: from the cache
    cache = tmp_path / "cache" / "flops.json"
    stored = json.loads(cache.read_text())
    assert {json.loads(k)["kind"] for k in stored} == {"train_step", "predict"}
    cache.write_text("{garbage")
    assert count() == [*real, "True"] and json.loads(cache.read_text()) == stored  # counted again, the cache mended
    entries = json.loads(cache.read_text())
    cache.write_text(json.dumps({k: 1 if "train_step" in k else v for k, v in entries.items()}))
    assert count()[0] == "1"  # the stored number is the one read (the test above is not vacuous)
    cache.unlink()
    read_only(cache.parent)  # a cache folder no process may write: counted, nothing stored, no error
    assert count() == [*real, "True"] and not cache.exists()
    read_only.undo()
    key = estimate.counted.key("train_step", recipe.task, recipe.model, 4)
    assert len({key, estimate.counted.key("train_step", recipe.task, dataclasses.replace(recipe.model, depth=2), 4),
                estimate.counted.key("train_step", recipe.task, recipe.model, 8),
                estimate.counted.key("predict", recipe.task, recipe.model, 4)}) == 4  # fmt: skip
    uncached, versions = estimate.counted._versions.__wrapped__, estimate.counted._versions()
    for field in ("torch", "models"):
        monkeypatch.setattr(estimate.counted, "_versions", lambda f=field: versions | {f: "other"})
        assert estimate.counted.key("train_step", recipe.task, recipe.model, 4) != key, field
    # the models' source: any change to a file of hwsweep/models is another key
    models = tmp_path / "models"
    shutil.copytree(estimate.counted.MODELS, models, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(estimate.counted, "MODELS", models)
    monkeypatch.setattr(estimate.counted, "_versions", uncached)
    before = estimate.counted._versions()["models"]
    with open(models / "flops.py", "a") as f:
        f.write("# an edit\n")
    assert estimate.counted._versions()["models"] != before

    def unknown(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(estimate.counted.metadata, "version", unknown)  # a torch without package metadata
    calls = []
    for _ in range(2):  # no key without torch's version: counted each time, nothing stored
        assert estimate.counted.flops("train_step", recipe.task, recipe.model, 4, lambda: calls.append(1) or 7) == 7
    assert calls == [1, 1]


GPUS = {
    "h100x2": {"accelerator": "cuda", "devices_per_node": 2, "gpu_type": "H100-80GB", "mfu": 0.5},
    "a100": {"accelerator": "cuda", "gpu_type": "A100-80GB", "price_per_hour": 2.0},
    "odd": {"accelerator": "cuda", "gpu_type": "MI999", "memory_gb": 64},
}


def gpu_matrix(cfg, hardware=tuple(GPUS), **estimate_settings):
    cfg = copy.deepcopy(cfg)
    cfg["recipe"] |= {"global_batch": 64, "micro_batch": 8, "precision": "bf16-mixed"}
    cfg["recipe"]["schedule"] = {"steps": 1000, "warmup_steps": 10}
    cfg["hardware"] = {name: GPUS[name] for name in hardware}
    cfg["baseline"] = "h100x2"
    cfg["advisor"] = {"allow_precision_mismatch": True}  # MI999 is not in the catalog
    cfg["estimate"] = estimate_settings
    return resolve(cfg)


def test_estimate_arithmetic_on_a_fixed_config(small_config):
    matrix = gpu_matrix(small_config, mfu={"A100-80GB": 0.25}, startup_seconds=30, job_start_seconds=12)
    rows = estimate.estimate_rows(estimate.run_specs(matrix), matrix.estimate)
    runs = {(r["hardware"], r["seed"]): r for r in rows if r["level"] == "run"}
    recipe = matrix.cells[0].recipe
    micro = estimate._micro_batch_flops(recipe.task, recipe.model, 8)
    # One step is the same work whatever the layout: 8 micro-batches of 8 on every hardware.
    assert {r["flops_per_step"] for r in runs.values() if r["source"] != "unknown"} == {micro * 8}

    h100, a100, odd = runs["h100x2", 0], runs["a100", 0], runs["odd", 0]
    assert (h100["source"], h100["mfu"], h100["peak_tflops"]) == ("assumed_mfu", 0.5, 989.5)  # the hardware's own mfu
    assert (a100["mfu"], a100["peak_tflops"]) == (0.25, 312)  # estimate.mfu for the device type
    assert h100["seconds_per_step"] == pytest.approx(micro * 8 / (2 * 989.5e12 * 0.5))
    assert a100["startup_seconds"] == 12 + 30
    # eval_size 500, one view, in fp32 (the evaluator's arithmetic: A100 TF32 156 or fp32 19.5 TFLOP/s, as tf32 is set)
    fp32_peak = (156 if recipe.tf32 else 19.5) * 1e12
    evaluation = estimate._predict_flops(recipe.task, recipe.model) * 500 / (fp32_peak * 0.25)
    assert evaluation > 0 and a100["eval_seconds"] == pytest.approx(evaluation)
    wall = 12 + 30 + 1000 * micro * 8 / (312e12 * 0.25) + evaluation  # the job's own start, the trainer's, the steps, evaluation
    assert a100["wall_hours"] == pytest.approx(wall / 3600)
    assert a100["device_hours"] == pytest.approx(wall / 3600) and a100["cost"] == pytest.approx(2.0 * wall / 3600)
    h100_eval = h100["eval_seconds"] / 3600  # evaluation runs on one of the two devices
    assert h100["device_hours"] == pytest.approx(2 * (h100["wall_hours"] - h100_eval) + h100_eval)
    assert h100["cost"] == pytest.approx(h100["device_hours"] * catalog.price_per_hour("H100-80GB"))
    assert odd["source"] == "unknown" and odd["wall_hours"] is None  # no peak known for MI999

    cells = [r for r in rows if r["level"] == "cell"]
    total = rows[-1]
    assert total["level"] == "total" and len(cells) == 1 and total["wall_hours"] is None  # never a partial sum
    known = [r for r in runs.values() if r["source"] != "unknown"]
    matrix_known = gpu_matrix(small_config, ("h100x2", "a100"), mfu={"A100-80GB": 0.25}, startup_seconds=30,
                              job_start_seconds=12)
    total_known = estimate.estimate_rows(estimate.run_specs(matrix_known), matrix_known.estimate)[-1]
    assert total_known["device_hours"] == pytest.approx(sum(r["device_hours"] for r in known))
    assert total_known["cost"] == pytest.approx(sum(r["cost"] for r in known))
    assert total_known["source"] == "assumed_mfu"


def test_a_job_writes_the_estimate_from_the_specs_the_main_process_resolved(tmp_path, small_config):
    matrix = gpu_matrix(small_config, startup_seconds=5)
    specs = estimate.run_specs(matrix)
    estimate.write_estimate([s.to_dict() for s in specs], matrix.estimate, tmp_path / "estimate.tsv", tmp_path)
    rows = estimate.estimate_rows(specs, matrix.estimate, tmp_path)
    expected = format_table(rows, sep="\t", columns=estimate.RUN_COLUMNS)
    assert (tmp_path / "estimate.tsv").read_text() == expected and len(rows) == len(specs) + 3


def test_plan_estimate_command_prints_runs_cells_suites_and_total(tmp_path, small_config, monkeypatch):
    path = write_config(tmp_path, small_config)
    monkeypatch.chdir(tmp_path)
    out = stdio.StringIO()
    with redirect_stdout(out):
        assert cli.main(["plan", "--estimate", "--format", "tsv", "--configfile", str(path)]) == 0
    lines = [line.split("\t") for line in out.getvalue().splitlines()]
    assert lines[0] == estimate.RUN_COLUMNS
    levels = [line[0] for line in lines[1:]]
    assert levels == ["run"] * 4 + ["cell", "suite", "total"]
    assert all(float(line[estimate.RUN_COLUMNS.index("wall_hours")]) > 0 for line in lines[1:])


def _train(root, matrix, run) -> dict:
    """One run as the workflow lays it out (spec.json, then train.json in its run directory)."""
    spec = matrix.spec(run.suite, run.variant, run.hardware, run.seed)
    path = root / run.run_dir / "spec.json"
    io.write_text(path, canonical_json(spec))
    cmd = [*launcher(1), "-m", "hwsweep.run.train", str(path)]
    env = one_thread()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((root / run.run_dir / "train.json").read_text())


# A run's wall clock estimated from another seed's measurement of the same run, on a shared 2-core machine.
MEASURED_TOLERANCE = 0.5


@pytest.mark.slow
@pytest.mark.alone  # one run's measured seconds predict the next: neither may share the machine
def test_a_measured_run_is_printed_by_plan_and_predicts_the_next_real_run(tmp_path, small_config, monkeypatch):
    """One measured run serves both: `hwsweep plan` prints its cell's MFU and seconds per step, and the estimate
    it gives the other seed predicts that seed's real run, in the workflow's table too."""
    small_config["recipe"]["model"] = {"width": 64, "depth": 2, "heads": 4}
    small_config["recipe"]["schedule"] = {"steps": 120, "warmup_steps": 5}
    small_config["hardware"] = {"cpu1": small_config["hardware"]["cpu1"]}
    path = write_config(tmp_path, small_config)
    monkeypatch.chdir(tmp_path)

    def plan() -> str:
        out = stdio.StringIO()
        with redirect_stdout(out):
            assert cli.main(["plan", "--configfile", str(path)]) == 0
        return out.getvalue()

    assert "measured" not in plan()  # nothing ran yet
    matrix = resolve(small_config)
    first, second = matrix.runs()
    record = _train(tmp_path, matrix, first)
    (line,) = [x for x in plan().splitlines() if x.startswith("tiny/default/cpu1:")]
    per_step = record["train_seconds"] / len(record["step_seconds"])
    assert f"{per_step:.4g} s/step" in line and "(1 run(s))" in line
    mfu = float(line.split("MFU ")[1].split()[0])
    assert mfu == pytest.approx(record["mfu"], rel=0.3)  # the record's is over its steady 90% of steps

    specs = estimate.run_specs(matrix)
    before = {r["seed"]: r for r in estimate.estimate_rows(specs, matrix.estimate, tmp_path) if r["level"] == "run"}
    assert before[0]["source"] == before[1]["source"] == "measured"
    assert 0 < before[1]["mfu"] < 1  # a plausible MFU from the measured seconds and the catalog peak

    _train(tmp_path, matrix, second)
    vs_actual = estimate.estimate_vs_actual(estimate.run_records(specs, tmp_path), matrix.estimate)
    (vs,) = [r for r in vs_actual if r["seed"] == second.seed]
    assert vs["source"] == "measured"  # from the other seed only
    assert vs["estimated_seconds"] == pytest.approx(before[1]["wall_hours"] * 3600)
    assert abs(vs["ratio"] - 1) < MEASURED_TOLERANCE, vs

    # hwsweep recommend's prediction for cpu1, made before the runs (its interval holds one seed's time, not the other's)
    per_step, startup = estimate.step_timing(record)
    actual = {first.seed: startup + matrix.spec(first.suite, first.variant, first.hardware, first.seed).plan.steps * per_step}
    guess = {"predicted_at": "2000-01-01T00:00:00", "suite": "tiny", "variant": "default", "hardware": "cpu1",
             "gpu_type": "cpu", "world_size": 1, "basis": "catalog only", "run_seconds": actual[first.seed],
             "run_low": actual[first.seed] * 0.999, "run_high": actual[first.seed] * 1.001}  # fmt: skip
    predictions.append([guess], tmp_path / predictions.PREDICTIONS)

    # The workflow's table of it: the same rows from the records alone.
    proc = snakemake(tmp_path, small_config, "--cores", "1", "results/tiny/estimate_vs_actual.csv")
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(tmp_path / "results/tiny/estimate_vs_actual.csv")
    assert list(table.columns) == estimate.VS_ACTUAL_COLUMNS and len(table) == 2
    assert table.set_index("seed").loc[second.seed, "ratio"] == pytest.approx(vs["ratio"])
    predicted = pd.read_csv(tmp_path / "results/tiny/predicted_vs_actual.csv").set_index("seed")
    assert predicted.covered.loc[first.seed] and predicted.ratio.loc[first.seed] == pytest.approx(1.0)
    assert len(predicted) == 2 and predicted.basis.eq("catalog only").all()
    page = (tmp_path / "results/tiny/tables/estimate_vs_actual.html").read_text()
    assert "finished runs predicted: " in page and "of 2 inside their predicted interval" in page


def test_measurements_give_each_runs_estimate_as_a_scan_of_every_other_run_would():
    """estimate.Measurements (sums per cell, ordered MFUs per device kind) against the estimate's definition read
    directly: the mean of the cell's other runs, else the median over the device kind's other runs with an MFU, for
    every run left out in turn and for none, on cells of 1 to 5 runs, ties and runs without an MFU included."""
    import random
    import statistics

    from hwsweep.plan.matrix import Run

    rng = random.Random(7)
    for trial in range(30):
        measured = {}
        for i in range(rng.randint(1, 14)):
            run = Run("s", f"v{rng.randint(0, 3)}", rng.choice(["h1", "h2"]), i)
            kind = ("h100" if run.hardware == "h1" else rng.choice(["h100", "cpu"]), "fp32")
            mfu = None if rng.random() < 0.2 else rng.choice([0.1, 0.2, round(rng.random(), 3)])
            measured[run] = estimate.Measured(rng.choice([1.0, rng.random()]), rng.random() * 5, mfu, kind)
        index = estimate.Measurements(measured)
        cells = {(r.suite, r.variant, r.hardware) for r in measured} | {("s", "v9", "h1")}
        for exclude in [None, *measured]:
            others = {r: m for r, m in measured.items() if r != exclude}
            for cell in cells:
                same = [m for r, m in others.items() if (r.suite, r.variant, r.hardware) == cell]
                got = index.cell_means(cell, exclude)
                if not same:
                    assert got is None
                    continue
                want = (statistics.fmean(m.seconds_per_step for m in same), statistics.fmean(m.startup_seconds for m in same))
                assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (trial, cell, exclude)
            for kind in {m.kind for m in measured.values()} | {("a100", "fp32")}:
                typed = [m for m in others.values() if m.kind == kind and m.mfu is not None]
                got = index.kind_medians(kind, exclude)
                want = (statistics.median(m.mfu for m in typed), statistics.median(m.startup_seconds for m in typed)) if typed else None
                assert got == (pytest.approx(want) if want else None), (trial, kind, exclude)
