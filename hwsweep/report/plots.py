"""Report figures (matplotlib, no display). Each function writes one PNG atomically.

Sized for the report, which shows a PNG at its pixel size: text at 10 pt and 110 dpi reads at
about 15 px. The hardware keep one order and one colour in every figure (the baseline first,
in black); verdicts are marked by shape as well as colour."""

from __future__ import annotations

import math
import sys
import textwrap
import traceback

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hwsweep.analysis.stats import curve_band, curve_difference  # noqa: E402
from hwsweep.analysis.words import duration, money, plain  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.contracts.records import (
    PARTS,  # noqa: E402
    STARTUP_COLUMNS,  # noqa: E402
)
from hwsweep.report.tables import hardware_order, in_order  # noqa: E402

DPI = 110
MAX_WIDTH = 8.0  # inches: 880 px, what the report's content pane shows unscaled beside its menu
MAX_HEIGHT = 7.6  # inches: the pane centres a taller image vertically and cuts off its top
plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9,
                     "ytick.labelsize": 9, "legend.fontsize": 9, "figure.titlesize": 12})  # fmt: skip
# Shape and colour per verdict; the legend names both.
VERDICT_STYLE = {
    "equivalent": ("o", "tab:green"),
    "shifted": ("D", "tab:olive"),
    "different": ("X", "tab:red"),
    "inconclusive": ("^", "tab:orange"),
}
LINE_STYLES = ["-", "--", "-.", ":"]


def _save(fig, path) -> None:
    with io.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    plt.close(fig)


def notice(path, text: str) -> None:
    """A figure of one line saying why there is nothing to draw."""
    fig, ax = plt.subplots(figsize=(5, 1.6), layout="constrained")
    ax.text(0.5, 0.5, _wrap(text, 4.6), ha="center", va="center")
    ax.axis("off")
    _save(fig, path)


def each_figure(figures: dict, log: str) -> list[str]:
    """Draw each figure (path -> a function of no arguments that writes it) on its own: one that raises gets a
    notice naming the error and `log` in its place, its traceback goes to stderr (the job's log) under the
    figure's path, and the others are still drawn. A storage fault is not the figure's: it ends the job. The
    paths that failed, in order."""
    failed = []
    for path, draw in figures.items():
        try:
            draw()
        except io.StorageError:
            raise
        except Exception as error:
            failed.append(str(path))
            print(f"figure {path} could not be drawn:", file=sys.stderr)
            traceback.print_exc()
            plt.close("all")  # a figure left half drawn
            said = (str(error).splitlines() or [""])[0][:200]
            notice(path, f"this figure could not be drawn ({type(error).__name__}: {said}); see {log}")
    return failed


def hardware_colours(order: list[str], baseline: str) -> dict[str, str]:
    others = [h for h in order if h != baseline]
    return {baseline: "black"} | {h: f"C{i % 10}" for i, h in enumerate(others)}


def _points(scale: float) -> str:
    return " (points)" if scale == 100 else ""


def _name(metric: str) -> str:
    return metric.replace("_", " ")


