"""Report figures (matplotlib, no display). Each function writes one PNG atomically.

Sized for the report, which shows a PNG at its pixel size: text at 10 pt and 110 dpi reads at
about 15 px. The hardware keep one order and one colour in every figure (the baseline first,
in black); verdicts are marked by shape as well as colour."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hwsweep.analysis.stats import curve_band, curve_difference  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.contracts.records import (
    PARTS,  # noqa: E402
    STARTUP_COLUMNS,  # noqa: E402
)
from hwsweep.report.tables import hardware_order  # noqa: E402

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
        fig, ax = plt.subplots(figsize=(5, 1.6), layout="constrained")
        ax.text(0.5, 0.5, "no hardware besides the baseline: nothing to compare", ha="center", va="center")
        ax.axis("off")
        _save(fig, path)
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
        ax.set_title(f"{_name(metric)}: margin ±{margin:g}{' points' if scale == 100 else ''}")
        ax.set_xlabel(f"difference to {baseline} ({unit})")
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))
        ax.grid(axis="x", alpha=0.3)
    handles = [plt.Line2D([], [], marker=m, color=c, mec="black", mew=0.6, ls="none", ms=8, label=v)
               for v, (m, c) in VERDICT_STYLE.items()]  # fmt: skip
    handles += [plt.Line2D([], [], color="grey", lw=4, alpha=0.6, label=f"{tost:g}% TOST interval"),
                plt.Line2D([], [], color="grey", lw=1.2, label=f"{confidence * 100:g}% CI"),
                plt.Rectangle((0, 0), 1, 1, color="tab:green", alpha=0.15, label="±margin")]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False)
    _save(fig, path)


def speedup_by_devices(speedup: pd.DataFrame, comparison: pd.DataFrame, baseline: str, path) -> None:
    """Left: speedup against devices within each device type (log2 axes, against the type's
    smallest count), ideal line and Amdahl's fit. Right: training time and cost per run of every
    hardware, across device types (never one 'device ratio' axis for a GPU and a CPU core)."""
    order = hardware_order(comparison, baseline)
    colours = hardware_colours(order, baseline)
    variants = list(dict.fromkeys(comparison.variant))
    variant = variants[0]
    bars = 0.5 * len(order) + 1.2
    fig, panels = plt.subplot_mosaic([["scale", "scale"], ["time", "cost"]], figsize=(MAX_WIDTH, 3.6 + bars),
                                     layout="constrained", height_ratios=[3.6, bars])  # fmt: skip
    axes = [panels["scale"], panels["time"], panels["cost"]]
    ax = axes[0]
    sp = speedup[speedup.variant == variant]
    top = 1
    for i, (gpu, sub) in enumerate(sp.groupby("gpu_type", sort=False)):
        sub = sub.sort_values("world_size")
        ref = sub.world_size.min()
        x = sub.world_size / ref
        low = (sub.scaling_speedup - sub.scaling_ci_low).fillna(0).clip(lower=0)
        high = (sub.scaling_ci_high - sub.scaling_speedup).fillna(0).clip(lower=0)
        marker = "osD^v"[i % 5]
        ax.errorbar(x, sub.scaling_speedup, yerr=[low, high], fmt=marker + "-", color=f"C{i}", capsize=3, ms=7,
                    label=f"{gpu} (against {int(ref)} device{'s' if ref > 1 else ''})")  # fmt: skip
        for xi, yi, hw in zip(x, sub.scaling_speedup, sub.hardware):
            ax.annotate(hw, (xi, yi), textcoords="offset points", xytext=(7, -13 - 11 * i), fontsize=9, color=f"C{i}")
        top = max(top, float(x.max()))
        fit = sub.dropna(subset=["amdahl_serial_fraction"])
        if len(fit):
            f, n_max = fit.amdahl_serial_fraction.iloc[0], fit.amdahl_extrapolated_devices.iloc[0] / ref
            n = np.geomspace(1, n_max, 50)
            ax.plot(n, 1 / (f + (1 - f) / n), ":", color=f"C{i}", label=f"Amdahl f = {f:.2f} (to {int(n_max * ref)})")
            top = max(top, n_max)
    ax.plot([1, top], [1, top], "k--", lw=1, label="perfect scaling")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(0.8, top * 1.4)
    ax.set_ylim(min(0.5, _finite(sp.scaling_speedup.min(skipna=True), 1) * 0.8), top * 1.4)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.set_xlabel("devices, relative to the type's smallest count")
    ax.set_ylabel("speedup within the device type")
    ax.set_title("scaling within one device type")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3, which="both")

    comp = comparison[comparison.variant == variant].set_index("hardware").reindex(order)
    y = np.arange(len(order))
    for ax, column, label in ((axes[1], "train_seconds", "training time per run (s)"),
                              (axes[2], "cost_per_run", "cost per run")):  # fmt: skip
        values = comp[column].astype(float) if column in comp else pd.Series(np.nan, index=order)
        currency = str(comp["currency"].dropna().iloc[0]) if "currency" in comp and comp.currency.notna().any() else ""
        bars = ax.barh(y, values.fillna(0), color=[colours[h] for h in order], alpha=0.85)
        text = [("no price" if column == "cost_per_run" else "") if pd.isna(v) else
                (f"{v:.3g} s" if column == "train_seconds" else _money(v, currency)) for v in values]  # fmt: skip
        ax.bar_label(bars, text, padding=3, fontsize=9)
        names = [f"{h} ({int(comp.loc[h, 'world_size'])}× {comp.loc[h, 'gpu_type']})" for h in order]
        ax.set_yticks(y, names if ax is axes[1] else [""] * len(order))
        ax.set_ylim(len(order) - 0.5, -0.6)
        ax.set_xlim(0, _finite(values.max(skipna=True), 1) * 1.45)
        ax.set_xlabel(label + (f" ({currency})" if column == "cost_per_run" and currency else ""))
        ax.grid(axis="x", alpha=0.3)
    axes[1].set_title(f"time against {baseline}, any device type")
    axes[2].set_title("money (device-hours × price)")
    if len(variants) > 1:
        fig.suptitle(f"variant {variant} (the tables hold every variant)")
    _save(fig, path)


def _finite(value, default: float) -> float:
    """An axis limit from a column's extreme: the default where there is none (every value NaN, e.g. runs of
    one step measure no training time) or it is 0."""
    value = float(value)
    return value if math.isfinite(value) and value else default


def _money(value: float, currency: str) -> str:
    from hwsweep.report.headline import money

    return money(value, currency or "USD")


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
    labels = [f"{r.variant}\n{r.hardware}" if several else r.hardware for r in summary.itertuples()]
    layers = time_layers(summary)
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH, max(5.0, 1.3 * len(labels) + 2.5)), 4.0), layout="constrained")
    bottom = np.zeros(len(summary))
    for name, values, colour in layers:
        values = np.nan_to_num(np.asarray(values, float))
        bars = ax.bar(labels, values, bottom=bottom, color=colour, label=name)
        ax.bar_label(bars, [f"{v:.2g}" if v >= 0.05 * bottom.max(initial=0) + 1e-9 and v > 0 else "" for v in values],
                     label_type="center", fontsize=9,
                     color="white" if colour in ("C0", STARTUP_SHADES[0]) else "black")  # fmt: skip
        bottom += values
    ax.bar_label(bars, [f"{t:.3g} s" for t in bottom], padding=2, fontsize=9)
    ax.set_ylim(0, bottom.max() * 1.15 if len(bottom) else 1)
    ax.set_ylabel("seconds per run (mean over seeds)")
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
        ax.set_title(f"{name}{where}: mean, min–max of seeds")
        dax.set_title(f"{name}{where}: hardware − {baseline}, {confidence * 100:g}% band")
        dax.axhline(0, color="black", lw=0.8)
        for a in (ax, dax):
            a.grid(alpha=0.3)
            if row == len(pairs) - 1:
                a.set_xlabel("optimizer step")
        if len(sub):
            ax.legend()
    _save(fig, path)
