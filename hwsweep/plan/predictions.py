"""The predictions `hwsweep recommend` made (results/predictions.csv, one row per option and time asked) and
how they came out: for every finished run that was predicted, the predicted startup + training seconds and its
interval against the seconds the run took (its train.json), whether the interval held it (coverage), and the
predicted training cost against the report's (world size x train_seconds x price per device-hour).

A run is matched to the newest prediction of its suite, variant, hardware name, device type and device count made
before its train.json was written. The queue wait is not checked: a run's records do not hold when it was queued.
"""

from __future__ import annotations

import csv
import os
from datetime import datetime
from pathlib import Path

from hwsweep.contracts import catalog, io
from hwsweep.contracts.spec import PREDICTIONS_FILE
from hwsweep.plan.estimate import step_timing

PREDICTIONS = Path(PREDICTIONS_FILE)
COLUMNS = [
    "predicted_at", "suite", "variant", "hardware", "gpu_type", "world_size", "partition", "rank", "basis", "detail",
    "steps", "step_seconds", "step_low", "step_high", "startup_seconds", "run_seconds", "run_low", "run_high",
    "job_start_seconds", "eval_seconds", "wait_seconds", "wait_note", "time_to_result_seconds", "cost", "currency",
]  # fmt: skip
VS_COLUMNS = [
    "suite", "variant", "hardware", "seed", "basis", "predicted_at", "predicted_seconds", "predicted_low",
    "predicted_high", "actual_seconds", "ratio", "covered", "predicted_cost", "actual_cost", "currency",
]  # fmt: skip
KEY = ("suite", "variant", "hardware", "gpu_type", "world_size")


def read(path: Path = PREDICTIONS) -> list[dict]:
    """Every prediction recorded in `path`; [] where there is none (or it does not read)."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return []


def append(rows: list[dict], path: Path = PREDICTIONS) -> None:
    """Add `rows` to the record, rewritten whole and atomically (a reader never sees half a file)."""
    kept = read(path) + rows
    with io.atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: "" if r.get(k) is None else r.get(k) for k in COLUMNS} for r in kept)


def _number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value else None


def matching(record: dict, predictions: list[dict], written: float) -> dict | None:
    """The newest prediction for the record's run made before `written` (its train.json's time)."""
    plan, hw = record.get("plan", {}), record.get("spec", {}).get("hardware", {})
    key = (record.get("suite"), record.get("variant"), record.get("hardware"), hw.get("gpu_type"),
           str(plan.get("world_size")))  # fmt: skip
    before = []
    for p in predictions:
        try:
            made = datetime.fromisoformat(p["predicted_at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            continue
        if tuple(p.get(k) for k in KEY) == key and made <= written:
            before.append((made, p))
    return max(before, key=lambda x: x[0])[1] if before else None


def versus(train_records, predictions: list[dict]) -> list[dict]:
    """One row per finished run (train.json paths) that a prediction names (VS_COLUMNS)."""
    out = []
    for path in train_records:
        try:
            record = io.read_json(path)
        except (OSError, ValueError):
            continue
        timing = step_timing(record)
        found = matching(record, predictions, os.path.getmtime(path))
        if record.get("status") != "complete" or timing is None or found is None:
            continue
        per_step, startup = timing
        steps = int(record["plan"]["steps"])
        actual = startup + steps * per_step
        guess, low, high = (_number(found[k]) for k in ("run_seconds", "run_low", "run_high"))
        hw = record["spec"]["hardware"]
        price = catalog.price_per_hour(hw["gpu_type"], hw.get("price_per_hour"))
        world = int(record["plan"]["world_size"])
        actual_cost = None if price is None else world * float(record["train_seconds"]) / 3600 * price
        out.append({
            "suite": record["suite"], "variant": record["variant"], "hardware": record["hardware"],
            "seed": record["seed"], "basis": found["basis"], "predicted_at": found["predicted_at"],
            "predicted_seconds": guess, "predicted_low": low, "predicted_high": high, "actual_seconds": actual,
            "ratio": None if guess is None else guess / actual,
            "covered": None if low is None or high is None else low <= actual <= high,
            "predicted_cost": _number(found.get("cost")), "actual_cost": actual_cost, "currency": catalog.CURRENCY,
        })  # fmt: skip
    return out


def coverage(rows: list[dict]) -> str:
    """'3 of 4 finished runs inside their predicted interval (75%)', per basis where there are several."""
    judged = [r for r in rows if r["covered"] is not None]
    if not judged:
        return "no finished run was predicted by hwsweep recommend"

    def words(part):
        inside = sum(bool(r["covered"]) for r in part)
        return f"{inside} of {len(part)} inside their predicted interval ({100 * inside / len(part):.0f}%)"

    bases = sorted({r["basis"] for r in judged})
    each = "; ".join(f"{b}: {words([r for r in judged if r['basis'] == b])}" for b in bases) if len(bases) > 1 else ""
    return f"finished runs predicted: {words(judged)}" + (f" [{each}]" if each else "")


def write_versus(train_records, predictions_path, path) -> list[dict]:
    """results/{suite}/predicted_vs_actual.csv (VS_COLUMNS) from the suite's train.json files; its rows."""
    rows = versus(train_records, read(Path(predictions_path)) if predictions_path else [])
    with io.atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, VS_COLUMNS)
        writer.writeheader()
        writer.writerows({k: "" if r[k] is None else r[k] for k in VS_COLUMNS} for r in rows)
    return rows
