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
    # the metric's column by seed (not set_index, which copies every column of the runs: a cell's cost was that)
    x = pd.Series(sub[metric].to_numpy(), index=sub.seed.to_numpy()).loc[shared]
    y = pd.Series(base[metric].to_numpy(), index=base.seed.to_numpy()).loc[shared]
    ok = x.notna().to_numpy() & y.notna().to_numpy()
    return x.to_numpy(float)[ok], y.to_numpy(float)[ok]
