"""Report figures from a synthetic GPU + CPU sweep: each fits the report's content pane unscaled
(the report shrinks a wider image and cuts off the top of a taller one)."""

import struct

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from hwsweep.analysis import stats
from hwsweep.contracts import io
from hwsweep.contracts.metrics import Metric
from hwsweep.report import plots

HARDWARE = {"cpu1": (1, "cpu", 40.0), "cpu2": (2, "cpu", 22.0), "cpu4": (4, "cpu", 13.0),
            "gpu1": (1, "H100-80GB", 2.0), "gpu2": (2, "H100-80GB", 1.1)}  # fmt: skip
# The content pane beside the report's menu in a 1400 x 950 browser window (tests/report/test_report.py's).
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


# -- legibility: no tick labels run together, no text cut off by the figure's edge --------------------------


def _texts(fig):
    """Every drawn, non-empty text artist of a drawn figure with its window extent and its role (labels of
    ticks outside the view, or of an axis turned off, are not drawn and left out)."""
    renderer = fig.canvas.get_renderer()
    found, ticks = [], set()
    for ax in fig.axes:
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * max(abs(lo), abs(hi), 1)
            for minor in (False, True):
                locs, labels = axis.get_ticklocs(minor=minor), axis.get_ticklabels(minor=minor)
                ticks |= {id(t) for t in labels}
                for loc, label in zip(locs, labels):  # an axis turned off draws none
                    if ax.axison and lo - slack <= loc <= hi + slack and label.get_visible() and label.get_text():
                        found.append((f"{id(ax)}-{name}tick", label, label.get_window_extent(renderer)))
    for text in fig.findobj(matplotlib.text.Text):
        if id(text) not in ticks and text.get_visible() and text.get_text().strip():
            found.append(("text", text, text.get_window_extent(renderer)))
    return found


def legibility_problems(fig) -> list[str]:
    """Any two drawn texts that overlap (tick labels, titles, bar labels, legends...) and any text reaching
    past the figure's edge (1 px of slack)."""
    fig.canvas.draw()
    box = fig.bbox
    problems = []
    texts = _texts(fig)
    for role, text, ext in texts:
        if ext.x0 < box.x0 - 1 or ext.y0 < box.y0 - 1 or ext.x1 > box.x1 + 1 or ext.y1 > box.y1 + 1:
            problems.append(f"clipped by the figure edge: {text.get_text()!r}")
    for i, (_, a, ea) in enumerate(texts):
        for _, b, eb in texts[i + 1:]:
            if ea.overlaps(eb):
                problems.append(f"overlap: {a.get_text()!r} and {b.get_text()!r}")
    return problems


def test_the_checker_finds_overlap_and_clipping():
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.set_xticks(np.arange(6), [f"{1000 * k:,.4f} $" for k in range(6)])  # run together
    ax.set_title("a title much too long to fit in a figure two inches wide, cut at both edges")
    problems = legibility_problems(fig)
    plt.close(fig)
    assert any("overlap: '1,000.0000 $'" in p for p in problems) and any("clipped" in p for p in problems), problems


@pytest.fixture(scope="module")
def long_sweep(tables):
    """The sweep's tables with two variants, hour-long runs and costs of fractions of a cent."""
    runs, curves, equivalence, speedup, comparison = tables
    def two(frame):
        return pd.concat([frame, frame.assign(variant="width-128")], ignore_index=True)
    speedup, comparison = two(speedup), two(comparison)
    comparison = comparison.assign(train_seconds=comparison.train_seconds * 900,
                                   cost_per_run=comparison.cost_per_run / 400)  # fmt: skip
    return two(runs), two(curves), two(equivalence), speedup, comparison


