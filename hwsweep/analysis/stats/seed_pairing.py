"""Whether two cells are compared paired (the same seeds, and the seed drives the run) and each side's values
in that pairing."""

from __future__ import annotations

import numpy as np
import pandas as pd


def pairing(sub: pd.DataFrame, base: pd.DataFrame) -> tuple[bool, list, str]:
    """Paired when both ran the same seeds (>= 2 shared) and the seed drives the run."""
    shared = sorted(set(sub.seed) & set(base.seed))
    seeded = "seeded" not in sub or bool(sub.seeded.all() and base.seeded.all())
    if len(shared) < 2 or not seeded:
        return False, shared, "" if seeded else "not seeded: seeds are repeats, compared unpaired"
    alone = sorted(set(sub.seed) ^ set(base.seed))
    return True, shared, f"seeds {alone} not on both: left out of the pairing" if alone else ""


def seeded(sub: pd.DataFrame, base: pd.DataFrame) -> bool:
    """Whether both sides' runs are known seeded (runs.csv `seeded`: False without a seed flag, or for identical
    repeats, hwsweep.analysis.repeats); unknown (no column) is not known seeded."""
    return "seeded" in sub and bool(sub.seeded.astype(bool).all() and base.seeded.astype(bool).all())


def sides(sub: pd.DataFrame, base: pd.DataFrame, metric: str, paired: bool, shared: list) -> tuple[np.ndarray, np.ndarray]:
    """One metric's values of both sides: the shared seeds in one order when paired (a seed missing the
    value on either side left out), else every value of each."""
    if not paired:
        return sub[metric].dropna().to_numpy(float), base[metric].dropna().to_numpy(float)
    x, y = _by_seed(sub, metric, shared), _by_seed(base, metric, shared)
    ok = ~(np.isnan(x) | np.isnan(y))
    return x[ok], y[ok]


def _by_seed(frame: pd.DataFrame, metric: str, seeds: list) -> np.ndarray:
    """The metric's values of `seeds`, in their order, by a mapping where each seed has one run (a cell's runs: a
    pandas index per cell and metric cost milliseconds, most of the equivalence table's time over 1,000 cells); by
    that index otherwise, as before."""
    keys, values = frame.seed.tolist(), frame[metric].to_numpy(float)
    if len(set(keys)) < len(keys):
        return pd.Series(values, index=keys).loc[seeds].to_numpy(float)
    found = dict(zip(keys, values))
    return np.array([found[s] for s in seeds], float)
