"""hwsweep.plan.throughput: a recipe's step time on hardware from its finished runs (synthetic train.json files):
measured here, scaled across device counts (Amdahl) and device types (peak FLOP/s), else the catalog; and the
record of predictions checked against the runs that followed (hwsweep.plan.predictions)."""

import os

import pytest
from fake_runs import write_run

from hwsweep.contracts import catalog
from hwsweep.plan import predictions, throughput
from hwsweep.plan.config import resolve

CPU = {f"cpu{n}": {"accelerator": "cpu", "devices_per_node": n, "cpus_per_task": n} for n in (1, 2, 4, 8)}
GPU = {"l40s": {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "L40S-48GB", "cpus_per_task": 1},
       "h100": {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "H100-80GB", "cpus_per_task": 1}}  # fmt: skip


def matrix_of(config, hardware):
    recipe = config["recipe"] | {"micro_batch": 4}  # 32 / (8 devices x 4): every count holds the batch
    return resolve(config | {"recipe": recipe, "hardware": hardware, "baseline": next(iter(hardware)), "seeds": [0, 1, 2]})


def predict(matrix, root, name):
    spec = matrix.spec("tiny", "default", name, 0)
    return throughput.predict_step(spec, throughput.observed(spec, root), matrix.estimate,
                                   throughput.report_serials("tiny", "default", root))  # fmt: skip


def test_runs_on_the_same_hardware_are_measured_here(tmp_path, small_config):
    m = matrix_of(small_config, CPU)
    for seed, t in enumerate((0.10, 0.12, 0.11)):
        write_run(tmp_path, m.spec("tiny", "default", "cpu2", seed), t)
    got = predict(m, tmp_path, "cpu2")
    assert got.basis == "measured here" and got.seconds == pytest.approx(0.11)
    assert got.low == pytest.approx(0.10 * 0.9) and got.high == pytest.approx(0.12 * 1.1) and got.startup_seconds == 2.0


def test_device_counts_scale_by_a_two_point_amdahl_fit_and_predict_a_third_count(tmp_path, small_config):
    """Runs at 1 and 2 devices with serial fraction 0.2 predict 4 and 8 devices as Amdahl's law has them: the model
    checked against runs at other world sizes (the law's own times at 4 and 8 fall inside the intervals)."""
    m = matrix_of(small_config, CPU)
    law = {n: 1.0 * (0.2 + 0.8 / n) for n in (1, 2, 4, 8)}
    for seed, noise in enumerate((0.98, 1.0, 1.02)):
        for n in (1, 2):
            write_run(tmp_path, m.spec("tiny", "default", f"cpu{n}", 0), law[n] * noise, seed=seed)
    for n in (4, 8):
        got = predict(m, tmp_path, f"cpu{n}")
        assert got.basis == "scaled from cpu1, cpu2" and "runs at 1 and 2 devices" in got.detail
        assert got.seconds == pytest.approx(law[n], rel=0.03)
        assert got.low < law[n] < got.high and got.high / got.low < 2


def test_the_report_s_amdahl_fit_is_preferred(tmp_path, small_config):
    m = matrix_of(small_config, CPU)
    write_run(tmp_path, m.spec("tiny", "default", "cpu1", 0), 1.0)
    (tmp_path / "results/tiny").mkdir(parents=True, exist_ok=True)
    (tmp_path / "results/tiny/speedup.csv").write_text(
        "suite,variant,hardware,gpu_type,world_size,amdahl_serial_fraction,amdahl_serial_fraction_ci_low,"
        "amdahl_serial_fraction_ci_high\ntiny,default,cpu1,cpu,1,0.5,0.4,0.6\ntiny,default,cpu2,cpu,2,0.5,0.4,0.6\n")
    got = predict(m, tmp_path, "cpu4")
    assert "the report's fit" in got.detail and got.seconds == pytest.approx(0.5 + 0.5 / 4)
    assert got.low == pytest.approx((0.4 + 0.6 / 4) * 0.9) and got.high == pytest.approx((0.6 + 0.4 / 4) * 1.1)


