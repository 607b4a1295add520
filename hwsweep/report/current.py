"""Whether a table the report would show is current. A single-suite run (`snakemake suite_B`) updates B's
tables, not the tables that combine every suite (results/plan.tsv, results/comparison.csv, results/compare.csv);
a changed suite (its overrides, sweep or hardware) leaves its own tables made from runs of the older config. A
report built then would show those beside a landing page that covers the config of now. A table is current when
no file it is made from is newer (snakemake's own rule for rerunning a job) or out of date itself, it holds the
names the config has now, for the plan, it is the plan of this config, and for a suite's tables, every run of the
suite is done as `status` judges it (hwsweep.analysis.validation: a record of an older config is stale). The
report leaves out one that is not and its landing page says why."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hwsweep.analysis import validation
from hwsweep.contracts.spec import EVAL_RECORD, TRAIN_RECORD


def why_stale(table, sources=(), column: str | None = None, names=(), every: bool = True,
              text: str | None = None, outdated=()) -> str | None:  # fmt: skip
    """Why the existing `table` is out of date, in words, or None when it is current (or missing: nothing to
    leave out). `sources`: the files it is made from. `column`/`names`: the names its rows must all be among,
    and with `every`, all of them must have rows. `text`: what the table must read, exactly. `outdated`: files
    known to be out of date themselves; a table made from one is too."""
    table = Path(table)
    if not table.is_file():
        return None
    if text is not None and table.read_text() != text:
        return f"{table} was made from another config"
    behind = [str(s) for s in sources if str(s) in {str(o) for o in outdated}]
    if behind:
        return f"{table} was made from {_and_more(behind)}, {'which is' if len(behind) == 1 else 'all'} out of date"
    written = table.stat().st_mtime
    newer = [str(s) for s in sources if Path(s).is_file() and Path(s).stat().st_mtime > written]
    if newer:
        return f"{table} was written before {_and_more(newer)}"
    if column is None:
        return None
    held = pd.read_csv(table, sep="\t" if table.suffix == ".tsv" else ",", usecols=[column], dtype=str)[column]
    held, names = set(held.dropna()), {str(n) for n in names}
    if held - names:
        return f"{table} holds {column} {', '.join(sorted(held - names))}, which the config no longer has"
    if every and names - held:
        return f"{table} lacks {column} {', '.join(sorted(names - held))}"
    return None


def _and_more(paths: list[str]) -> str:
    return paths[0] + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")


# A run's state (hwsweep.analysis.validation) other than done, as the reason its suite's tables are out of date.
NOT_DONE = {validation.STALE: "trained under another config", validation.CORRUPT: "damaged",
            validation.FAILED: "failed", validation.MISSING: "missing", validation.TRAINED: "not evaluated"}  # fmt: skip


def suite_table(suite: str, results: Path = Path("results")) -> Path:
    """The suite's table that stands for all of its outputs: the aggregate writes it with the other tables, and
    the pages and figures are made from them."""
    return results / suite / "comparison.csv"


def why_suite_stale(matrix, suite: str, results: Path = Path("results"), stamps: dict | None = None) -> str | None:
    """Why the tables of `suite` are out of date, or None when they are current (or missing). They are made from
    the suite's runs: every run must be done as `status` judges it, for the config of now, and no record newer;
    and with the settings of now: `stamps`, the file each job writes beside its tables -> what it must read."""
    table = suite_table(suite, results)
    if not table.is_file():
        return None
    evaluated = matrix.evaluation.kind != "none"
    specs = [matrix.spec(r.suite, r.variant, r.hardware, r.seed) for r in matrix.runs(suite)]
    states = [validation.run_state(spec, evaluated).state for spec in specs]
    counts = {state: states.count(state) for state in NOT_DONE if state in states}
    if counts:
        runs = ", ".join(f"{n} {'was' if n == 1 else 'were'} {NOT_DONE[state]}" for state, n in counts.items())
        return (f"{table} is out of date: of the {len(states)} runs suite {suite} has now, {runs} "
                "(`snakemake -f status` names them)")  # fmt: skip
    for stamp, text in (stamps or {}).items():
        if not Path(stamp).is_file():
            return f"{table} has no record of the settings its suite's tables were made with ({stamp} is missing)"
        if why_stale(stamp, text=text):
            return (f"{table} was made with other settings than this config's (baseline, statistics, metrics, "
                    f"prices, references or targets; {stamp})")  # fmt: skip
    records = [Path(spec.run_dir) / name for spec in specs for name in (TRAIN_RECORD, EVAL_RECORD)]
    return why_stale(table, records)
