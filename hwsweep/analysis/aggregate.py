"""One suite's records -> its tables: runs, curves, equivalence (with diagnosis), speedup, comparison and variants;
every suite's runs -> the comparisons across suites the config declares."""

from __future__ import annotations

import pandas as pd

from hwsweep.analysis import diagnose, repeats, stats, variants
from hwsweep.contracts import catalog, io, records
from hwsweep.contracts.metrics import Metric


def prices_of(hardware: dict) -> dict:
    """Hardware name -> price per device-hour (the entry's own, else the catalog's list price;
    None where neither is known), from the resolved hardware entries."""
    return {name: catalog.price_per_hour(hw.gpu_type, hw.price_per_hour) for name, hw in hardware.items()}


def fixed_steps(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that trained their whole schedule. A run stopped at its targets (schedule.stop_at: target,
    stopped_at_step set) has no metrics or time at the schedule's end: the fixed-steps comparisons leave it out."""
    return runs[runs.stopped_at_step.isna()] if "stopped_at_step" in runs else runs


def aggregate(train_paths, eval_paths, baseline: str, statistics: dict, metrics: list[Metric], out: dict,
              prices: dict | None = None, reference: str | None = None):  # fmt: skip
    """Write the suite's tables to the paths in `out`; returns the comparison table. `prices`:
    hardware name -> price per device-hour in catalog.CURRENCY; left out, each run's device
    type's catalog list price. `reference`: the variant the others are compared with (out["variants"]);
    left out, the first."""
    settings = stats.Settings.of(statistics, metrics)
    runs, curves = records.load(train_paths, eval_paths, metrics)
    runs = repeats.mark(runs, curves, metrics)  # seeds that gave identical runs: unseeded, whatever the flags say
    if prices is None:
        prices = {hw: catalog.price_per_hour(gpu) for hw, gpu in zip(runs.hardware, runs.gpu_type)}
    everything, runs = runs, fixed_steps(runs)
    summary = stats.seed_summary(runs, settings)
    equivalence = stats.equivalence(runs, baseline, settings)
    diagnosis = diagnose.diagnose(runs, equivalence, baseline)
    equivalence = equivalence.merge(diagnosis[stats.CELL + ["diagnosis"]], on=stats.CELL, how="left")
    speedup = stats.speedup(runs, baseline, settings, prices, catalog.CURRENCY)
    comparison = stats.comparison(summary, equivalence, speedup, baseline, settings)
    comparison = comparison.merge(diagnosis[stats.CELL + ["diagnosis"]], on=stats.CELL, how="left")
    comparison = comparison.merge(stats.spread_check(runs, settings), on=stats.CELL, how="left")
    tables = {"runs": everything, "curves": curves, "equivalence": equivalence, "speedup": speedup, "comparison": comparison}
    if "variants" in out:
        first = runs.variant.iloc[0] if len(runs) else ""
        tables["variants"] = variants.variants(runs, reference or first, settings)
    for name, frame in tables.items():
        io.write_csv(frame, out[name])
    return comparison


def cross(runs_paths, compare: dict, statistics: dict, metrics: list[Metric], out: str) -> pd.DataFrame:
    """The config's comparisons across suites (variants.cross) from the suites' runs.csv, written to `out`."""
    runs = fixed_steps(pd.concat([pd.read_csv(p) for p in runs_paths], ignore_index=True))
    frame = variants.cross(runs, compare, stats.Settings.of(statistics, metrics))
    io.write_csv(frame, out)
    return frame
