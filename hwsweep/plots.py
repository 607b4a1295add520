"""Report figures (matplotlib, no display). Each function writes one PNG atomically."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hwsweep import io  # noqa: E402
from hwsweep.stats import curve_band  # noqa: E402


def _save(fig, path) -> None:
    fig.tight_layout()
    with io.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def _hardware_order(runs: pd.DataFrame, baseline: str) -> list[str]:
    order = runs.drop_duplicates("hardware").sort_values(["world_size", "hardware"]).hardware.tolist()
    return [baseline] + [h for h in order if h != baseline]


VERDICT_COLOURS = {"equivalent": "tab:green", "different": "tab:red", "inconclusive": "tab:orange"}


def metric_by_hardware(runs: pd.DataFrame, summary: pd.DataFrame, metric: str, baseline: str, path) -> None:
    """One panel per variant: every seed as a point, the mean as a bar, the bootstrap CI as a whisker."""
    variants = list(dict.fromkeys(runs.variant))
    hws = _hardware_order(runs, baseline)
    fig, axes = plt.subplots(1, len(variants), figsize=(3.2 * len(variants) + 1, 3.4), squeeze=False, sharey=True)
    for ax, variant in zip(axes[0], variants):
        sub = runs[runs.variant == variant]
        for i, hw in enumerate(hws):
            vals = sub[sub.hardware == hw][metric]
            ax.scatter([i - 0.08] * len(vals), vals, color="C0", alpha=0.7, zorder=3)
            row = summary[(summary.variant == variant) & (summary.hardware == hw)]
            if len(row):
                r = row.iloc[0]
                ax.hlines(r[f"{metric}_mean"], i - 0.25, i + 0.25, color="k", lw=2, zorder=4)
                if pd.notna(r[f"{metric}_ci_low"]):
                    ax.vlines(i + 0.12, r[f"{metric}_ci_low"], r[f"{metric}_ci_high"], color="k", lw=1.2)
        ax.set_xticks(range(len(hws)), hws)
        ax.set_xlim(-0.6, len(hws) - 0.4)
        ax.set_title(variant)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(metric.replace("_", " "))
    fig.suptitle(f"{metric.replace('_', ' ')} per hardware (points: seeds, bar: mean, whisker: CI)", fontsize=10)
    _save(fig, path)


def equivalence_forest(equivalence: pd.DataFrame, path) -> None:
    """Difference to the baseline with its CI, per metric, against the +-margin band."""
    metrics = list(dict.fromkeys(equivalence.metric)) if len(equivalence) else ["(no comparison)"]
    rows = max(1, len(equivalence) // len(metrics))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.8 * len(metrics), 2.2 + 0.45 * rows), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        sub = equivalence[equivalence.metric == metric] if len(equivalence) else equivalence
        if sub.empty:
            ax.text(0.5, 0.5, "no hardware besides the baseline", ha="center", transform=ax.transAxes)
            continue
        margin = sub.margin.iloc[0]
        ax.axvspan(-margin, margin, color="tab:green", alpha=0.12, lw=0)
        ax.axvline(0, color="k", lw=0.8)
        labels = [f"{r.variant} {r.hardware}" for r in sub.itertuples()]
        for y, r in enumerate(sub.itertuples()):
            colour = VERDICT_COLOURS.get(r.verdict, "grey")
            if pd.notna(getattr(r, "difference", float("nan"))):
                ax.plot([r.ci_low, r.ci_high], [y, y], color=colour, lw=1.5)
                ax.plot(r.difference, y, "o", color=colour)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_ylim(len(labels) - 0.5, -0.5)  # top to bottom, half a row of air at each end
        ax.set_title(f"{metric} (margin +-{margin:g})", fontsize=9)
        ax.set_xlabel("hardware - baseline", fontsize=8)
        ax.xaxis.set_major_locator(plt.MaxNLocator(4))
        ax.tick_params(axis="x", labelsize=7)
    handles = [plt.Line2D([], [], color=c, marker="o", lw=1.5, label=v) for v, c in VERDICT_COLOURS.items()]
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    with io.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def speedup_by_devices(speedup: pd.DataFrame, path) -> None:
    """Measured speedup against the device ratio, with the ideal line and Amdahl's fit if present."""
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    top = max(1.0, speedup.device_ratio.max(), speedup.amdahl_extrapolated_devices.max(skipna=True) or 0)
    ax.plot([0, top], [0, top], "k--", lw=1, label="ideal")
    for i, (variant, sub) in enumerate(speedup.groupby("variant", sort=False)):
        low = (sub.speedup - sub.speedup_ci_low).fillna(0).clip(lower=0)
        high = (sub.speedup_ci_high - sub.speedup).fillna(0).clip(lower=0)
        ax.errorbar(sub.device_ratio, sub.speedup, yerr=[low, high], fmt="o", color=f"C{i}", capsize=3, label=variant)
        for _, r in sub.iterrows():
            ax.annotate(r.hardware, (r.device_ratio, r.speedup), textcoords="offset points", xytext=(5, -10), fontsize=8)
        fit = sub.dropna(subset=["amdahl_serial_fraction"])
        if len(fit):
            f, n_max = fit.amdahl_serial_fraction.iloc[0], fit.amdahl_extrapolated_devices.iloc[0]
            n = np.linspace(1, n_max, 50)
            ax.plot(n, 1 / (f + (1 - f) / n), ":", color=f"C{i}", label=f"Amdahl f={f:.2f} (extrapolated)")
    ax.set_xlim(0, top * 1.15)
    ax.set_ylim(0, top * 1.15)
    ax.set_xlabel("devices / baseline devices")
    ax.set_ylabel("speedup (baseline time / time)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _save(fig, path)


def time_breakdown(summary: pd.DataFrame, path) -> None:
    """Mean seconds per run spent starting up, training and evaluating, per variant and hardware."""
    labels = [f"{r.variant}\n{r.hardware}" for r in summary.itertuples()]
    fig, ax = plt.subplots(figsize=(1.1 * len(labels) + 2, 3.4))
    bottom = np.zeros(len(summary))
    for part, colour in (("startup_seconds", "C7"), ("train_seconds", "C0"), ("eval_seconds", "C2")):
        ax.bar(labels, summary[part], bottom=bottom, color=colour, label=part.replace("_seconds", ""))
        bottom += summary[part].to_numpy()
    ax.set_ylabel("seconds per run (mean over seeds)")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    _save(fig, path)


MAX_CURVES = 4  # series per figure; a trainer that logs more shows the first ones (all are in curves.csv)


def curves(curves: pd.DataFrame, path) -> None:
    """Every logged series per optimizer step: mean over seeds as a line, min-max as a band;
    one row of panels per series, one column per variant."""
    band = curve_band(curves)
    names = list(dict.fromkeys(band.metric))[:MAX_CURVES] or ["(nothing logged per step)"]
    variants = list(dict.fromkeys(band.variant)) or [""]
    fig, axes = plt.subplots(len(names), len(variants), figsize=(3.6 * len(variants) + 1, 2.9 * len(names)),
                             squeeze=False)  # fmt: skip
    for row, name in enumerate(names):
        for col, variant in enumerate(variants):
            ax = axes[row][col]
            sub = band[(band.metric == name) & (band.variant == variant)]
            for i, (hw, line) in enumerate(sub.groupby("hardware", sort=False)):
                ax.plot(line.step, line["mean"], color=f"C{i}", lw=1.2, label=hw)
                ax.fill_between(line.step, line.low, line.high, color=f"C{i}", alpha=0.2, lw=0)
            if len(sub) and (sub.low > 0).all() and sub["mean"].max() / sub["mean"].min() > 20:
                ax.set_yscale("log")  # losses fall over orders of magnitude
            ax.set_title(f"{variant} {name}".strip(), fontsize=9)
            ax.set_xlabel("optimizer step", fontsize=8)
            ax.grid(alpha=0.3)
            if len(sub):
                ax.legend(fontsize=7)
    _save(fig, path)
