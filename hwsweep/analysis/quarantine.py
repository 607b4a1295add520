"""Bring a suite's files to one consistent state before snakemake decides what to run; the workflow calls
this while it builds the DAG of `all` (or of a suite), never `status`, which only reports.

- spec.json that is not the config's spec (damaged, edited, cut short) is rewritten from the config. When
  the run's record was made from exactly that spec, the file gets back a time before the record, so
  snakemake does not retrain a good run (and delete its record) because an input looks newer.
- A damaged or implausible record (hwsweep.analysis.validation says why) is moved aside, kept as NAME.corrupt
  (.corrupt.1, ... when taken), with the records made after it; the run is then redone by the same `all`.
- A suite whose runs are not all done loses its tables (results/SUITE/*.csv, cheap to remake): snakemake
  would not rebuild a missing record while the tables made from it exist, and status and `all` would
  disagree about what is done."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from hwsweep.analysis import validation
from hwsweep.contracts import io
from hwsweep.contracts.spec import EVAL_RECORD, REPAIRS_LOG, SPEC_FILE, TRAIN_RECORD, RunSpec, canonical_json

PIPELINE = (TRAIN_RECORD, EVAL_RECORD)  # a record is made from the ones before it


def _aside(path: Path) -> Path:
    target, n = path.with_name(f"{path.name}.corrupt"), 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt.{n}")
    return target


def settle_spec(spec: RunSpec, dry_run: bool = False) -> list[str]:
    """Rewrite spec.json from the config where it differs; returns what was (or would be) done."""
    path, text = spec.path(SPEC_FILE), canonical_json(spec)
    try:
        old = path.read_text()
    except FileNotFoundError:
        old = None
        if not spec.path(TRAIN_RECORD).exists():
            return []  # never made: the spec rule writes it
    except (OSError, UnicodeDecodeError):
        old = ""
    if old == text:
        return []
    try:
        RunSpec.from_dict(json.loads(old or ""))
        state = "not the config's spec (edited, or from an earlier config)"
    except (ValueError, TypeError):
        state = "missing" if old is None else "damaged"
    lines = [f"hwsweep: {path} is {state}; {'would rewrite' if dry_run else 'rewritten'} from the config"]
    if dry_run:
        return lines
    io.write_text(path, text)
    record = spec.path(TRAIN_RECORD)
    if validation.run_state(spec, evaluated=False).state == validation.DONE:
        # The record was made from this very spec: the spec is older than it, as it was.
        before = record.stat().st_mtime - 1
        os.utime(path, (before, before))
    return lines


def settle_run(spec: RunSpec, evaluated: bool, dry_run: bool = False) -> tuple[str, list[str]]:
    """The run's state after moving a damaged record aside; returns (state, lines said)."""
    lines = settle_spec(spec, dry_run)
    verdict = validation.run_state(spec, evaluated)
    if verdict.state != validation.CORRUPT:
        return verdict.state, lines
    moved = []
    for name in PIPELINE[PIPELINE.index(verdict.path.name):]:
        path = spec.path(name)
        if path.exists():
            target = _aside(path)
            if not dry_run:
                os.replace(path, target)
            moved.append(f"{path.name} -> {target.name}")
    action = "would move aside" if dry_run else "moved aside"
    lines.append(f"hwsweep: {verdict.reason}; {action} ({', '.join(moved)}), the run is redone")
    return verdict.state, lines


def _remember(spec: RunSpec, lines: list[str]) -> None:
    """What was set right, kept in the run's repairs log for `status` (nothing else records a rewritten spec)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    for line in lines:
        io.append_line(spec.log_path(REPAIRS_LOG), f"{stamp} {line.removeprefix('hwsweep: ')}")


def repairs(spec: RunSpec, evaluated: bool) -> list[str]:
    """The repairs of a run that `status` names, each saying who makes or made it (status itself changes
    nothing): those the next `all` needs, then those earlier runs of `all` made, with their time."""
    _, needed = settle_run(spec, evaluated, dry_run=True)
    try:
        seen = spec.log_path(REPAIRS_LOG).read_text(errors="replace").splitlines()
    except OSError:
        seen = []
    made = [f"an earlier all ({' '.join(line.split(' ', 2)[:2])}): {line.split(' ', 2)[2]}" for line in seen
            if line.count(" ") >= 2]  # fmt: skip
    return [f"the next all: {line.removeprefix('hwsweep: ')}" for line in needed] + made


def settle_runs(specs: list[RunSpec], tables: Path | None, evaluated: bool, dry_run: bool = False) -> list[str]:
    """Settle runs; given the folder of their suite's tables (all its runs), drop them unless every run is done."""
    lines, states = [], []
    for spec in specs:
        state, said = settle_run(spec, evaluated, dry_run)
        states.append(state)
        lines += said
        if said and not dry_run:
            _remember(spec, said)
    stale = sorted(tables.glob("*.csv")) if tables and any(s != validation.DONE for s in states) else []
    if stale and not dry_run:
        for table in stale:
            table.unlink()
    return lines