def metric_by_hardware(runs: pd.DataFrame, summary: pd.DataFrame, metric: str, baseline: str, path,
                       scale: float = 1.0) -> None:  # fmt: skip
    """One panel per variant: every seed as a point, the mean as a bar, the t CI as a whisker;
    the baseline first, its mean as a dashed line across the panel."""
    variants = list(dict.fromkeys(runs.variant))
    hws = hardware_order(runs, baseline)
    colours = hardware_colours(hws, baseline)
    width = min(MAX_WIDTH, max(4.2, 1.1 * len(hws) + 1.6) * len(variants))
    fig, axes = plt.subplots(1, len(variants), figsize=(width, 3.8), squeeze=False, sharey=True, layout="constrained")
    for ax, variant in zip(axes[0], variants):
        sub = runs[runs.variant == variant]
        for i, hw in enumerate(hws):
            vals = sub[sub.hardware == hw][metric] * scale
            ax.scatter(np.full(len(vals), i - 0.1), vals, color=colours[hw], alpha=0.75, zorder=3, s=28)
            row = summary[(summary.variant == variant) & (summary.hardware == hw)]
            if not len(row):
                continue
            r = row.iloc[0]
            mean = r[f"{metric}_mean"] * scale
            ax.hlines(mean, i - 0.28, i + 0.28, color=colours[hw], lw=2.2, zorder=4)
            if pd.notna(r[f"{metric}_ci_low"]):
                ax.vlines(i + 0.14, r[f"{metric}_ci_low"] * scale, r[f"{metric}_ci_high"] * scale, color=colours[hw],
                          lw=1.3)  # fmt: skip
            if hw == baseline:
                ax.axhline(mean, color="black", lw=0.8, ls="--", zorder=1)
        ax.set_xticks(range(len(hws)), [f"{h}\n(baseline)" if h == baseline else h for h in hws])
        ax.set_xlim(-0.6, len(hws) - 0.4)
        if len(variants) > 1:
            ax.set_title(f"variant {variant}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(_name(metric) + _points(scale))
    fig.suptitle(f"{_name(metric)} per hardware\npoints: seeds · bar: mean · whisker: CI", fontsize=11)
    _save(fig, path)


def equivalence_forest(equivalence: pd.DataFrame, path, baseline: str | None = None, confidence: float = 0.95,
                       order: list[str] | None = None) -> None:  # fmt: skip
    """Per compared metric: each hardware's difference to the baseline with its TOST interval
    (1 - 2 alpha, thick) and CI (thin) against the shaded +-margin; marker shape and colour by verdict."""
    if equivalence.empty:
        notice(path, "no hardware besides the baseline: nothing to compare")
        return
    baseline = baseline or str(equivalence.baseline.iloc[0])
    metrics = list(dict.fromkeys(equivalence.metric))
    order = order or hardware_order(equivalence, baseline)
    rows = equivalence[["variant", "hardware"]].drop_duplicates()
    rows = rows.assign(rank=rows.hardware.map({h: i for i, h in enumerate(order)})).sort_values(["variant", "rank"])
    labels = [f"{h}" if rows.variant.nunique() == 1 else f"{v} · {h}" for v, h in zip(rows.variant, rows.hardware)]
    cols = 1 if len(metrics) <= 2 else 2
    nrows = -(-len(metrics) // cols)
    height = min(MAX_HEIGHT, (1.2 + 0.36 * len(rows)) * nrows + 0.8)
    fig, axes = plt.subplots(nrows, cols, figsize=(7.4 if cols == 1 else MAX_WIDTH, height), squeeze=False,
                             layout="constrained")  # fmt: skip
    tost = 100 - 2 * (100 - confidence * 100)
    for k, ax in enumerate(axes.flat):
        if k >= len(metrics):
            ax.axis("off")
            continue
        metric = metrics[k]
        sub = equivalence[equivalence.metric == metric].set_index(["variant", "hardware"])
        scale = float(sub.scale.iloc[0]) if "scale" in sub else 1.0
        margin = float(sub.margin.iloc[0]) * scale
        ax.axvspan(-margin, margin, color="tab:green", alpha=0.12, lw=0)
        for x in (-margin, margin):
            ax.axvline(x, color="tab:green", lw=1, ls="--")
        ax.axvline(0, color="black", lw=0.8)
        for y, key in enumerate(zip(rows.variant, rows.hardware)):
            if key not in sub.index:
                continue
            r = sub.loc[key]
            state = "shifted" if r.verdict == "equivalent" and bool(r.shifted) else r.verdict
            marker, colour = VERDICT_STYLE.get(state, ("s", "grey"))
            if pd.notna(r.difference):
                ax.plot([r.ci_low * scale, r.ci_high * scale], [y, y], color=colour, lw=1.2)
                ax.plot([r.tost_ci_low * scale, r.tost_ci_high * scale], [y, y], color=colour, lw=4, alpha=0.6,
                        solid_capstyle="butt")  # fmt: skip
                ax.plot(r.difference * scale, y, marker=marker, color=colour, ms=8, mec="black", mew=0.6, ls="none")
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        unit = "points" if scale == 100 else "metric units"
        ax.set_title(f"{_name(metric)}: margin ±{plain(margin, 4)}{' points' if scale == 100 else ''}")
        ax.set_xlabel(f"difference to {baseline} ({unit})")
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))
        ax.grid(axis="x", alpha=0.3)
    handles = [plt.Line2D([], [], marker=m, color=c, mec="black", mew=0.6, ls="none", ms=8, label=v)
               for v, (m, c) in VERDICT_STYLE.items()]  # fmt: skip
    handles += [plt.Line2D([], [], color="grey", lw=4, alpha=0.6, label=f"{plain(tost, 4)}% TOST interval"),
                plt.Line2D([], [], color="grey", lw=1.2, label=f"{plain(confidence * 100, 4)}% CI"),
                plt.Rectangle((0, 0), 1, 1, color="tab:green", alpha=0.15, label="±margin")]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False)
    _save(fig, path)


