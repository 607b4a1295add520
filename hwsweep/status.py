"""Progress of a sweep: which runs are done, trained, stale, corrupt, failed or missing (as
hwsweep.validation judges them, the same judgement `all` acts on), and a partial aggregate of what
has finished, for watching a long sweep (`snakemake status`). It reads only: a corrupt record is
moved aside by the next `all` (hwsweep.quarantine), not here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hwsweep import io
from hwsweep.aggregate import aggregate
from hwsweep.spec import EVAL_RECORD, TRAIN_RECORD
from hwsweep.validation import run_state


def write_status(matrix, folder="results/partial") -> pd.DataFrame:
    folder = Path(folder)
    evaluated = matrix.evaluation.kind != "none"
    rows = []
    for r in matrix.runs():
        verdict = run_state(matrix.spec(r.suite, r.variant, r.hardware, r.seed), evaluated)
        rows.append({"suite": r.suite, "variant": r.variant, "hardware": r.hardware, "seed": r.seed,
                     "state": verdict.state, "problem": verdict.reason})  # fmt: skip
    status = pd.DataFrame(rows)
    io.write_csv(status, folder / "status.csv")
    done = status[status.state == "done"]
    cells = status.pivot_table(index=["suite", "variant", "hardware"], columns="state", values="seed",
                               aggfunc="count", fill_value=0).reset_index()  # fmt: skip
    io.write_csv(cells, folder / "cells.csv")
    comparisons = []
    for suite, sub in done.groupby("suite", sort=False):
        dirs = [Path(matrix.spec(r.suite, r.variant, r.hardware, r.seed).run_dir) for r in sub.itertuples()]
        names = ["runs", "curves", "equivalence", "speedup", "comparison"]
        evals = [d / EVAL_RECORD for d in dirs] if evaluated else []
        comparisons.append(aggregate([d / TRAIN_RECORD for d in dirs], evals, matrix.baseline, matrix.statistics,
                                     list(matrix.metrics), {n: folder / suite / f"{n}.csv" for n in names}))  # fmt: skip
    combined = pd.concat(comparisons, ignore_index=True) if comparisons else pd.DataFrame(columns=["suite", "variant", "hardware"])
    # Every cell of the matrix appears, with how many of its seeds are done; missing ones say so.
    combined = cells.merge(combined, on=["suite", "variant", "hardware"], how="left")
    io.write_csv(combined, folder / "comparison.csv")
    return status
