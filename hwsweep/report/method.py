"""The report's method text as the runs were made: workflow/report/workflow.rst says the global batch, the schedule
and the precision are the recipe's on every hardware, which a user's script that received no flag for some of them
(the records' not_passed) makes untrue. Where the records say so, that sentence names what the recipe held and which
settings each suite's script did not receive."""

from __future__ import annotations

import json
from pathlib import Path

from hwsweep.contracts import io
from hwsweep.contracts.command import plan_value
from hwsweep.contracts.spec import TRAIN_RECORD

LOCKED = "The global batch, the schedule (in optimizer steps) and the precision are the recipe's on every hardware;"
# The settings that make the learning-rate schedule: a script that chose any of them ran a schedule of its own.
SCHEDULE = ("recipe.optimizer.lr", "recipe.schedule.warmup_steps", "recipe.schedule.min_lr_ratio")


def not_passed(matrix, results: Path = Path(".")) -> dict[str, list[str]]:
    """Per suite, the recipe settings the records of its runs say their script did not receive, in the records'
    order (suites whose records name none, or that have no record yet, are left out)."""
    out: dict[str, list[str]] = {}
    for suite in matrix.suites:
        keys: dict[str, None] = {}
        for run in matrix.runs(suite):
            try:
                record = json.loads(Path(results, run.run_dir, TRAIN_RECORD).read_text())
            except (OSError, ValueError):
                continue  # not trained, or damaged: the landing page and status say which
            keys |= dict.fromkeys(record.get("not_passed") or [])
        if keys:
            out[suite] = list(keys)
    return out


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def locked_sentence(unpassed: dict[str, list[str]]) -> str:
    """The template's LOCKED sentence as the records have it: unchanged where every script received every setting;
    otherwise what stayed the recipe's, and per suite what its script chose itself."""
    keys = {k for ks in unpassed.values() for k in ks}
    if not keys:
        return LOCKED
    held = ["the global batch", "the schedule (in optimizer steps)" if keys.isdisjoint(SCHEDULE)
            else "the number of optimizer steps"]  # fmt: skip
    held += [] if "recipe.precision" in keys else ["the precision"]
    chose = "; ".join(f"the script of suite ``{suite}`` received no flag for "
                      f"{_and([f'``{plan_value(k)}``' for k in ks])}" for suite, ks in unpassed.items())  # fmt: skip
    said = _and(held)
    return (f"{said[0].upper()}{said[1:]} are the recipe's on every hardware ({chose}: it used its own values "
            f"there, the same on every hardware only as far as its own defaults are; the records' ``not_passed``);")


def template(source: Path, matrix, path: Path, results: Path = Path(".")) -> Path:
    """The method template (workflow.rst) written to `path` with LOCKED as the records have it."""
    text = Path(source).read_text(encoding="utf-8")
    io.write_text(path, text.replace(LOCKED, locked_sentence(not_passed(matrix, results))))
    return path