def _wrap(text: str, inches: float) -> str:
    """A title wrapped to the width of its panel (about 0.075 inch per character at 10-11 pt)."""
    return textwrap.fill(text, max(12, int(inches / 0.075)))


def _time_unit(seconds) -> tuple[float, str]:
    """Seconds per tick unit and its name, so a time axis reads '2.5 h' rather than '9000'."""
    top = float(np.nanmax(np.asarray(seconds, float), initial=0))
    return (3600.0, "h") if top >= 3 * 3600 else (60.0, "min") if top >= 3 * 60 else (1.0, "s")


def _scaling_panel(ax, speedup: pd.DataFrame, variants: list[str], colours: dict) -> None:
    """Per variant and device type with a smaller count: the speedup over that count (line style: variant,
    marker: device type, face colour: the hardware, as in every figure), the type's smallest count at 1x,
    the ideal line and Amdahl's fit."""
    top, drawn = 1.0, False
    types = list(dict.fromkeys(speedup.gpu_type))
    for v, variant in enumerate(variants):
        for gpu, sub in speedup[speedup.variant == variant].groupby("gpu_type", sort=False):
            sub = sub.sort_values("world_size")
            ref = sub.world_size.min()
            above = sub[sub.world_size > ref].dropna(subset=["scaling_speedup"])
            if above.empty:  # one device count: nothing to scale against
                continue
            drawn = True
            marker, style = "osD^v"[types.index(gpu) % 5], LINE_STYLES[v % 4]
            x = np.r_[1.0, above.world_size / ref]
            y = np.r_[1.0, above.scaling_speedup]
            label = f"{gpu}{f' · {variant}' if len(variants) > 1 else ''} (against {above.scaling_reference.iloc[0]})"
            ax.plot(x, y, ls=style, marker=marker, color="0.35", mfc="white", lw=1.2, zorder=2, label=label)
            low = (above.scaling_speedup - above.scaling_ci_low).fillna(0).clip(lower=0)
            high = (above.scaling_ci_high - above.scaling_speedup).fillna(0).clip(lower=0)
            ax.errorbar(x[1:], y[1:], yerr=[low, high], fmt="none", ecolor="0.35", capsize=3, zorder=2)
            faces = [colours.get(above.scaling_reference.iloc[0], "white")] + [colours[h] for h in above.hardware]
            ax.scatter(x, y, c=faces, marker=marker, s=55, edgecolors="black", linewidths=0.6, zorder=3)
            top = max(top, float(x.max()))
            fit = above.dropna(subset=["amdahl_serial_fraction"])
            if len(fit):
                f, n_max = fit.amdahl_serial_fraction.iloc[0], fit.amdahl_extrapolated_devices.iloc[0] / ref
                n = np.geomspace(1, n_max, 50)
                ax.plot(n, 1 / (f + (1 - f) / n), ls=style, color="tab:purple", lw=1, alpha=0.8,
                        label=f"Amdahl f = {f:.2f} (to {int(n_max * ref)})")  # fmt: skip
                top = max(top, n_max)
    if not drawn:
        ax.text(0.5, 0.5, "every device type ran at one device count: nothing to scale against", ha="center",
                va="center", transform=ax.transAxes)  # fmt: skip
    ax.plot([1, top], [1, top], "k--", lw=1, label="perfect scaling")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(0.8, top * 1.4)
    low = speedup.scaling_speedup.min(skipna=True)
    ax.set_ylim(min(0.5, float(low) * 0.8 if np.isfinite(low) else 0.5), top * 1.4)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{plain(v)}×"))
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("devices, relative to the type's smallest count")
    ax.set_ylabel("speedup within the type")
    ax.set_title("scaling within one device type (marker colour: hardware, as in the bars)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3, which="both")


def speedup_by_devices(speedup: pd.DataFrame, comparison: pd.DataFrame, baseline: str, path) -> None:
    """Top: speedup against devices within each device type (log2 axes, against the type's smallest
    count), ideal line and Amdahl's fit, every variant. Bottom: training time and cost per run of every
    variant and hardware, across device types (never one 'device ratio' axis for a GPU and a CPU core).
    One colour per hardware in every panel."""
    order = hardware_order(comparison, baseline)
    colours = hardware_colours(order, baseline)
    variants = list(dict.fromkeys(comparison.variant))
    comp = in_order(comparison, order)
    several = len(variants) > 1
    bars = 0.3 * len(comp) + 1.1
    height = min(MAX_HEIGHT, 3.4 + bars)
    fig, panels = plt.subplot_mosaic([["scale", "scale"], ["time", "cost"]], figsize=(MAX_WIDTH, height),
                                     layout="constrained", height_ratios=[3.4, bars])  # fmt: skip
    _scaling_panel(panels["scale"], speedup, variants, colours)
    y = np.arange(len(comp))
    currency = str(comp["currency"].dropna().iloc[0]) if "currency" in comp and comp.currency.notna().any() else "USD"
    unit, unit_name = _time_unit(comp.train_seconds)
    for key, column in (("time", "train_seconds"), ("cost", "cost_per_run")):
        ax = panels[key]
        values = comp[column].astype(float) if column in comp else pd.Series(np.nan, index=comp.index)
        finite = values.dropna().tolist()
        shown = values / unit if key == "time" else values
        bar = ax.barh(y, shown.fillna(0), color=[colours[h] for h in comp.hardware], alpha=0.85)
        text = [("no price" if key == "cost" else "") if pd.isna(v) else
                (duration(v) if key == "time" else money(v, currency, *finite)) for v in values]  # fmt: skip
        ax.bar_label(bar, text, padding=3, fontsize=8)
        ax.set_ylim(len(comp) - 0.5, -0.6)
        ax.set_xlim(0, _finite(shown.max(skipna=True), 1) * 1.6)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
        ax.grid(axis="x", alpha=0.3)
    names = [f"{f'{v} · ' if several else ''}{h} ({int(w)}× {g})"
             for v, h, w, g in zip(comp.variant, comp.hardware, comp.world_size, comp.gpu_type)]  # fmt: skip
    panels["time"].set_yticks(y, names, fontsize=8)
    panels["cost"].set_yticks(y, [""] * len(comp))
    panels["time"].xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: plain(v)))
    ticks = panels["cost"].xaxis  # every tick with the digits that keep it apart from its neighbours
    ticks.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: money(v, currency, *ticks.get_majorticklocs())))
    panels["cost"].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(3))
    panels["time"].set_xlabel(f"training time per run ({unit_name})")
    panels["cost"].set_xlabel(f"cost per run ({currency})")
    panels["time"].set_title(_wrap(f"time against {baseline}, any device type", MAX_WIDTH / 2 - 1.5))
    panels["cost"].set_title(_wrap("money: device-hours × price", MAX_WIDTH / 2 - 1.5))
    _save(fig, path)


