"""The export: one row per suite x variant x hardware joining the seed summary, the verdicts and the
speedup table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hwsweep.analysis.stats.settings import CELL, Settings
from hwsweep.analysis.stats.verdicts import overall


def comparison(summary: pd.DataFrame, equiv: pd.DataFrame, speed: pd.DataFrame, baseline: str,
               settings: Settings = Settings()) -> pd.DataFrame:  # fmt: skip
    """One row per suite x variant x hardware: metric means and CIs, verdicts (per metric and
    overall), speedup, cost."""
    out = summary.copy()
    out.insert(3, "baseline", out.hardware == baseline)
    verdicts = overall(equiv) if len(equiv) else pd.DataFrame(columns=CELL + ["verdict"])
    out = out.merge(verdicts, on=CELL, how="left")
    out["verdict"] = np.where(out.baseline, "baseline", out.verdict.fillna("inconclusive"))
    for metric in settings.margins:  # a metric without a margin is reported, not compared
        if equiv.empty or metric not in set(equiv.metric):
            out[f"{metric}_verdict"] = np.where(out.baseline, "baseline", "inconclusive")
            continue
        v = equiv[equiv.metric == metric][CELL + ["verdict", "difference", "finding", "test"]]
        v = v.rename(columns={"verdict": f"{metric}_verdict", "difference": f"{metric}_difference",
                              "finding": f"{metric}_finding", "test": f"{metric}_test"})  # fmt: skip
        out = out.merge(v, on=CELL, how="left")
        out.loc[out.baseline, f"{metric}_verdict"] = "baseline"
    keep = ["speedup", "speedup_ci_low", "speedup_ci_high", "speedup_method", "speedup_note", "throughput_ratio",
            "device_ratio",
            "same_device_type", "efficiency", "scaling_reference", "device_hours", "device_hours_ratio",
            "time_saved_seconds", "price_per_device_hour", "currency", "cost_per_run", "cost_per_cell",
            "cost_ratio", "cost_ratio_ci_low", "cost_ratio_ci_high", "contention"]  # fmt: skip
    if speed.empty:
        return out
    return out.merge(speed[CELL + keep], on=CELL, how="left")
