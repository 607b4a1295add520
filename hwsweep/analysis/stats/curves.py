"""Logged series over seeds: the band (mean, min, max) of each, and the difference to the baseline with a t
band, per cell, metric and step."""

from __future__ import annotations

import pandas as pd

from hwsweep.analysis.stats.settings import CELL
from hwsweep.analysis.stats.t_interval import t_half_width


def curve_band(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and min/max over seeds of each logged series, per cell, metric and step."""
    g = curves.groupby(CELL + ["metric", "step"], sort=False).value
    return g.agg(mean="mean", low="min", high="max").reset_index()


def curve_difference(curves: pd.DataFrame, baseline: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per cell, series and step: mean over seeds of (hardware - baseline, same seed) with a t
    band over the seeds; seeds the baseline did not run are left out."""
    base = curves[curves.hardware == baseline].drop(columns="hardware")
    keys = ["suite", "variant", "metric", "step", "seed"]
    merged = curves[curves.hardware != baseline].merge(base, on=keys, suffixes=("", "_base"))
    merged["diff"] = merged.value - merged.value_base
    g = merged.groupby(CELL + ["metric", "step"], sort=False)["diff"]
    out = g.agg(mean="mean", std="std", n="count").reset_index()
    half = t_half_width(out["std"], out.n, confidence)
    out["low"], out["high"] = out["mean"] - half, out["mean"] + half
    return out
