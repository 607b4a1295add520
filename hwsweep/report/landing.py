"""The report's landing page, written when `snakemake --report` starts: first each suite's table and figure read at a
glance (hwsweep.report.glance), then each suite's headline in words from its tables, or, for a suite without tables,
which runs failed and why (one line of each run's log). The static description (workflow/report/workflow.rst)
follows."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from hwsweep.contracts import io
from hwsweep.contracts.failure import log_reason as failure_reason  # one line of a failed run's log
from hwsweep.contracts.spec import EVAL_RECORD, LOG_DIR, TRAIN_RECORD
from hwsweep.report import glance, headline, tables, targets

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


def _html(text: str) -> str:
    """A headline sentence as HTML: escaped, its **verdict** marks bold."""
    parts = text.split("**")
    return "".join(f"<b>{html.escape(p)}</b>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def suite_glance(matrix, suite: str, complete: bool, description: str = "", results: Path = Path("results"),
                 stale: str | None = None) -> str:  # fmt: skip
    """The suite's first-screen block (HTML): its table and forest figure; a suite on one hardware its variants
    against their reference; one without tables the line that says why, the detail further down."""
    title = html.escape(f"Suite {suite}" + (f" — {description}" if description else ""))
    if complete and stale:
        return glance.block(title, line=f"<b>Out of date</b> — {html.escape(left_out(stale))}.")
    if not complete:
        counts, _ = run_states(matrix, suite)
        return glance.block(title, line=_html(headline.failure_sentence(counts, [])) + " Details below.")
    comparison, equivalence = tables.ordered(pd.read_csv(results / suite / "comparison.csv"),
                                             pd.read_csv(results / suite / "equivalence.csv"))  # fmt: skip
    confidence = matrix.statistics.get("confidence", 0.95)
    if len(comparison) and comparison.baseline.astype(bool).all():
        hw = html.escape(str(comparison.hardware.iloc[0]))
        variants = results / suite / "variants.csv"
        frame = pd.read_csv(variants) if variants.exists() else pd.DataFrame()
        if frame.empty:
            return glance.block(title, line=f"Every run on {hw}, one variant: nothing to compare; the seeds below.")
        return glance.block(title, glance.variants_table(frame), line=f"Every run on {hw}: its variants against "
                            f"{html.escape(str(frame.reference.iloc[0]))}.")  # fmt: skip
    ttt = results / suite / "target_comparison.csv"
    expected = list(dict.fromkeys((r.variant, r.hardware) for r in matrix.runs(suite)))
    table = glance.suite_table(comparison, equivalence, pd.read_csv(ttt) if ttt.exists() else pd.DataFrame(),
                               expected, confidence)  # fmt: skip
    # Imported here: matplotlib would otherwise load in every snakemake of the workflow (a dry run, each job), which
    # parses this module for the report's landing page, 0.5-0.8 CPU-s each.
    from hwsweep.report import glance_figure

    figure = glance_figure.forest(comparison, equivalence, confidence)
    return glance.block(title, table, figure, glance_figure.width_px())


def first_screen(matrix, complete: dict[str, bool], descriptions: dict, stale_suites: dict) -> list[str]:
    """The first screen's lines: every suite's glance block as raw HTML, the table's style once before them."""
    blocks = [suite_glance(matrix, s, complete[s], descriptions.get(s, ""), stale=stale_suites.get(s))
              for s in matrix.suites]  # fmt: skip
    text = f"<style>{glance.STYLE}</style>\n" + "\n".join(blocks)
    return [".. raw:: html", ""] + ["   " + line for line in text.splitlines()] + [""]


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
    """The landing page's reStructuredText: every suite's first-screen table and figure, then headlines (or
    failures, or why the tables are out of date: `stale_suites`, suite -> why) per suite, the comparisons across suites, which "All suites" tables are left
    out as out of date (`stale`: table -> why), then the template. The headline part is wrapped so the report's
    template engine leaves it as is."""
    stale, stale_suites = stale or {}, stale_suites or {}
    lines = ["What the runs show", "==================", ""]
    lines += first_screen(matrix, complete, descriptions or {}, stale_suites)
    lines += ["In words", "--------", ""]
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