def test_another_device_type_scales_by_peak_with_a_wider_interval(tmp_path, small_config):
    m = matrix_of(small_config, GPU)
    write_run(tmp_path, m.spec("tiny", "default", "l40s", 0), 0.02)
    got = predict(m, tmp_path, "h100")
    ratio = catalog.peak_flops("L40S-48GB", "fp32", False) / catalog.peak_flops("H100-80GB", "fp32", False)
    assert got.basis == "scaled from l40s" and "another device type" in got.detail
    assert got.seconds == pytest.approx(0.02 * ratio)
    assert got.low == pytest.approx(0.02 * ratio / throughput.TYPE_SPREAD * 0.9)
    assert got.high == pytest.approx(0.02 * ratio * throughput.TYPE_SPREAD * 1.1)


def test_without_runs_of_this_recipe_the_catalog_answers_with_the_mfu_range(tmp_path, small_config):
    m = matrix_of(small_config, CPU)
    wider = small_config["recipe"] | {"model": {"width": 64, "depth": 1, "heads": 2}}
    other = matrix_of(small_config | {"recipe": wider}, CPU)
    write_run(tmp_path, other.spec("tiny", "default", "cpu1", 0), 5.0)  # another model: another step's work
    got = predict(m, tmp_path, "cpu1")
    assert got.basis == "catalog only" and "assumed MFU" in got.detail
    assert got.seconds != pytest.approx(5.0) and got.high / got.low == pytest.approx(3.0)


def test_predictions_are_checked_against_the_runs_that_followed(tmp_path, small_config):
    """A run inside its interval is covered, one outside is not; its cost is the report's (world x train x price)."""
    m = matrix_of(small_config, CPU)
    row = {"predicted_at": "2020-01-01T00:00:00", "suite": "tiny", "variant": "default", "hardware": "cpu2",
           "gpu_type": "cpu", "world_size": 2, "basis": "catalog only", "run_seconds": 8.0, "run_low": 5.0,
           "run_high": 11.0, "cost": 0.001}  # fmt: skip
    path = tmp_path / "results/predictions.csv"
    predictions.append([row], path)
    predictions.append([row | {"hardware": "cpu1", "gpu_type": "cpu", "world_size": 1}], path)
    assert [r["hardware"] for r in predictions.read(path)] == ["cpu2", "cpu1"]
    steps = m.spec("tiny", "default", "cpu2", 0).plan.steps
    inside = write_run(tmp_path, m.spec("tiny", "default", "cpu2", 0), 6.0 / steps, startup=2.0)
    outside = write_run(tmp_path, m.spec("tiny", "default", "cpu1", 0), 20.0 / steps, startup=2.0)
    unpredicted = write_run(tmp_path, m.spec("tiny", "default", "cpu4", 0), 0.1)
    rows = predictions.write_versus([inside, outside, unpredicted], path, tmp_path / "vs.csv")
    assert [(r["hardware"], r["covered"]) for r in rows] == [("cpu2", True), ("cpu1", False)]
    assert rows[0]["actual_seconds"] == pytest.approx(8.0) and rows[0]["ratio"] == pytest.approx(1.0)
    assert rows[0]["actual_cost"] == pytest.approx(2 * 6.0 / 3600 * catalog.price_per_hour("cpu"))
    assert predictions.coverage(rows) == "finished runs predicted: 1 of 2 inside their predicted interval (50%)"
    assert "cpu2" in (tmp_path / "vs.csv").read_text()


def test_a_prediction_made_after_the_run_does_not_count(tmp_path, small_config):
    m = matrix_of(small_config, CPU)
    run = write_run(tmp_path, m.spec("tiny", "default", "cpu1", 0), 0.1)
    os.utime(run, (1_000_000_000, 1_000_000_000))  # written in 2001
    later = {"predicted_at": "2020-01-01T00:00:00", "suite": "tiny", "variant": "default", "hardware": "cpu1",
             "gpu_type": "cpu", "world_size": "1", "run_seconds": "1", "run_low": "0", "run_high": "2"}  # fmt: skip
    assert predictions.versus([run], [later]) == []
    assert predictions.coverage([]) == "no finished run was predicted by hwsweep recommend"