def test_figures_are_legible(long_sweep, tmp_path, monkeypatch):
    runs, curves, equivalence, speedup, comparison = long_sweep
    drawn = {}
    save = plots._save

    def check(fig, path):
        drawn[path.stem] = legibility_problems(fig)
        save(fig, path)

    monkeypatch.setattr(plots, "_save", check)
    order = plots.hardware_order(comparison, "cpu1")
    plots.equivalence_forest(equivalence, tmp_path / "forest.png", "cpu1", 0.95, order)
    plots.speedup_by_devices(speedup, comparison, "cpu1", tmp_path / "speedup.png")
    plots.metric_by_hardware(runs, comparison, "token_accuracy", "cpu1", tmp_path / "metric.png", 100.0)
    plots.time_breakdown(comparison, "cpu1", tmp_path / "time.png")
    plots.curves(curves, "cpu1", tmp_path / "curves.png", 0.95, order)
    assert set(drawn) == {"forest", "speedup", "metric", "time", "curves"}
    assert not {k: v for k, v in drawn.items() if v}, drawn


def test_the_speedup_figure_shows_every_variant_and_colours_mean_hardware(long_sweep, tmp_path, monkeypatch):
    _, _, _, speedup, comparison = long_sweep
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig))
    plots.speedup_by_devices(speedup, comparison, "cpu1", tmp_path / "speedup.png")
    (fig,) = figures
    labels = " ".join(t.get_text() for ax in fig.axes for t in ax.get_yticklabels())
    assert "width-128" in labels and "default" in labels  # both variants' bars
    colours = plots.hardware_colours(plots.hardware_order(comparison, "cpu1"), "cpu1")
    bars = [p for ax in fig.axes for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle) and p.get_width()]
    used = {matplotlib.colors.to_hex(p.get_facecolor()[:3]) for p in bars}
    assert used <= {matplotlib.colors.to_hex(c) for c in colours.values()}, used
    points = [c for ax in fig.axes for c in ax.collections if len(c.get_offsets())]
    faces = {matplotlib.colors.to_hex(f[:3]) for c in points for f in c.get_facecolors()}
    assert faces and faces <= {matplotlib.colors.to_hex(c) for c in colours.values()}, faces
    plt.close(fig)


def test_a_figure_that_fails_costs_no_other_its_figure(tables, tmp_path, capsys, monkeypatch):
    """plot_suite draws every figure of a suite in one job: a metric whose figure raises (here a column the runs
    lack) gets a notice naming the error and the log, its traceback is logged under its path, the rest are drawn."""
    runs, _, _, _, comparison = tables
    paths = {name: tmp_path / f"metric_{name}.png" for name in ("token_accuracy", "missing_metric", "final_loss")}
    shown, notice = [], plots.notice
    monkeypatch.setattr(plots, "notice", lambda path, text: shown.append((path, text)) or notice(path, text))
    failed = plots.each_figure({p: (lambda n=n, p=p: plots.metric_by_hardware(runs, comparison, n, "cpu1", p))
                                for n, p in paths.items()}, "logs/s/plot.log")  # fmt: skip
    assert failed == [str(paths["missing_metric"])]
    assert all(png_size(p)[0] > 300 for p in paths.values())  # every figure exists, the failed one as a notice
    assert [str(p) for p, _ in shown] == failed
    assert "could not be drawn (KeyError: 'missing_metric')" in shown[0][1] and "logs/s/plot.log" in shown[0][1]
    log = capsys.readouterr().err
    assert f"figure {paths['missing_metric']} could not be drawn:" in log and "Traceback" in log
    assert "token_accuracy" not in log and "final_loss" not in log


def test_a_storage_fault_is_not_a_figures_notice(tmp_path):
    """A full or read-only disk ends the job with its one line (io.one_line_refusals), not a notice per figure."""
    def full():
        raise io.StorageError(28, "no space left", str(tmp_path))

    with pytest.raises(io.StorageError):
        plots.each_figure({tmp_path / "a.png": full, tmp_path / "b.png": lambda: None}, "plot.log")
    assert not list(tmp_path.iterdir())
