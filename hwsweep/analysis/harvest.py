"""Runs made elsewhere brought into this sweep (`hwsweep import OTHER`): another cluster's folder, a lent GPU
machine's, a colleague's. A run is taken only where it is a run of this config, made from the very spec this
config gives it (compared by content, as the workflow compares its own runs), with a record that passes the same
validation `all` and `status` apply; anything else is named in one line and left where it is. Nothing done here is
overwritten: a run this folder already has done keeps its records. The records travel unchanged (byte for byte),
with the run's logs: provenance per run (host, devices, versions, git commit) is what they say, and the report's
diagnosis names what differs between hardware, software versions included. Checkpoints stay behind unless the run
still needs its final one to be evaluated here."""

from __future__ import annotations

import filecmp
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from hwsweep.analysis import holders, quarantine, validation
from hwsweep.analysis.quarantine import changed_settings
from hwsweep.contracts import host, io
from hwsweep.contracts.command import as_passed
from hwsweep.contracts.spec import (EVAL_RECORD, FINAL_CHECKPOINT, FINAL_SHARDS, METRICS_FILE, SPEC_FILE, TRAIN_RECORD,
                                   RunSpec, canonical_json)

# What a run brings with it, in the order a reader trusts them: a record last, after what it was made from.
CARRIED = (METRICS_FILE, FINAL_SHARDS, FINAL_CHECKPOINT, TRAIN_RECORD, EVAL_RECORD)


@dataclass
class Harvest:
    imported: list[str] = field(default_factory=list)  # one line per run brought in, with where it was made
    refused: list[str] = field(default_factory=list)  # one line per run of OTHER left where it is, and why
    kept: int = 0  # runs this folder already has done (the same records, or its own)
    absent: int = 0  # runs of this config OTHER never made


def sweep_root(other) -> Path:
    """OTHER's sweep folder: the folder holding results/, given it or its results/."""
    other = Path(other)
    return other.parent if other.name == "results" and not (other / "results").is_dir() else other


def made_on(record: dict) -> str:
    """Where a record says its run was made: host, devices, torch (and CUDA) version, git commit."""
    p = record.get("provenance", {})
    devices = p.get("devices") or []
    where = [f"host {p.get('host', '?')}"]
    if devices:
        where.append(f"{len(devices)}x {devices[0].split(':', 1)[-1]}")
    where.append(f"torch {p.get('torch', '?')}" + (f", CUDA {p['cuda']}" if p.get("cuda") else ""))
    if p.get("git_commit"):
        where.append(f"commit {str(p['git_commit'])[:10]}")
    return ", ".join(where)


def _copy(source: Path, target: Path) -> None:
    """One file, or a folder (a sharded run's final checkpoint), whole or not at all (a copy renamed into place)."""
    if source.is_dir():
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        return
    with io.atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)


def _logs(spec: RunSpec, root: Path) -> None:
    """The run's log folder (every attempt's log), copied beside this folder's, never over a log it holds."""
    source = root / spec.log_path("x").parent
    if not source.is_dir():
        return
    target = spec.log_path("x").parent
    for path in sorted(source.rglob("*")):
        if path.is_file() and not (dest := target / path.relative_to(source)).exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            _copy(path, dest)


def harvest(specs: list[RunSpec], other, evaluated: bool, dry_run: bool = False) -> Harvest:
    """Bring OTHER's runs of `specs` (this config's, run folders relative to this sweep's root, the working
    folder) into this sweep."""
    root, out = sweep_root(other), Harvest()
    if not (root / "results").is_dir():
        raise FileNotFoundError(f"{other}: no results/ folder there; name the sweep folder another machine made")
    if os.path.realpath(root) == os.path.realpath("."):
        raise ValueError(f"{other} is this sweep's own folder; name another sweep's folder")
    launched = host.launched_specs()
    for spec in specs:
        theirs = Path(root, spec.run_dir)
        if not (theirs / TRAIN_RECORD).exists():
            out.absent += 1
            continue
        verdict = validation.run_state(spec, evaluated, root)
        name = f"{root / spec.run_dir}"
        if verdict.state == validation.STALE:
            changed = changed_settings(io.read_json(theirs / TRAIN_RECORD).get("spec"), as_passed(spec)[1])
            out.refused.append(f"{name}: made from another spec ({'; '.join(changed[:3])}); not imported: run it "
                               "here, or import from a sweep of this config")  # fmt: skip
            continue
        if verdict.state not in (validation.DONE, validation.TRAINED):
            out.refused.append(f"{name}: {verdict.state}{': ' + verdict.reason if verdict.reason else ''}; "
                               "not imported")  # fmt: skip
            continue
        mine = validation.run_state(spec, evaluated).state
        if mine in (validation.DONE, validation.TRAINED):  # trained here: this folder's own training stays
            out.kept += 1
            if not filecmp.cmp(spec.path(TRAIN_RECORD), theirs / TRAIN_RECORD, shallow=False):
                out.refused.append(f"{name}: this folder's {spec.run_dir} is {mine} already (made on "
                                   f"{made_on(io.read_json(spec.path(TRAIN_RECORD)))}); kept, not overwritten")  # fmt: skip
            continue
        writer = holders.live_writer(spec, None, launched)
        if writer is not None:
            out.refused.append(f"{name}: this folder's run is still being written by {writer[0]}; not imported")
            continue
        carried = [n for n in CARRIED if (theirs / n).exists()]
        if verdict.state == validation.DONE and evaluated:
            carried = [n for n in carried if n not in (FINAL_CHECKPOINT, FINAL_SHARDS)]  # evaluated there: not needed here
        if not dry_run:
            out.refused += quarantine.settle_run(spec, evaluated)[1]  # a damaged or stale record here: set aside
            Path(spec.run_dir).mkdir(parents=True, exist_ok=True)
            io.write_text(spec.path(SPEC_FILE), canonical_json(spec))
            if EVAL_RECORD not in carried and spec.path(EVAL_RECORD).exists():  # this folder's, of no record here
                os.replace(spec.path(EVAL_RECORD), quarantine.aside(spec.path(EVAL_RECORD), "replaced"))
            for n in carried:
                _copy(theirs / n, spec.path(n))
            _logs(spec, root)
        made = made_on(io.read_json(theirs / TRAIN_RECORD))
        todo = "" if verdict.state == validation.DONE else " (trained there, evaluated here by the next all)"
        out.imported.append(f"{spec.run_dir}: made on {made}{todo}")
    return out
