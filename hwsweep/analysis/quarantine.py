"""Bring a suite's files to one consistent state before snakemake decides what to run; the workflow calls
this while it builds the DAG of `all` (or of a suite), never `status`, which only reports.

- spec.json is written here, from the config, for a run that has none (no job writes it: a job's script would
  look newer than a finished sweep copied elsewhere and redo it); one that is not the config's spec (damaged,
  edited, cut short) is rewritten. When the run's record was made from exactly that spec, the file gets back a
  time before the record. The workflow takes spec.json as an ancient input besides: a run is identified by its
  spec's content, never by modification times, so a sweep copied, moved or harvested elsewhere is still done.
- A record made from another spec (the config changed since) is stale: it is moved aside (NAME.stale), with
  the records made after it, and the line says which settings changed; the run is then retrained, never
  silently.
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
from hwsweep.contracts.command import as_passed
from hwsweep.contracts.spec import EVAL_RECORD, REPAIRS_LOG, SPEC_FILE, TRAIN_RECORD, RunSpec, canonical_json

PIPELINE = (TRAIN_RECORD, EVAL_RECORD)  # a record is made from the ones before it


def aside(path: Path, why: str = "corrupt") -> Path:
    """Where `path` goes when it is set aside: NAME.<why>, or NAME.<why>.N when that is taken."""
    target, n = path.with_name(f"{path.name}.{why}"), 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{why}.{n}")
    return target


def changed_settings(old, new, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two specs (as dicts), with both values: `key old -> new`."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += changed_settings(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix.rstrip('.')} {old!r} -> {new!r}"]


def _move_aside(spec: RunSpec, first: str, why: str, dry_run: bool) -> list[str]:
    """Move the record `first` and those made after it aside as NAME.<why>; what was (or would be) moved."""
    moved = []
    for name in PIPELINE[PIPELINE.index(first):]:
        path = spec.path(name)
        if path.exists():
            target = aside(path, why)
            if not dry_run:
                os.replace(path, target)
            moved.append(f"{path.name} -> {target.name}")
    return moved


def settle_spec(spec: RunSpec, dry_run: bool = False) -> list[str]:
    """Rewrite spec.json from the config where it differs; returns what was (or would be) done."""
    path, text = spec.path(SPEC_FILE), canonical_json(spec)
    try:
        old = path.read_text()
    except FileNotFoundError:
        old = None
        if not spec.path(TRAIN_RECORD).exists():
            if not dry_run:  # a run not started yet: its spec, said by nothing (nothing to repair)
                io.write_text(path, text)
            return []
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


def settle_run(spec: RunSpec, evaluated: bool, dry_run: bool = False,
               verdict: validation.Verdict | None = None) -> tuple[validation.Verdict, list[str]]:  # fmt: skip
    """What the run's files said (validation's verdict; a stale run's names its record) and the lines said
    moving a damaged or stale record aside. `verdict`: validation.run_state's, where the caller has it (it judges
    the records against the spec, not spec.json, so rewriting spec.json leaves it as it was)."""
    lines = settle_spec(spec, dry_run)
    verdict = verdict or validation.run_state(spec, evaluated)
    action = "would move aside" if dry_run else "moved aside"
    if verdict.state == validation.STALE:  # one line: its spec.json, rewritten above, is part of the same change
        changed = changed_settings(io.read_json(spec.path(TRAIN_RECORD)).get("spec"), as_passed(spec)[1])
        shown = "; ".join(changed[:3]) + (f"; and {len(changed) - 3} more" if len(changed) > 3 else "")
        moved = _move_aside(spec, TRAIN_RECORD, "stale", dry_run)
        lines = [f"hwsweep: {spec.run_dir} is stale: its record was made from another spec ({shown}); "
                 f"{action} ({', '.join(moved)}), the run is retrained"]  # fmt: skip
        return validation.Verdict(verdict.state, spec.path(TRAIN_RECORD), "record made from another spec"), lines
    if verdict.state != validation.CORRUPT:
        return verdict, lines
    moved = _move_aside(spec, verdict.path.name, "corrupt", dry_run)
    lines.append(f"hwsweep: {verdict.reason}; {action} ({', '.join(moved)}), the run is redone")
    return verdict, lines


def _remember(spec: RunSpec, lines: list[str]) -> None:
    """What was set right, kept in the run's repairs log for `status` (nothing else records a rewritten spec)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    for line in lines:
        io.append_line(spec.log_path(REPAIRS_LOG), f"{stamp} {line.removeprefix('hwsweep: ')}")


def repairs(spec: RunSpec, evaluated: bool, verdict: validation.Verdict | None = None) -> list[str]:
    """The repairs of a run that `status` names, each saying who makes or made it (status itself changes
    nothing): those the next `all` needs, then those earlier runs of `all` made, with their time. `verdict`: as
    settle_run's."""
    _, needed = settle_run(spec, evaluated, dry_run=True, verdict=verdict)
    try:
        seen = spec.log_path(REPAIRS_LOG).read_text(errors="replace").splitlines()
    except OSError:
        seen = []
    made = [f"an earlier all ({' '.join(line.split(' ', 2)[:2])}): {line.split(' ', 2)[2]}" for line in seen
            if line.count(" ") >= 2]  # fmt: skip
    return [f"the next all: {line.removeprefix('hwsweep: ')}" for line in needed] + made


def settle_runs(specs: list[RunSpec], tables: Path | None, evaluated: bool, dry_run: bool = False,
                verdicts: dict[str, validation.Verdict] | None = None) -> list[str]:  # fmt: skip
    """Settle runs; given the folder of their suite's tables (all its runs), drop them unless every run is done.
    `verdicts` (run folder -> settle_run's verdict), when given, gets what each run's files said before."""
    lines, verdicts = [], {} if verdicts is None else verdicts
    for spec in specs:
        verdicts[spec.run_dir], said = settle_run(spec, evaluated, dry_run)
        lines += said
        if said and not dry_run:
            _remember(spec, said)
    stale = sorted(tables.glob("*.csv")) if tables and any(verdicts[s.run_dir].state != validation.DONE for s in specs) else []
    if stale and not dry_run:
        for table in stale:
            table.unlink()
    return lines
