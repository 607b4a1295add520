"""Progress of a sweep: which runs are done, trained, stale, corrupt, failed or missing (as
hwsweep.analysis.validation judges them, the same judgement `all` acts on; running where a run without a
record has its launcher on this node), and a partial aggregate of what has finished, for watching
a long sweep (`snakemake status`). It reads only: the next `all` moves a corrupt record aside
(hwsweep.analysis.quarantine), not this; the repairs column names what that `all` will set right and what
earlier ones did (a rewritten spec.json, records moved aside, a run retrained for a lost checkpoint); the
tracking column, which tracker did not take what a run sent it, as its records say."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from hwsweep.analysis import quarantine
from hwsweep.analysis.aggregate import aggregate, prices_of
from hwsweep.analysis.validation import FAILED, MISSING, run_state
from hwsweep.contracts import host, io
from hwsweep.contracts.spec import EVAL_RECORD, SPEC_FILE, TRAIN_RECORD
from hwsweep.contracts.tracking import delivery_problem

RUNNING = "running"


def _state(spec, evaluated: bool, launched: set[str]) -> tuple[str, str]:
    """The records' verdict; a run without a record whose launcher runs on this node is running, not failed."""
    verdict = run_state(spec, evaluated)
    if verdict.state in (FAILED, MISSING) and os.path.abspath(spec.path(SPEC_FILE)) in launched:
        return RUNNING, ""
    return verdict.state, verdict.reason


def tracking_problem(spec, evaluated: bool) -> str:
    """What the run's records say its trackers did not take ("" when each took everything, or nothing is tracked
    or recorded yet): train.json's for the training, eval.json's for the evaluation (docs/tracking.md)."""
    out = []
    for stage, name in (("train", TRAIN_RECORD), ("eval", EVAL_RECORD)):
        if stage == "eval" and not evaluated:
            continue
        try:
            problem = delivery_problem(io.read_json(spec.path(name)).get("tracking"))
        except (OSError, ValueError, AttributeError):  # no record (yet), or one the state column judges
            continue
        if problem:
            out.append(f"{stage}: {problem}")
    return " | ".join(out)


def write_status(matrix, folder="results/partial") -> pd.DataFrame:
    folder = Path(folder)
    evaluated = matrix.evaluation.kind != "none"
    rows, launched = [], host.launched_specs()
    for r in matrix.runs():
        spec = matrix.spec(r.suite, r.variant, r.hardware, r.seed)
        state, problem = _state(spec, evaluated, launched)
        rows.append({"suite": r.suite, "variant": r.variant, "hardware": r.hardware, "seed": r.seed,
                     "state": state, "problem": problem,
                     "repairs": " | ".join(quarantine.repairs(spec, evaluated)),
                     "tracking": tracking_problem(spec, evaluated)})  # fmt: skip
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
                                     list(matrix.metrics), {n: folder / suite / f"{n}.csv" for n in names},
                                     prices_of(matrix.hardware)))  # fmt: skip
    combined = pd.concat(comparisons, ignore_index=True) if comparisons else pd.DataFrame(columns=["suite", "variant", "hardware"])
    # Every cell of the matrix appears, with how many of its seeds are done; missing ones say so.
    combined = cells.merge(combined, on=["suite", "variant", "hardware"], how="left")
    io.write_csv(combined, folder / "comparison.csv")
    return status
