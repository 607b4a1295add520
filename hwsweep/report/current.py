"""Whether a table under the report's "All suites" is current. A single-suite run (`snakemake suite_B`)
updates B's tables, not the tables that combine every suite (results/plan.tsv, results/comparison.csv,
results/compare.csv); a report built then would show the older ones beside a landing page that covers B.
A combined table is current when no file it is made from is newer (snakemake's own rule for rerunning a
job), it holds the names the config has now, and, for the plan, it is the plan of this config. The report
leaves out one that is not and its landing page says why."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def why_stale(table, sources=(), column: str | None = None, names=(), every: bool = True,
              text: str | None = None) -> str | None:  # fmt: skip
    """Why the existing `table` is out of date, in words, or None when it is current (or missing: nothing to
    leave out). `sources`: the files it is made from. `column`/`names`: the names its rows must all be among,
    and with `every`, all of them must have rows. `text`: what the table must read, exactly."""
    table = Path(table)
    if not table.is_file():
        return None
    if text is not None and table.read_text() != text:
        return f"{table} was made from another config"
    written = table.stat().st_mtime
    newer = [str(s) for s in sources if Path(s).is_file() and Path(s).stat().st_mtime > written]
    if newer:
        return f"{table} was written before {newer[0]}" + (f" and {len(newer) - 1} more" if len(newer) > 1 else "")
    if column is None:
        return None
    held = pd.read_csv(table, sep="\t" if table.suffix == ".tsv" else ",", usecols=[column], dtype=str)[column]
    held, names = set(held.dropna()), {str(n) for n in names}
    if held - names:
        return f"{table} holds {column} {', '.join(sorted(held - names))}, which the config no longer has"
    if every and names - held:
        return f"{table} lacks {column} {', '.join(sorted(names - held))}"
    return None
