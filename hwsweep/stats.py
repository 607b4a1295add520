"""Statistics over seeds and hardware: pure functions on DataFrames.

seed_summary: per suite x variant x hardware, n / mean / std of every metric.
speedup: per hardware against the baseline hardware, paired by seed.
Confidence intervals and equivalence verdicts slot in beside these as further columns.
"""

from __future__ import annotations

import pandas as pd

from hwsweep.records import METRICS

CELL = ["suite", "variant", "hardware"]


def seed_summary(runs: pd.DataFrame, metrics=METRICS) -> pd.DataFrame:
    grouped = runs.groupby(CELL, sort=False)
    out = grouped.agg(
        n_seeds=("seed", "nunique"),
        world_size=("world_size", "first"),
        gpu_type=("gpu_type", "first"),
        samples_per_second=("samples_per_second", "mean"),
        train_seconds=("train_seconds", "mean"),
        startup_seconds=("startup_seconds", "mean"),
        eval_seconds=("eval_seconds", "mean"),
    )
    for m in metrics:
        out[f"{m}_mean"] = grouped[m].mean()
        out[f"{m}_std"] = grouped[m].std(ddof=1)  # NaN with one seed: no spread to report
    return out.reset_index()


def speedup(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Time to finish the fixed step budget, baseline / hardware, paired by seed.

    speedup is the mean of the per-seed ratios; efficiency = speedup / device ratio;
    gpu_hours_ratio = (devices x time) / (baseline devices x baseline time) = device ratio / speedup.
    """
    base = runs[runs.hardware == baseline][["suite", "variant", "seed", "train_seconds", "samples_per_second", "world_size"]]
    paired = runs.merge(base, on=["suite", "variant", "seed"], suffixes=("", "_base"))
    paired["ratio"] = paired.train_seconds_base / paired.train_seconds
    paired["throughput_ratio"] = paired.samples_per_second / paired.samples_per_second_base
    paired["device_ratio"] = paired.world_size / paired.world_size_base
    out = paired.groupby(CELL, sort=False).agg(
        n_pairs=("seed", "nunique"),
        speedup=("ratio", "mean"),
        speedup_std=("ratio", "std"),
        throughput_ratio=("throughput_ratio", "mean"),
        device_ratio=("device_ratio", "first"),
    )
    out["efficiency"] = out.speedup / out.device_ratio
    out["gpu_hours_ratio"] = out.device_ratio / out.speedup
    return out.reset_index()


def comparison(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    summary = seed_summary(runs)
    out = summary.merge(speedup(runs, baseline), on=CELL, how="left")
    out.insert(3, "baseline", out.hardware == baseline)
    return out


def loss_band(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and min/max loss per step over seeds, per cell."""
    g = curves.groupby(CELL + ["step"], sort=False).loss
    return g.agg(mean="mean", low="min", high="max").reset_index()


def known_speedup(hours_base: float, hours_new: float, devices_base: int, devices_new: int) -> dict:
    """Speedup, efficiency and GPU-hour ratio from two wall times (used for worked examples)."""
    s = hours_base / hours_new
    ratio = devices_new / devices_base
    return {"speedup": s, "efficiency": s / ratio, "gpu_hours_ratio": ratio / s}


