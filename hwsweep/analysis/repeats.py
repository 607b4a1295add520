"""Identical repeats (issue 68): seeds whose runs came out the same are repeats, not seeds, whatever the trainer's
flags say (a built-in trainer's seed that changes nothing the run does: six byte-identical runs were `seeded`).

A cell's runs (suite x variant x hardware, >= 2 seeds) are identical when every seed logged the same learning
curves, value for value as recorded (the loss and each declared metric's curve: a curve of timings would differ
between repeats and is no part of it), and the same final value of every declared metric. aggregate marks them
unseeded (runs.csv `seeded` False) with the reason in `seeded_note`: the comparisons then pair nothing, test no
metric from them (stats.REPEATS), and say a speedup's interval is timing noise only (stats.TIMING_ONLY)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.target import curve_keys

IDENTICAL = "the same curves and metrics on every seed: identical repeats, not seeds"


def learning_curves(metrics: list[Metric]) -> set[str]:
    """The curves that say what a run learned: the loss and every declared metric's per-step series."""
    return {"loss"} | {key for m in metrics for key in curve_keys(m)}


CELL = ["suite", "variant", "hardware"]


def identical_cells(runs: pd.DataFrame, curves: pd.DataFrame, metrics: list[Metric]) -> set[tuple]:
    """The cells (suite, variant, hardware) whose >= 2 seeds are identical repeats (see the module). One pass over
    each frame (a groupby, then each cell's rows once): the cost grows with the runs and their logged points."""
    if curves.empty or runs.empty:
        return set()
    learned = curves[curves.metric.isin(learning_curves(metrics))]
    same = {cell: _same_curves(learned.iloc[rows]) for cell, rows in learned.groupby(CELL, sort=False).indices.items()}
    names = [m.name for m in metrics if m.name in runs]
    finals = runs[names].apply(pd.to_numeric, errors="coerce").fillna(-1e308).to_numpy(float)  # missing: one value
    out = set()
    for cell, rows in runs.groupby(CELL, sort=False).indices.items():
        seeds = runs.seed.iloc[rows].nunique()
        if seeds < 2 or cell not in same:  # one seed, or nothing logged to compare: no evidence either way
            continue
        logged, equal = same[cell]
        if logged == seeds and equal and (finals[rows] == finals[rows[0]]).all():
            out.add(cell)
    return out


def _same_curves(cell: pd.DataFrame) -> tuple[int, bool]:
    """(the seeds that logged a curve, whether each logged the same (metric, step, value) rows as the first).
    The rows sorted once by seed, metric, step and value, then compared as arrays, value for value: a seed with
    more or fewer points differs; NaN equals nothing (as a recorded value compared with ==)."""
    metric = pd.factorize(cell.metric)[0]
    seed, step, value = (cell[c].to_numpy() for c in ("seed", "step", "value"))
    order = np.lexsort((value, step, metric, seed))  # the last key sorts first
    seed, columns = seed[order], [metric[order], step[order], value[order]]
    starts = np.flatnonzero(np.r_[True, seed[1:] != seed[:-1]])
    sizes = np.diff(np.r_[starts, len(seed)])
    if (sizes != sizes[0]).any():
        return len(starts), False
    shape = (len(starts), int(sizes[0]))
    return len(starts), all((c.reshape(shape) == c[: shape[1]]).all() for c in columns)


def mark(runs: pd.DataFrame, curves: pd.DataFrame, metrics: list[Metric]) -> pd.DataFrame:
    """runs with `seeded` False and `seeded_note` IDENTICAL for the runs of identical cells ('' elsewhere)."""
    runs = runs.copy()
    cells = identical_cells(runs, curves, metrics)
    keys = list(zip(runs.suite, runs.variant, runs.hardware))
    same = pd.Series([k in cells for k in keys], index=runs.index, dtype=bool)
    runs["seeded"] = (runs.seeded.astype(bool) if "seeded" in runs else True) & ~same
    runs["seeded_note"] = same.map({True: IDENTICAL, False: ""})
    return runs
