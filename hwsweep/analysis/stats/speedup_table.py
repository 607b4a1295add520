"""The speedup table: per cell, speedup over the baseline for the fixed step budget, device-hours and cost
ratios derived from that speedup (one kind of mean) with its interval; parallel efficiency only within one device
type against a smaller device count of it, and Amdahl's serial fraction where the type has >= 3 device counts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hwsweep.analysis.stats.amdahl import amdahl_fit, amdahl_speedup
from hwsweep.analysis.stats.settings import CELL, Settings
from hwsweep.analysis.stats.speedup_ratio import cell_seed_times, ratio
from hwsweep.analysis.stats.untested import TIMING_ONLY
from hwsweep.contracts.records import SPEED_COLUMNS

AMDAHL_COLUMNS = ["amdahl_serial_fraction", "amdahl_serial_fraction_se", "amdahl_serial_fraction_ci_low",
                  "amdahl_serial_fraction_ci_high", "amdahl_extrapolated_devices", "amdahl_extrapolated_speedup"]  # fmt: skip


def contention(frame: pd.DataFrame) -> str:
    """'cpu2: 2 of 3 runs (1 other hwsweep run(s) on the node)' for one cell's runs measured under contention
    (runs.csv `contended`, hwsweep.host.contended); '' when none was."""
    if "contended" not in frame:
        return ""
    flagged = frame.contended.fillna("").astype(str)
    flagged = flagged[flagged != ""]
    return "" if flagged.empty else f"{frame.hardware.iloc[0]}: {len(flagged)} of {len(frame)} runs ({flagged.iloc[0]})"


def note(r: dict, sub: pd.DataFrame, base: pd.DataFrame) -> str:
    """Why a speedup has no interval (its ratio's note), or, where the runs of either side are repeats (seeded
    False: no seed flag, or identical runs), that its interval stands on timing noise only (issue 68: one stance,
    timing noise is real replication)."""
    if r["note"] or not math.isfinite(r["low"]):
        return r["note"]
    repeats = any("seeded" in f and not f.seeded.astype(bool).all() for f in (sub, base))
    return TIMING_ONLY if repeats else ""


def _means(frame: pd.DataFrame, columns: list[str]) -> dict:
    return {c: float(pd.to_numeric(frame[c], errors="coerce").mean()) if c in frame else math.nan for c in columns}


def speedup(runs: pd.DataFrame, baseline: str, settings: Settings = Settings(), prices: dict | None = None,
            currency: str = "USD") -> pd.DataFrame:  # fmt: skip
    """Per cell: speedup over the baseline for the fixed step budget (any device type), device-
    hours and money; parallel efficiency against the smallest device count of the same type."""
    prices = prices or {}
    # A run without a timed step (steps: 1: its only step is startup) measured no training time:
    # its times are unknown (NaN), never a zero that divides.
    runs = runs.assign(**{c: runs[c].where(runs[c] > 0) for c in ("train_seconds", "samples_per_second")})
    cells = {key: frame for key, frame in runs.groupby(CELL, sort=False)}
    times = cell_seed_times(runs, CELL)
    rows = []
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, variant, baseline))
        if base is None:
            continue
        r = ratio(times[(suite, variant, baseline)], times[(suite, variant, hw)], settings.confidence)
        ws, ws_base = int(sub.world_size.iloc[0]), int(base.world_size.iloc[0])
        gpu, gpu_base = sub.gpu_type.iloc[0], base.gpu_type.iloc[0]
        hours = float((sub.world_size * sub.train_seconds).mean() / 3600)
        price, price_base = prices.get(hw), prices.get(baseline)
        cost = hours * price if price is not None else math.nan
        # Ratios of device-hours and money follow the speedup's own mean (the geometric mean of the
        # per-seed ratios), so one sentence never mixes it with a ratio of arithmetic means.
        per_hour = (math.nan if price is None else price) / price_base if price_base else math.nan
        cost_ratio = [per_hour * ws / ws_base / x for x in (r["value"], r["high"], r["low"])]
        rows.append({
            "suite": suite, "variant": variant, "hardware": hw, "baseline": hw == baseline, "gpu_type": gpu,
            "world_size": ws,
            "strategy": sub.strategy.iloc[0] if "strategy" in sub else None,
            "n_pairs": r["n_pairs"], "speedup": r["value"], "speedup_ci_low": r["low"], "speedup_ci_high": r["high"],
            "speedup_method": r["method"], "speedup_note": note(r, sub, base) if hw != baseline else "",
            "throughput_ratio": sub.samples_per_second.mean() / base.samples_per_second.mean(),
            "device_ratio": ws / ws_base,
            "same_device_type": gpu == gpu_base,
            "time_saved_seconds": base.train_seconds.mean() - sub.train_seconds.mean(),
            "device_hours": hours,
            "device_hours_ratio": ws / ws_base / r["value"] if gpu == gpu_base else math.nan,
            "price_per_device_hour": math.nan if price is None else price, "currency": currency,
            "cost_per_run": cost, "cost_per_cell": cost * len(sub) if price is not None else math.nan,
            "cost_ratio": cost_ratio[0], "cost_ratio_ci_low": cost_ratio[1], "cost_ratio_ci_high": cost_ratio[2],
            # Whose timings measured other work too: this hardware's runs and the baseline's.
            "contention": "; ".join(c for c in (contention(sub), contention(base) if hw != baseline else "") if c),
        } | _means(sub, [c for c in SPEED_COLUMNS if c != "flops_per_step"]))  # fmt: skip
    out = pd.DataFrame(rows)
    if out.empty:  # no run to compare (every run stopped at its targets): a table of no rows, still readable
        return pd.DataFrame(columns=CELL)
    for col in ("scaling_reference", "scaling_speedup", "scaling_ci_low", "scaling_ci_high", "efficiency"):
        out[col] = math.nan if col != "scaling_reference" else ""
    for col in AMDAHL_COLUMNS:
        out[col] = math.nan
    for _, idx in out.groupby(["suite", "variant", "gpu_type"], sort=False).groups.items():
        _scaling(out, idx, times, baseline, settings)
    return out


def _scaling(out: pd.DataFrame, idx, times: dict, baseline: str, settings: Settings) -> None:
    """Efficiency within one device type, for the hardware above its smallest device count: speedup
    over that count (`scaling_reference`, the baseline where it is one) / device ratio; Amdahl's fit
    where the type has >= 3 device counts."""
    sub = out.loc[idx]
    smallest = sub[sub.world_size == sub.world_size.min()]
    ref = smallest[smallest.hardware == baseline] if (smallest.hardware == baseline).any() else smallest.iloc[:1]
    ref_hw, ref_ws = ref.hardware.iloc[0], int(ref.world_size.iloc[0])
    suite, variant = sub.suite.iloc[0], sub.variant.iloc[0]
    for i in idx:
        if out.at[i, "world_size"] == ref_ws:  # nothing smaller to compare with: no efficiency of 1 against itself
            continue
        r = ratio(times[(suite, variant, ref_hw)], times[(suite, variant, out.at[i, "hardware"])], settings.confidence)
        out.loc[i, ["scaling_speedup", "scaling_ci_low", "scaling_ci_high"]] = r["value"], r["low"], r["high"]
        out.at[i, "scaling_reference"] = ref_hw
        out.at[i, "efficiency"] = r["value"] / (out.at[i, "world_size"] / ref_ws)
    sub = out.loc[idx]
    per_seed = [np.asarray(times[(suite, variant, hw)], float) for hw in sub.hardware]
    # runs of one step time no training (NaN): no fit rather than a fit to nothing
    if sub.world_size.nunique() >= 3 and all(len(t) and np.isfinite(t).all() and (t > 0).all() for t in per_seed):
        devices = np.concatenate([np.full(len(t), ws / ref_ws) for t, ws in zip(per_seed, sub.world_size)])
        fit = {k: float(v[0]) for k, v in amdahl_fit(devices, np.concatenate(per_seed), settings.confidence).items()}
        n = 2 * int(sub.world_size.max())
        out.loc[idx, AMDAHL_COLUMNS] = [fit["f"], fit["se"], fit["low"], fit["high"], n,
                                        amdahl_speedup(fit["f"], n / ref_ws)]  # fmt: skip


def known_speedup(hours_base: float, hours_new: float, devices_base: int, devices_new: int) -> dict:
    """Speedup, efficiency, device-hour ratio and time saved from two wall times of one device
    type (worked examples, docs)."""
    s = hours_base / hours_new
    ratio = devices_new / devices_base
    return {"speedup": s, "efficiency": s / ratio, "device_hours_ratio": ratio / s, "time_saved": hours_base - hours_new}
