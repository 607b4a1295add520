"""Identical repeats (issue 68): seeds whose runs came out the same are repeats, not seeds, whatever the trainer's
flags say (a built-in trainer's seed that changes nothing the run does: six byte-identical runs were `seeded`).

A cell's runs (suite x variant x hardware, >= 2 seeds) are identical when every seed logged the same learning
curves, value for value as recorded (the loss and each declared metric's curve: a curve of timings would differ
between repeats and is no part of it), and the same final value of every declared metric. aggregate marks them
unseeded (runs.csv `seeded` False) with the reason in `seeded_note`: the comparisons then pair nothing, test no
metric from them (stats.REPEATS), and say a speedup's interval is timing noise only (stats.TIMING_ONLY)."""

from __future__ import annotations

import pandas as pd

from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.target import curve_keys

IDENTICAL = "the same curves and metrics on every seed: identical repeats, not seeds"


def learning_curves(metrics: list[Metric]) -> set[str]:
    """The curves that say what a run learned: the loss and every declared metric's per-step series."""
    return {"loss"} | {key for m in metrics for key in curve_keys(m)}


def identical_cells(runs: pd.DataFrame, curves: pd.DataFrame, metrics: list[Metric]) -> set[tuple]:
    """The cells (suite, variant, hardware) whose >= 2 seeds are identical repeats (see the module)."""
    if curves.empty or runs.empty:
        return set()
    learned = curves[curves.metric.isin(learning_curves(metrics))]
    names = [m.name for m in metrics if m.name in runs]
    out = set()
    for cell, frame in runs.groupby(["suite", "variant", "hardware"], sort=False):
        seeds = sorted(set(frame.seed))
        mine = learned[(learned.suite == cell[0]) & (learned.variant == cell[1]) & (learned.hardware == cell[2])]
        if len(seeds) < 2 or mine.empty:  # one seed, or nothing logged to compare: no evidence either way
            continue
        series = {s: tuple(map(tuple, c.sort_values(["metric", "step"])[["metric", "step", "value"]].to_numpy()))
                  for s, c in mine.groupby("seed")}  # fmt: skip
        values = frame[names].apply(pd.to_numeric, errors="coerce").fillna(-1e308)  # a missing value: one value
        finals = {tuple(r) for r in values.to_numpy().tolist()}
        if len(series) == len(seeds) and len(set(series.values())) == 1 and len(finals) == 1:
            out.add(cell)
    return out


def mark(runs: pd.DataFrame, curves: pd.DataFrame, metrics: list[Metric]) -> pd.DataFrame:
    """runs with `seeded` False and `seeded_note` IDENTICAL for the runs of identical cells ('' elsewhere)."""
    runs = runs.copy()
    cells = identical_cells(runs, curves, metrics)
    keys = list(zip(runs.suite, runs.variant, runs.hardware))
    same = pd.Series([k in cells for k in keys], index=runs.index, dtype=bool)
    runs["seeded"] = (runs.seeded.astype(bool) if "seeded" in runs else True) & ~same
    runs["seeded_note"] = same.map({True: IDENTICAL, False: ""})
    return runs
