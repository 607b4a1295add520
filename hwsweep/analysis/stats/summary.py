"""seed_summary: per suite x variant x hardware and metric, n / mean / std / standard error / t-based CI of
the mean (Student, n - 1 df) / min / max, with the cell's devices and mean timings."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hwsweep.analysis.stats.settings import CELL, Settings
from hwsweep.analysis.stats.t_interval import t_half_width
from hwsweep.contracts.records import SPEED_COLUMNS, STARTUP_COLUMNS

CI_METHOD = "t (Student, n-1 df)"


def _describe(groups, column: str, settings: Settings) -> pd.DataFrame:
    out = groups[column].agg(["count", "mean", "std", "min", "max"])
    out["se"] = out["std"] / np.sqrt(out["count"])
    half = t_half_width(out["std"], out["count"], settings.confidence)
    out["ci_low"] = np.where(out["count"] >= 2, out["mean"] - half, np.nan)
    out["ci_high"] = np.where(out["count"] >= 2, out["mean"] + half, np.nan)
    out["ci_note"] = np.where(out["count"] >= 2, "", "CI not available: fewer than 2 seeds")
    out = out.rename(columns={"count": "n"})
    return out.add_prefix(f"{column}_")


def seed_summary(runs: pd.DataFrame, settings: Settings = Settings()) -> pd.DataFrame:
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
    for column in STARTUP_COLUMNS + SPEED_COLUMNS:  # absent from a runs.csv written before them
        if column in runs:
            values = pd.to_numeric(runs[column], errors="coerce")
            out[column] = values.groupby([runs[c] for c in CELL], sort=False).mean()
    out["ci_method"] = CI_METHOD
    if "strategy" in runs:  # ddp or fsdp: part of what the devices are (absent from a runs.csv written before it)
        out["strategy"] = grouped["strategy"].first()
    if "seeded" in runs:  # a script without a seed flag: the seed spread is run-to-run noise only
        out["seeded"] = grouped["seeded"].all()
    if "checks" in runs:  # where a run did not follow its plan: carried to the comparison and the report
        out["checks"] = grouped["checks"].agg(lambda c: "; ".join(sorted({x for x in c if isinstance(x, str) and x})))
    parts = [out] + [_describe(grouped, m, settings) for m in settings.metrics if m in runs]
    return pd.concat(parts, axis=1).reset_index()
