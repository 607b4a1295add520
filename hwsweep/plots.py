"""Report figures (matplotlib, no display). Each function writes one PNG atomically."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from hwsweep import io  # noqa: E402
from hwsweep.stats import loss_band  # noqa: E402


def _save(fig, path) -> None:
    fig.tight_layout()
    with io.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def _hardware_order(runs: pd.DataFrame, baseline: str) -> list[str]:
    order = runs.drop_duplicates("hardware").sort_values(["world_size", "hardware"]).hardware.tolist()
    return [baseline] + [h for h in order if h != baseline]


def metric_by_hardware(runs: pd.DataFrame, metric: str, baseline: str, path) -> None:
    """One panel per variant: every seed as a point, the mean as a bar across it."""
    variants = list(dict.fromkeys(runs.variant))
    hws = _hardware_order(runs, baseline)
    fig, axes = plt.subplots(1, len(variants), figsize=(3.2 * len(variants) + 1, 3.4), squeeze=False, sharey=True)
    for ax, variant in zip(axes[0], variants):
        sub = runs[runs.variant == variant]
        for i, hw in enumerate(hws):
            vals = sub[sub.hardware == hw][metric]
            ax.scatter([i] * len(vals), vals, color="C0", alpha=0.7, zorder=3)
            if len(vals):
                ax.hlines(vals.mean(), i - 0.25, i + 0.25, color="k", lw=2, zorder=4)
        ax.set_xticks(range(len(hws)), hws)
        ax.set_xlim(-0.6, len(hws) - 0.4)
        ax.set_title(variant)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(metric.replace("_", " "))
    fig.suptitle(f"{metric.replace('_', ' ')} per hardware (points: seeds, bar: mean)", fontsize=10)
    _save(fig, path)


def speedup_by_devices(comparison: pd.DataFrame, path) -> None:
    """Measured speedup against the device ratio, with the ideal (linear) line."""
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    top = max(1.0, comparison.device_ratio.max())
    ax.plot([0, top], [0, top], "k--", lw=1, label="ideal")
    for variant, sub in comparison.groupby("variant", sort=False):
        ax.errorbar(sub.device_ratio, sub.speedup, yerr=sub.speedup_std.fillna(0), fmt="o", capsize=3, label=variant)
        for _, r in sub.iterrows():
            ax.annotate(r.hardware, (r.device_ratio, r.speedup), textcoords="offset points", xytext=(5, -10), fontsize=8)
    ax.set_xlim(0, top * 1.15)
    ax.set_ylim(0, top * 1.15)
    ax.set_xlabel("devices / baseline devices")
    ax.set_ylabel("speedup (baseline time / time)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(fig, path)


def loss_curves(curves: pd.DataFrame, path) -> None:
    """Training loss per step: mean over seeds as a line, min-max over seeds as a band."""
    band = loss_band(curves)
    variants = list(dict.fromkeys(band.variant))
    fig, axes = plt.subplots(1, len(variants), figsize=(3.6 * len(variants) + 1, 3.4), squeeze=False, sharey=True)
    for ax, variant in zip(axes[0], variants):
        for i, (hw, sub) in enumerate(band[band.variant == variant].groupby("hardware", sort=False)):
            ax.plot(sub.step, sub["mean"], color=f"C{i}", lw=1.2, label=hw)
            ax.fill_between(sub.step, sub.low, sub.high, color=f"C{i}", alpha=0.2, lw=0)
        ax.set_yscale("log")
        ax.set_xlabel("optimizer step")
        ax.set_title(variant)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("training loss")
    _save(fig, path)
