"""Report figures from a synthetic GPU + CPU sweep: each fits the report's content pane unscaled
(the report shrinks a wider image and cuts off the top of a taller one)."""

import struct

import numpy as np
import pandas as pd
import pytest

from hwsweep.analysis import stats
from hwsweep.contracts.metrics import Metric
from hwsweep.report import plots

HARDWARE = {"cpu1": (1, "cpu", 40.0), "cpu2": (2, "cpu", 22.0), "cpu4": (4, "cpu", 13.0),
            "gpu1": (1, "H100-80GB", 2.0), "gpu2": (2, "H100-80GB", 1.1)}  # fmt: skip
# The content pane beside the report's menu in a 1400 x 950 browser window (tests/test_report.py's).
MAX_PX = (880, 840)


def metric(name, **kw):
    base = {"name": name, "goal": "max", "margin": None, "primary": True, "stage": "eval", "pattern": None,
            "key": None, "reduce": "last", "bounds": None, "description": ""}  # fmt: skip
    return Metric.from_dict(base | kw)


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(3)
    rows, curves = [], []
    for hw, (ws, gpu, t) in HARDWARE.items():
        for seed in range(3):
            rows.append({"suite": "s", "variant": "default", "hardware": hw, "seed": seed, "world_size": ws,
                         "gpu_type": gpu, "samples_per_second": 1000 / t, "train_seconds": t * rng.uniform(0.97, 1.03),
                         "startup_seconds": 5.0, "eval_seconds": 1.0, "token_accuracy": 0.8 + rng.normal(0, 0.003),
                         "final_loss": 0.5 + rng.normal(0, 0.003), "exact_accuracy": 0.4 + rng.normal(0, 0.01)})  # fmt: skip
            curves += [{"suite": "s", "variant": "default", "hardware": hw, "seed": seed, "metric": "loss", "step": k,
                        "value": 3 / k + rng.normal(0, 0.01)} for k in range(1, 31)]  # fmt: skip
    runs = pd.DataFrame(rows)
    declared = [metric("token_accuracy", margin=0.005, bounds=[0, 1]), metric("exact_accuracy", margin=0.005,
                bounds=[0, 1]), metric("final_loss", goal="min", margin=0.01, stage="train")]  # fmt: skip
    settings = stats.Settings.of({"confidence": 0.95}, declared)
    summary = stats.seed_summary(runs, settings)
    equivalence = stats.equivalence(runs, "cpu1", settings)
    speedup = stats.speedup(runs, "cpu1", settings, {h: 0.05 if h.startswith("cpu") else 6.88 for h in HARDWARE})
    comparison = stats.comparison(summary, equivalence, speedup, "cpu1", settings)
    return runs, pd.DataFrame(curves), equivalence, speedup, comparison


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        header = f.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def test_every_figure_fits_the_report_pane(tables, tmp_path):
    runs, curves, equivalence, speedup, comparison = tables
    order = plots.hardware_order(comparison, "cpu1")
    assert order == ["cpu1", "cpu2", "cpu4", "gpu1", "gpu2"]  # baseline, its type by count, then the other type
    made = {
        "forest": lambda p: plots.equivalence_forest(equivalence, p, "cpu1", 0.95, order),
        "speedup": lambda p: plots.speedup_by_devices(speedup, comparison, "cpu1", p),
        "metric": lambda p: plots.metric_by_hardware(runs, comparison, "token_accuracy", "cpu1", p, 100.0),
        "time": lambda p: plots.time_breakdown(comparison, "cpu1", p),
        "curves": lambda p: plots.curves(curves, "cpu1", p, 0.95, order),
    }
    for name, draw in made.items():
        path = tmp_path / f"{name}.png"
        draw(path)
        width, height = png_size(path)
        assert 300 < width <= MAX_PX[0] and 150 < height <= MAX_PX[1], (name, width, height)


def test_scaling_is_within_one_device_type(tables):
    _, _, _, speedup, _ = tables
    # What the speedup figure's scaling panel draws: each type against its own smallest count.
    gpu = speedup.set_index("hardware").loc[["gpu1", "gpu2"]]
    assert gpu.loc["gpu2", "scaling_reference"] == "gpu1"
    assert gpu.loc["gpu2", "scaling_speedup"] == pytest.approx(2.0 / 1.1, rel=0.05)
    # gpu1 is its type's smallest count: nothing to scale against, so no efficiency of 1 against itself
    assert gpu.loc["gpu1", "scaling_reference"] == "" and np.isnan(gpu.loc["gpu1", "efficiency"])
