"""The report's landing page, written when `snakemake --report` starts: each suite's headline
from its tables, or, for a suite without tables, which runs failed and why (one line of each
run's log). The static description (workflow/report/workflow.rst) follows."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from hwsweep.contracts import io
from hwsweep.contracts.failure import log_reason as failure_reason  # one line of a failed run's log
from hwsweep.contracts.spec import EVAL_RECORD, LOG_DIR, TRAIN_RECORD
from hwsweep.report import headline, tables, targets

HOW = "How the runs were made"  # the template's method section: the headlines go before it


def run_states(matrix, suite: str) -> tuple[dict, list[str]]:
    """Counts of done / failed / missing runs of a suite and the failed runs' reasons (read
    only: `snakemake status` is the command that moves damaged records aside)."""
    evaluated = matrix.evaluation.kind != "none"
    counts = {"done": 0, "failed": 0, "missing": 0}
    reasons = []
    for run in matrix.runs(suite):
        folder = Path(run.run_dir)
        log = Path(LOG_DIR.format(suite=run.suite, variant=run.variant, hardware=run.hardware, seed=run.seed))
        if (folder / TRAIN_RECORD).exists() and (not evaluated or (folder / EVAL_RECORD).exists()):
            counts["done"] += 1
        elif (log / "train.log").exists() or (log / "evaluate.log").exists():
            counts["failed"] += 1
            which = log / ("evaluate.log" if (folder / TRAIN_RECORD).exists() else "train.log")
            reasons.append(f"{run.variant} {run.hardware} seed {run.seed}: {failure_reason(which)} ({which})")
        else:
            counts["missing"] += 1
    return counts, reasons


def _escape(text: str) -> str:
    """Plain text inside reStructuredText: no markup, no template syntax."""
    return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", text).replace("{", "\\{").replace("}", "\\}")


def _emphasis(sentence: str) -> str:
    """The headline's **verdict** marks kept, everything else escaped."""
    parts = sentence.split("**")
    return "".join(f"**{p}**" if i % 2 else _escape(p) for i, p in enumerate(parts))


def suite_section(matrix, suite: str, complete: bool, description: str = "",
                  results: Path = Path("results"), stale: str | None = None) -> list[str]:  # fmt: skip
    """The suite's headline from its tables; or, where it has none, which runs failed and why; or, where its tables
    are out of date (`stale`: why, hwsweep.report.current), that they are left out and what brings them back."""
    lines = [f"**Suite {_escape(suite)}**" + (f" — {_escape(description)}" if description else ""), ""]
    if complete and stale:
        return lines + [f"**Out of date** — {_escape(left_out(stale))}.", ""]
    if not complete:
        counts, reasons = run_states(matrix, suite)
        lines += [_emphasis(headline.failure_sentence(counts, reasons[:1])), ""]
        lines += [f"- {_escape(r)}" for r in reasons[1:8]]
        if len(reasons) > 8:
            lines.append(f"- … and {len(reasons) - 8} more failed runs (see ``results/partial/status.csv`` after "
                         "``snakemake -f status``)")  # fmt: skip
        return lines + [""]
    comparison, equivalence = tables.ordered(pd.read_csv(results / suite / "comparison.csv"),
                                             pd.read_csv(results / suite / "equivalence.csv"))  # fmt: skip
    confidence = matrix.statistics.get("confidence", 0.95)
    # Time to target first where the suite declares targets (issue 23); runs stopped there have no fixed-steps rows.
    ttt = results / suite / "target_comparison.csv"
    first = targets.sentences(pd.read_csv(ttt), confidence) if ttt.exists() else {}
    runs = results / suite / "runs.csv"
    stopped = targets.stopped_sentences(pd.read_csv(runs)) if runs.exists() else {}
    fixed = headline.suite_headline(comparison, equivalence, confidence)
    several = comparison.variant.nunique() > 1
    if len(comparison) and comparison.baseline.astype(bool).all():
        lines += [f"- Every run on {_escape(str(comparison.hardware.iloc[0]))}: no hardware comparison in this suite"
                  + ("; its variants against each other below." if several else "."), ""]  # fmt: skip
    shown = [v for v in dict.fromkeys([*first, *fixed, *stopped])
             if first.get(v) or stopped.get(v) or fixed.get(v)]  # fmt: skip
    for variant in shown:
        sentences = first.get(variant, []) + stopped.get(variant, []) + fixed.get(variant, [])
        if several or len(shown) > 1:
            lines += [f"*{_escape(str(variant))}*:", ""]
        lines += [f"- {_emphasis(s)}" for s in sentences] + [""]
    variants = results / suite / "variants.csv"
    frame = pd.read_csv(variants) if variants.exists() else pd.DataFrame()
    if len(frame):  # a suite of one variant has nothing to compare it with: nothing new to say
        lines += [f"*Variants against {_escape(str(frame.reference.iloc[0]))}*:", ""]
        lines += [f"- {_emphasis(s)}" for s in headline.variant_sentences(frame)] + [""]
    return headline.once(lines)  # identical repeats said once per suite


def compare_section(results: Path = Path("results")) -> list[str]:
    """The comparisons across suites (results/compare.csv), both sides' training FLOPs side by side."""
    path = results / "compare.csv"
    frame = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if frame.empty:
        return []
    return ["**Comparisons across suites**", ""] + [f"- {_emphasis(s)}" for s in
                                                     headline.variant_sentences(frame, side_by_side=True)] + [""]  # fmt: skip


def left_out(why: str) -> str:
    """A combined table the report leaves out (hwsweep.report.current), in one line with the fix."""
    return f"{why}: left out of this report; `snakemake all`, then the report again, brings it up to date"


def write(matrix, complete: dict[str, bool], template: Path, path: Path, descriptions: dict | None = None,
          stale: dict[str, str] | None = None, stale_suites: dict[str, str] | None = None) -> Path:  # fmt: skip
    """The landing page's reStructuredText: headlines (or failures, or why the tables are out of date:
    `stale_suites`, suite -> why) per suite, the comparisons across suites, which "All suites" tables are left
    out as out of date (`stale`: table -> why), then the template. The headline part is wrapped so the report's
    template engine leaves it as is."""
    stale, stale_suites = stale or {}, stale_suites or {}
    lines = ["What the runs show", "==================", ""]
    for suite in matrix.suites:
        lines += suite_section(matrix, suite, complete[suite], (descriptions or {}).get(suite, ""),
                               stale=stale_suites.get(suite))  # fmt: skip
    lines += compare_section() if matrix.compare and "results/compare.csv" not in stale else []
    if stale:
        lines += ["**All suites**", ""] + [f"- {_escape(left_out(why))}" for why in stale.values()] + [""]
    text = Path(template).read_text(encoding="utf-8")
    split = text.index(HOW) if HOW in text else 0  # the answer before the method
    text = text[:split] + "{% raw %}\n" + "\n".join(lines) + "\n{% endraw %}\n\n" + text[split:]
    io.write_text(path, text)
    return path
