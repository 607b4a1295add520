"""One suite's records -> its tables: runs, curves, equivalence (with diagnosis), speedup, comparison."""

from __future__ import annotations

from hwsweep import diagnose, io, records, stats
from hwsweep.metrics import Metric


def aggregate(train_paths, eval_paths, baseline: str, statistics: dict, metrics: list[Metric], out: dict):
    """Write the suite's tables to the paths in `out`; returns the comparison table."""
    settings = stats.Settings.of(statistics, metrics)
    runs, curves = records.load(train_paths, eval_paths, metrics)
    summary = stats.seed_summary(runs, settings)
    equivalence = stats.equivalence(runs, baseline, settings)
    diagnosis = diagnose.diagnose(runs, equivalence, baseline)
    equivalence = equivalence.merge(diagnosis[stats.CELL + ["diagnosis"]], on=stats.CELL, how="left")
    speedup = stats.speedup(runs, baseline, settings)
    comparison = stats.comparison(summary, equivalence, speedup, baseline, settings)
    comparison = comparison.merge(diagnosis[stats.CELL + ["diagnosis"]], on=stats.CELL, how="left")
    for name, frame in (("runs", runs), ("curves", curves), ("equivalence", equivalence), ("speedup", speedup),
                        ("comparison", comparison)):  # fmt: skip
        io.write_csv(frame, out[name])
    return comparison
