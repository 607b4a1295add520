"""The figures of docs/hrm.md and docs/benchmarks.md for the CPU study, from a finished run of it.

    /usr/bin/time -f %e snakemake --profile profiles/local --configfile config/hrm_cpu.yaml \
        --replace-workflow-config all                      # prints the wall seconds last
    snakemake --configfile config/hrm_cpu.yaml --replace-workflow-config --report report.html
    .venv/bin/python bench/hrm_study.py --wall-seconds 900 > /tmp/hrm_study.md

Run in the folder that ran the study (results/, benchmarks/, .snakemake/hwsweep/landing.rst). Prints
markdown: where and when it ran (commit, torch, cores), the measured time, each suite's landing-page
sentences as the report gives them, the variant comparisons with their intervals, the baseline's
hardware comparison and time to target, and the per-run means (exact and token accuracy, supervised
segments and FLOPs per training sample, training seconds). Nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
from pathlib import Path

import pandas as pd

RUN_COLUMNS = ["exact_accuracy", "token_accuracy", "segments_per_sample", "flops_per_sample", "train_seconds"]


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return (done.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def _table(frame: pd.DataFrame) -> list[str]:
    def cell(v) -> str:
        if isinstance(v, float):
            return "" if pd.isna(v) else f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.is_file() else pd.DataFrame()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--landing", default=".snakemake/hwsweep/landing.rst")
    ap.add_argument("--wall-seconds", type=float, help="the workflow's measured wall clock (time's output)")
    args = ap.parse_args()
    results = Path(args.results)

    import torch

    out = [f"Commit {_commit()}, torch {torch.__version__}, {platform.machine()} with {os.cpu_count()} cores, "
           f"{datetime.date.today().isoformat()}."]  # fmt: skip
    runs = _read(results / "runs.csv")
    train = runs.train_seconds.sum() if "train_seconds" in runs else float("nan")
    if args.wall_seconds:
        out.append(f"The whole workflow took **{args.wall_seconds / 60:.1f} minutes** of wall clock ({len(runs)} "
                   f"training runs, their training alone {train / 60:.1f} process-minutes).")  # fmt: skip

    landing = Path(args.landing)
    if landing.is_file():
        text = landing.read_text()
        body = text.split("What the runs show", 1)[-1].split("{% endraw %}", 1)[0]  # the template follows
        out += ["", "### What the report's landing page says", "", *[ln for ln in body.splitlines()
                                                                      if ln.strip() and set(ln) != {"="}]]  # fmt: skip

    variants = _read(results / "variants.csv")
    if len(variants):
        v = variants[variants.primary.astype(bool)]
        v = v.assign(interval=[f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(v.ci_low, v.ci_high)])
        out += ["", "### Variants against each suite's reference (primary metrics)", ""]
        out += _table(v[["suite", "variant", "reference", "metric", "n", "mean", "reference_mean", "difference",
                         "interval", "verdict"]])  # fmt: skip

    compare = _read(results / "compare.csv")
    if len(compare):
        c = compare[compare.primary.astype(bool)]
        c = c.assign(interval=[f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(c.ci_low, c.ci_high)])
        out += ["", "### Across suites (`compare:`)", ""]
        out += _table(c[["comparison", "metric", "mean", "reference_mean", "difference", "interval", "verdict",
                         "training_flops", "reference_training_flops"]])  # fmt: skip

    comparison = _read(results / "comparison.csv")
    speedup = _read(results / "speedup.csv")
    if len(speedup):
        out += ["", "### Hardware (the baseline suite)", ""]
        keep = [c for c in ("suite", "variant", "hardware", "exact_accuracy_verdict", "token_accuracy_verdict")
                if c in comparison]  # fmt: skip
        out += _table(comparison[~comparison.baseline.astype(bool)][keep]) + [""]
        keep = [c for c in ("suite", "hardware", "n_pairs", "speedup", "speedup_ci_low", "speedup_ci_high",
                            "device_hours_ratio") if c in speedup]  # fmt: skip
        out += _table(speedup[speedup.speedup_ci_low != speedup.speedup_ci_high][keep])  # not the baselines' own 1

    for path in sorted(results.glob("*/target_comparison.csv")):
        out += ["", f"### Time to target ({path.parent.name})", ""]
        frame = pd.read_csv(path)
        keep = [c for c in ("hardware", "metric", "target", "n_reached", "n_runs", "steps_to_target_median",
                            "steps_ratio", "steps_ci_low", "steps_ci_high", "steps_verdict", "rcp_flag", "speedup",
                            "speedup_ci_low", "speedup_ci_high", "cost_ratio") if c in frame]  # fmt: skip
        out += _table(frame[keep])

    if len(runs):
        present = [c for c in RUN_COLUMNS if c in runs]
        means = runs.groupby(["suite", "variant", "hardware"], sort=False)[present].mean().reset_index()
        out += ["", "### Per cell, the mean over seeds", ""] + _table(means)
    print("\n".join(out))


if __name__ == "__main__":
    main()