def _finite(value, default: float) -> float:
    """An axis limit from a column's extreme: the default where there is none (every value NaN, e.g. runs of
    one step measure no training time) or it is 0."""
    value = float(value)
    return value if math.isfinite(value) and value else default


# The startup parts (hwsweep.run.startup.PARTS) in shades of one colour, so they read as one startup.
STARTUP_SHADES = ("#4d4d4d", "#7a7a7a", "#a6a6a6", "#c7c7c7", "#e0e0e0")


def time_layers(summary: pd.DataFrame) -> list[tuple[str, np.ndarray, str]]:
    """(label, seconds per row of `summary`, colour) of each stacked layer of the time breakdown: the startup
    parts where every part is known, else the whole startup, then training and evaluation."""
    columns = [c for c in STARTUP_COLUMNS if c in summary]
    parts = summary[columns].apply(pd.to_numeric, errors="coerce")
    split = (parts.notna().all(axis=1) & bool(columns)).to_numpy()
    layers = [(f"startup: {part}", np.where(split, parts[c].to_numpy(float), 0.0), shade)
              for part, c, shade in zip(PARTS, columns, STARTUP_SHADES)]  # fmt: skip
    whole = np.where(split, 0.0, summary.startup_seconds.to_numpy(float))
    if whole.any() or not split.any():
        layers.append(("startup" if not split.any() else "startup (not broken down)", whole, "0.6"))
    return layers + [("train", summary.train_seconds.to_numpy(float), "C0"),
                     ("eval", summary.eval_seconds.to_numpy(float), "C2")]  # fmt: skip


