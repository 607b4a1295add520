"""The figures of docs/hrm.md and docs/benchmarks.md for the CPU study, from a finished run of it.

    /usr/bin/time -f %e snakemake --profile profiles/local --configfile config/hrm_cpu.yaml \
        --replace-workflow-config all                      # prints the wall seconds last
    snakemake --configfile config/hrm_cpu.yaml --replace-workflow-config --report report.html
    .venv/bin/python bench/hrm_study.py --wall-seconds 900 > /tmp/hrm_study.md

Run in the folder that ran the study (results/, benchmarks/, .snakemake/hwsweep/landing.rst), or one suite of it
(`snakemake ... suite_puzzle_embeddings`: its tables are results/<suite>/ only; the others' questions then say they
are not in this run's tables). Prints markdown: where and when it ran (commit, torch, cores), the measured time, seed
001's six questions each with its interval and verdict (or "not decided at this size"), each suite's landing-page
sentences as the report gives them (its words, not its raw-HTML glance blocks), the variant comparisons with their
intervals (primary metrics, then the secondary ones the questions read), the baseline's hardware comparison and time
to target, the per-run means (accuracies, pass@k, supervised segments and FLOPs per training sample, training
seconds), ACT at evaluation (accuracy after each segment, all segments as the original against halting where the Q
head says, with paired intervals), and seen against unseen puzzles. Nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from hwsweep.analysis import stats

RUN_COLUMNS = ["exact_accuracy", "token_accuracy", "pass_at_1", "pass_at_2", "pass_at_10", "segments_per_sample",
               "flops_per_sample", "train_seconds"]  # fmt: skip
# Secondary metrics the questions read: their variant comparisons are printed beside the primary ones.
SECONDARY = ["unseen_exact_accuracy", "unseen_token_accuracy", "halted_exact_accuracy", "pass_at_1", "pass_at_2"]
UNDECIDED = "not decided at this size"
CONFIDENCE = 0.95


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


def _collected(results: Path, name: str) -> tuple[pd.DataFrame, list[str]]:
    """(results/<name> where the whole study collected it, else every suite's own results/<suite>/<name> stacked,
    as a run of single suites leaves them; the suites read)."""
    if (results / name).is_file():
        frame = pd.read_csv(results / name)
        return frame, sorted(set(frame.suite)) if "suite" in frame else []
    paths = sorted(results.glob(f"*/{name}"))
    frames = [pd.read_csv(p) for p in paths]
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), [p.parent.name for p in paths]


def _interval(lo, hi, scale: float = 100.0, unit: str = " points") -> str:
    return f"95% CI {lo * scale:+.3g} to {hi * scale:+.3g}{unit}"


def _row(frame: pd.DataFrame, **where) -> pd.Series | None:
    if not len(frame) or not all(k in frame for k in where):
        return None
    rows = frame[np.logical_and.reduce([frame[k] == v for k, v in where.items()])]
    return rows.iloc[0] if len(rows) else None


def _compared(row: pd.Series | None, what: str) -> str:
    """'what: +12.2 points (95% CI +5.8 to +18.7), better' or not decided, from a variants.csv / compare.csv row."""
    if row is None:
        return f"{what}: not in this run's tables"
    verdict = str(row.verdict)
    decided = verdict in ("better", "worse", "equivalent")
    if verdict == "not compared" and not (pd.isna(row.ci_low) or pd.isna(row.ci_high)):
        decided = row.ci_low > 0 or row.ci_high < 0  # no margin: the interval alone
        verdict = ("higher" if row.ci_low > 0 else "lower") if decided else verdict
    note = row.note if isinstance(row.get("note"), str) and row.note else f"verdict {verdict}"
    if pd.isna(row.difference):
        return f"{what}: no difference to test ({note})"
    if pd.isna(row.ci_low) or pd.isna(row.ci_high):  # e.g. every seed identical on both sides
        return f"{what}: {row.difference * 100:+.3g} points, no interval ({note}), {UNDECIDED}"
    shown = f"{row.difference * 100:+.3g} points ({_interval(row.ci_low, row.ci_high, unit='')})"
    return f"{what}: {shown}, " + (f"**{verdict}**" if decided else UNDECIDED)


def paired(runs: pd.DataFrame, a: str, b: str, **where) -> dict | None:
    """a - b within the same runs (paired by seed): its mean, 95% CI and n; None with fewer than 2 runs."""
    sub = runs[np.logical_and.reduce([runs[k] == v for k, v in where.items()])] if where else runs
    if a not in sub or b not in sub:
        return None
    sub = sub.dropna(subset=[a, b])
    if len(sub) < 2:
        return None
    out = stats.compare(sub[a].to_numpy(), sub[b].to_numpy(), None, CONFIDENCE, paired=True)
    return {"n": len(sub), "difference": out["difference"], "ci_low": out["ci_low"], "ci_high": out["ci_high"]}


def _paired_words(result: dict | None, what: str) -> str:
    if result is None:
        return f"{what}: fewer than 2 runs, no interval"
    lo, hi = result["ci_low"], result["ci_high"]
    decided = lo > 0 or hi < 0
    return (f"{what}: {result['difference'] * 100:+.3g} points ({_interval(lo, hi, unit='')}, {result['n']} runs "
            "paired) " + ("**" + ("higher" if lo > 0 else "lower") + "**" if decided else UNDECIDED))  # fmt: skip


def _mean_words(runs: pd.DataFrame, column: str, what: str, **where) -> str:
    sub = runs[np.logical_and.reduce([runs[k] == v for k, v in where.items()])] if len(runs) else runs
    if column not in sub or sub[column].dropna().empty:
        return f"{what}: not measured"
    values = sub[column].dropna().to_numpy()
    lo, hi = stats.mean_ci(values[None, :], CONFIDENCE)
    # An accuracy lies in [0, 1]: cutting the t interval there drops only values it cannot take (coverage kept).
    cut = " cut at the metric's bounds" if lo[0] < 0 or hi[0] > 1 else ""
    band = (f" (95% CI {max(lo[0], 0.0) * 100:.3g} to {min(hi[0], 1.0) * 100:.3g}{cut})" if len(values) > 1
            else " (one run: no interval)")
    return f"{what}: {values.mean() * 100:.3g}{band}"


def questions(runs: pd.DataFrame, variants: pd.DataFrame, compare: pd.DataFrame) -> list[str]:
    """Seed 001's six "expected outcomes", each answered from the study's tables: an interval and its verdict, or
    "not decided at this size" where the interval includes no difference or the study cannot ask it."""
    v = lambda suite, variant, metric: _row(variants, suite=suite, variant=variant, metric=metric)  # noqa: E731

    def others(frame: pd.DataFrame, suite: str) -> list[str]:  # a suite's variants in a table, sorted
        return sorted(set(frame.variant[frame.suite == suite])) if len(frame) else []

    acts = others(runs, "act_alternatives")
    act = "act_mode-act" if "act_mode-act" in acts else None
    embedded = others(variants, "puzzle_embeddings")
    out = [
        "1. **Baseline: the paper's pass@1?** Not the paper's benchmark (a CPU-sized sudoku, not sudoku-extreme or "
        "ARC), so not a replication; what the baseline reaches, in points, mean over seeds on cpu1: "
        + "; ".join(_mean_words(runs, c, n, suite="baseline", hardware="cpu1")
                    for c, n in (("exact_accuracy", "exact accuracy"), ("pass_at_1", "pass@1 over the views"))),
        "2. **Augmentation: diminishing returns after 300?** Two points of the curve only (0 and 32 copies): "
        + ("; ".join(_compared(v("augmentation", x, m), f"{x} against augmentation-0, {m}")
                     for x in others(variants, "augmentation") for m in ("exact_accuracy", "pass_at_2"))
           or "the augmentation suite is not in this run's tables")
        + f"; whether returns diminish after 300: {UNDECIDED} (no such sizes here).",
        "3. **Hierarchy: 2x2 modest benefits, 4x4 overkill?** "
        + _compared(v("hierarchical", "h_cycles-2_l_cycles-2", "exact_accuracy"), "2x2 against 1x1, exact accuracy")
        + f"; 4x4 against 2x2: {UNDECIDED} (not run on CPU; config/hrm.yaml runs it).",
        "4. **A deep transformer may match or exceed HRM?** "
        + _compared(_row(compare, comparison="hrm_vs_transformer", metric="exact_accuracy"),
                    "HRM 2x2 against the deep transformer of one segment's blocks, exact accuracy"),
        "5. **Puzzle embeddings: critical, and may hurt true generalization?** "
        + ("; ".join(_compared(v("puzzle_embeddings", x, m), f"{x} against none, {m}") for x in embedded
                     for m in ("exact_accuracy", "unseen_exact_accuracy", "unseen_token_accuracy"))
           or "the puzzle_embeddings suite is not in this run's tables"),
        "6. **ACT against simpler mechanisms?** "
        + ("; ".join([_compared(v("act_alternatives", x, "exact_accuracy"), f"{x} against act, exact accuracy")
                      for x in acts if x != act]
                     + ([_paired_words(paired(runs, "halted_exact_accuracy", "exact_accuracy",
                                              suite="act_alternatives", variant=act),
                                       "act halting where its Q head says, against all segments")] if act else []))
           or "the act_alternatives suite is not in this run's tables"),
    ]  # fmt: skip
    return out


def landing_words(rst: str) -> list[str]:
    """The landing page's words: its lines less blank ones, title underlines and raw-HTML directives (the glance
    blocks: a style sheet, tables and base64 images, which a reader of this markdown cannot read)."""
    out, raw = [], False
    for ln in rst.splitlines():
        if ln.startswith(".. raw::"):
            raw = True  # the directive's block: every blank or indented line after it
            continue
        if raw and (not ln.strip() or ln[:1].isspace()):
            continue
        raw = False
        if ln.strip() and set(ln) != {"="}:
            out.append(ln)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--landing", default=".snakemake/hwsweep/landing.rst")
    ap.add_argument("--wall-seconds", type=float, help="the workflow's measured wall clock (time's output)")
    args = ap.parse_args(argv)
    results = Path(args.results)

    import torch

    out = [f"Commit {_commit()}, torch {torch.__version__}, {platform.machine()} with {os.cpu_count()} cores, "
           f"{datetime.date.today().isoformat()}."]  # fmt: skip
    runs, suites = _collected(results, "runs.csv")
    whole = (results / "runs.csv").is_file()
    out.append(f"Read {'the whole study' if whole else 'single suites'} from {results}/: "
               f"{', '.join(suites) or 'no runs'}.")  # fmt: skip
    train = runs.train_seconds.sum() if "train_seconds" in runs else float("nan")
    if args.wall_seconds:
        out.append(f"The whole workflow took **{args.wall_seconds / 60:.1f} minutes** of wall clock ({len(runs)} "
                   f"training runs, their training alone {train / 60:.1f} process-minutes).")  # fmt: skip

    variants, _ = _collected(results, "variants.csv")
    compare = _read(results / "compare.csv")  # across suites: the whole study's only
    out += ["", "### Seed 001's six questions", "", *questions(runs, variants, compare)]

    landing = Path(args.landing)
    if landing.is_file():
        text = landing.read_text()
        body = text.split("What the runs show", 1)[-1].split("{% endraw %}", 1)[0]  # the template follows
        out += ["", "### What the report's landing page says", "", *landing_words(body)]

    if len(variants):
        for title, keep in (("primary metrics", variants.primary.astype(bool)),
                            ("the secondary metrics the questions read", variants.metric.isin(SECONDARY))):  # fmt: skip
            v = variants[keep & variants.difference.notna()]
            v = v.assign(interval=[f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(v.ci_low, v.ci_high)])
            out += ["", f"### Variants against each suite's reference ({title})", ""]
            out += _table(v[["suite", "variant", "reference", "metric", "n", "mean", "reference_mean", "difference",
                             "interval", "verdict"]])  # fmt: skip

    if len(compare):
        c = compare[compare.primary.astype(bool)]
        c = c.assign(interval=[f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(c.ci_low, c.ci_high)])
        out += ["", "### Across suites (`compare:`)", ""]
        out += _table(c[["comparison", "metric", "mean", "reference_mean", "difference", "interval", "verdict",
                         "training_flops", "reference_training_flops"]])  # fmt: skip

    comparison, _ = _collected(results, "comparison.csv")
    speedup, _ = _collected(results, "speedup.csv")
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
        out += act_at_evaluation(runs) + seen_and_unseen(runs)
    print("\n".join(out))


def act_at_evaluation(runs: pd.DataFrame) -> list[str]:
    """HRM's cells: exact accuracy after each segment, all segments (the original's evaluation) and halting where
    the Q head says (its segments), means over seeds; then per ACT cell the paired difference halted - all."""
    segments = sorted((c for c in runs if c.startswith("exact_accuracy_segment_") and runs[c].notna().any()),
                      key=lambda c: int(c.rsplit("_", 1)[1]))  # fmt: skip
    if not segments:
        return []
    columns = segments + ["exact_accuracy", "halted_exact_accuracy", "halted_segments_per_sample"]
    hrm = runs[runs[segments[0]].notna()]
    means = hrm.groupby(["suite", "variant", "hardware"], sort=False)[[c for c in columns if c in hrm]].mean()
    out = ["", "### ACT at evaluation: accuracy after each segment, all of them, and halting where Q says", ""]
    out += _table(means.reset_index())
    lines = [_paired_words(paired(hrm, "halted_exact_accuracy", "exact_accuracy", suite=s, variant=v, hardware=h),
                           f"{s}/{v} on {h}, halting by Q against all segments")
             for (s, v, h), cell in hrm.groupby(["suite", "variant", "hardware"], sort=False)
             if "halted_exact_accuracy" in cell and cell.halted_exact_accuracy.notna().any()]  # fmt: skip
    return out + ([""] + [f"- {line}" for line in lines] if lines else [])


def seen_and_unseen(runs: pd.DataFrame) -> list[str]:
    """The cells with unseen puzzles: seen against unseen accuracy, means over seeds, and each cell's paired gap."""
    if "unseen_exact_accuracy" not in runs or runs.unseen_exact_accuracy.isna().all():
        return []
    cells = runs[runs.unseen_exact_accuracy.notna()]
    columns = ["exact_accuracy", "unseen_exact_accuracy", "token_accuracy", "unseen_token_accuracy"]
    means = cells.groupby(["suite", "variant", "hardware"], sort=False)[columns].mean().reset_index()
    out = ["", "### Seen against unseen puzzles", ""] + _table(means) + [""]
    for (s, v, h), _ in cells.groupby(["suite", "variant", "hardware"], sort=False):
        for metric in ("exact_accuracy", "token_accuracy"):
            gap = paired(cells, f"unseen_{metric}", metric, suite=s, variant=v, hardware=h)
            out.append(f"- {_paired_words(gap, f'{s}/{v} on {h}, unseen against seen puzzles, {metric}')}")
    # each variant's gap (unseen - seen) against the suite's first variant's, paired by seed: does it widen?
    for (s, h), suite in cells.groupby(["suite", "hardware"], sort=False):
        gaps = suite.assign(gap=suite.unseen_exact_accuracy - suite.exact_accuracy).pivot_table(
            index="seed", columns="variant", values="gap", sort=False)  # fmt: skip
        reference = gaps.columns[0]
        for v in gaps.columns[1:]:
            both = gaps[[v, reference]].dropna().rename(columns={v: "a", reference: "b"})
            words = _paired_words(paired(both, "a", "b"), f"{s}/{v} against {reference} on {h}, the gap (unseen - "
                                                          "seen exact accuracy)")  # fmt: skip
            out.append(f"- {words.replace('runs paired', 'seeds paired')}")
    return out


if __name__ == "__main__":
    main()
