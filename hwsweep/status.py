"""Progress of a sweep: which runs are done, failed, corrupt or missing, and a partial aggregate
of what has finished, for watching a long sweep (`snakemake status`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from hwsweep import io
from hwsweep.aggregate import aggregate, prices_of
from hwsweep.spec import EVAL_RECORD, LOG_DIR, TRAIN_RECORD


def _record(path: Path) -> dict | None:
    """A parsed record, or None when the file is absent; raises ValueError when it is damaged."""
    if not path.exists():
        return None
    try:
        data = io.read_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(str(e)) from None
    if not isinstance(data, dict) or ("status" in data and data["status"] != "complete"):
        raise ValueError("not a complete record")
    return data


def run_state(run, spec: dict, evaluated: bool = True) -> str:
    """done | trained | stale | corrupt | failed | missing. A damaged record is moved aside
    (*.corrupt) so the next `snakemake all` reruns that job instead of aggregating it; a record
    of an older config (stale) is not aggregated either."""
    folder = Path(run.run_dir)
    states = {}
    names = (TRAIN_RECORD, EVAL_RECORD) if evaluated else (TRAIN_RECORD,)  # in pipeline order: a damaged record takes what follows with it
    for i, name in enumerate(names):
        try:
            states[name] = _record(folder / name)
        except ValueError:
            for later in names[i:]:
                if (folder / later).exists():
                    os.replace(folder / later, folder / f"{later}.corrupt")
            return "corrupt"
    if states[TRAIN_RECORD] is not None and states[TRAIN_RECORD].get("spec") != spec:
        return "stale"
    if states[TRAIN_RECORD] and (not evaluated or states[EVAL_RECORD]):
        return "done"
    if states[TRAIN_RECORD]:
        return "trained"
    log = Path(LOG_DIR.format(suite=run.suite, variant=run.variant, hardware=run.hardware, seed=run.seed)) / "train.log"
    return "failed" if log.exists() else "missing"  # a started run without a record failed, or is still running


def write_status(matrix, folder="results/partial") -> pd.DataFrame:
    folder = Path(folder)
    evaluated = matrix.evaluation.kind != "none"
    rows = [{"suite": r.suite, "variant": r.variant, "hardware": r.hardware, "seed": r.seed,
             "state": run_state(r, matrix.spec(r.suite, r.variant, r.hardware, r.seed).to_dict(), evaluated)}
            for r in matrix.runs()]  # fmt: skip
    status = pd.DataFrame(rows)
    io.write_csv(status, folder / "status.csv")
    for suite in set(status[status.state == "corrupt"].suite):
        # Snakemake does not rebuild a missing intermediate while the tables made from it exist;
        # the suite's tables are cheap to remake, so drop them and the next run retrains the run.
        for table in Path("results", suite).glob("*.csv"):
            table.unlink()
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
                                     list(matrix.metrics), {n: folder / suite / f"{n}.csv" for n in names},
                                     prices_of(matrix.hardware)))  # fmt: skip
    combined = pd.concat(comparisons, ignore_index=True) if comparisons else pd.DataFrame(columns=["suite", "variant", "hardware"])
    # Every cell of the matrix appears, with how many of its seeds are done; missing ones say so.
    combined = cells.merge(combined, on=["suite", "variant", "hardware"], how="left")
    io.write_csv(combined, folder / "comparison.csv")
    return status