def time_breakdown(summary: pd.DataFrame, baseline: str, path) -> None:
    """Mean seconds per run spent starting up (in its parts where the trainer measured them: imports,
    process group, data, model, first step), training and evaluating, per variant and hardware, with the
    seconds written on the bars. A cell whose startup is not broken down (a user's command) shows it whole."""
    order = hardware_order(summary, baseline)
    summary = summary.assign(rank=summary.hardware.map({h: i for i, h in enumerate(order)}))
    summary = summary.sort_values(["variant", "rank"])
    several = summary.variant.nunique() > 1
    labels = [f"{r.variant} · {r.hardware}" if several else r.hardware for r in summary.itertuples()]
    layers = time_layers(summary)
    width = min(MAX_WIDTH, max(5.0, 1.3 * len(labels) + 2.5))
    fig, ax = plt.subplots(figsize=(width, 4.0 + 0.5 * several), layout="constrained")
    total = sum(np.nan_to_num(np.asarray(v, float)) for _, v, _ in layers)
    unit, unit_name = _time_unit(total)
    bottom = np.zeros(len(summary))
    for name, values, colour in layers:
        values = np.nan_to_num(np.asarray(values, float)) / unit
        bars = ax.bar(range(len(labels)), values, bottom=bottom, color=colour, label=name)
        ax.bar_label(bars, [plain(v, 2) if v >= 0.05 * total.max(initial=0) / unit + 1e-9 and v > 0 else ""
                            for v in values], label_type="center", fontsize=8,
                     color="white" if colour in ("C0", STARTUP_SHADES[0]) else "black")  # fmt: skip
        bottom += values
    crowded = len(labels) * 0.7 > width - 2.5  # labels side by side would run together: upright
    ax.bar_label(bars, [duration(t) for t in total], padding=2, fontsize=8, rotation=90 if crowded else 0)
    ax.set_xticks(range(len(labels)), labels, rotation=90 if crowded else 0)
    ax.set_ylim(0, bottom.max() * (1.4 if crowded else 1.15) if len(bottom) else 1)
    ax.set_ylabel(f"{unit_name} per run (mean over seeds)")
    ax.set_title("where the time of one run goes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    _save(fig, path)


MAX_PANELS = 3  # rows of (series, variant); a trainer that logs more shows the first ones (all are in curves.csv)


def curves(curves: pd.DataFrame, baseline: str, path, confidence: float = 0.95, order: list[str] | None = None) -> None:
    """Every logged series per optimizer step, one row per series and variant: left the mean over
    seeds per hardware with its min-max band, right the difference to the baseline (paired by
    seed) with its t band."""
    band = curve_band(curves)
    diff = curve_difference(curves, baseline, confidence) if len(curves) else band.iloc[:0]
    pairs = list(dict.fromkeys(zip(band.metric, band.variant)))[:MAX_PANELS] or [("(nothing logged per step)", "")]
    several = band.variant.nunique() > 1
    order = order or (hardware_order(curves, baseline) if len(curves) else [])
    colours = hardware_colours(order, baseline)
    fig, axes = plt.subplots(len(pairs), 2, figsize=(MAX_WIDTH, min(MAX_HEIGHT, 2.5 * len(pairs) + 0.5)),
                             squeeze=False, layout="constrained")  # fmt: skip
    for row, (name, variant) in enumerate(pairs):
        ax, dax = axes[row]
        sub = band[(band.metric == name) & (band.variant == variant)]
        dsub = diff[(diff.metric == name) & (diff.variant == variant)]
        for i, hw in enumerate(order):
            style = {"color": colours[hw], "ls": LINE_STYLES[i % 4], "lw": 1.4}
            line = sub[sub.hardware == hw]
            if len(line):
                ax.plot(line.step, line["mean"], label=f"{hw} (baseline)" if hw == baseline else hw, **style)
                ax.fill_between(line.step, line.low, line.high, color=colours[hw], alpha=0.15, lw=0)
            line = dsub[dsub.hardware == hw]
            if len(line):
                dax.plot(line.step, line["mean"], label=hw, **style)
                dax.fill_between(line.step, line.low.fillna(line["mean"]), line.high.fillna(line["mean"]),
                                 color=colours[hw], alpha=0.2, lw=0)  # fmt: skip
        if len(sub) and (sub.low > 0).all() and sub["mean"].max() / sub["mean"].min() > 20:
            ax.set_yscale("log")  # losses fall over orders of magnitude
        where = f" · variant {variant}" if several else ""
        ax.set_title(_wrap(f"{name}{where}: mean, min–max of seeds", MAX_WIDTH / 2 - 0.6), fontsize=10)
        dax.set_title(_wrap(f"{name}{where}: hardware − {baseline}, {plain(confidence * 100, 4)}% band", MAX_WIDTH / 2 - 0.6),
                      fontsize=10)  # fmt: skip
        dax.axhline(0, color="black", lw=0.8)
        for a in (ax, dax):
            a.grid(alpha=0.3)
            if row == len(pairs) - 1:
                a.set_xlabel("optimizer step")
        if len(sub):
            ax.legend()
    _save(fig, path)
