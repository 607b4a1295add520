"""The landing page's first screen (issue 68): per suite one compact table, each hardware (and variant) against its
baseline in the order a reader decides in: the same results? (✓ equivalent, ✓~ shifted inside the margin, ✗
different, ? inconclusive; the margins in the column's head), speed with its interval, cost per run with its
interval, time to each target. Marks and words carry every verdict and colour only repeats them, so the table reads
printed in grey; the sentences below it on the page are the detail. Pure: HTML text from the suite's tables."""

from __future__ import annotations

import html
import math

import pandas as pd

from hwsweep.analysis.stats import POWER, SEEDS_CAP, untestable
from hwsweep.analysis.words import duration, figures, finite, money, side
from hwsweep.report.headline import margin_text, pairing_words
from hwsweep.report.tables import VERDICTS, _num, hardware_order, in_order
from hwsweep.report.targets import median_words, target_name

LINE = 4000  # characters per line of the HTML (docutils refuses a line of the landing text over 10,000)
MAX_TARGETS = 2  # time-to-target columns; more targets are in the sentences below
# Background by what a number means for the reader (the words say the same).
GOOD, BAD, UNCLEAR, NONE = "#d8f0d8", "#f6d2d2", "#fbe8c0", "#ffffff"
STYLE = """
.hw-glance { margin: 0 0 1.1em; }
.hw-glance .hw-title { margin: 0 0 .3em; font-size: 1.05em; }
.hw-glance .hw-row { display: flex; flex-wrap: wrap; gap: .6em 1.2em; align-items: flex-start; }
.hw-glance .hw-scroll { max-width: 100%; overflow-x: auto; }
.hw-glance table { border-collapse: collapse; margin: 0; font-size: .86em; line-height: 1.25; width: auto; }
.hw-glance th, .hw-glance td { border: 1px solid #c8ccd4; padding: .25em .5em; vertical-align: top; text-align: left; }
.hw-glance th { background: #eef0f4; font-weight: 600; color: #1d2330; }
.hw-glance td b { white-space: nowrap; }
.hw-glance td small, .hw-glance th small { display: block; color: #444; font-size: .9em; font-weight: 400; }
.hw-glance td small { white-space: nowrap; } .hw-glance th small { max-width: 17em; }
.hw-glance td:first-child, .hw-glance th:first-child { position: sticky; left: 0; z-index: 1; }
.hw-glance img { margin: 0; max-width: 100%; height: auto; }
.hw-glance p.hw-none { margin: .2em 0; }
@media (max-width: 720px) { .hw-glance td small { white-space: normal; min-width: 8em; } }
@media print { .hw-glance td, .hw-glance th { -webkit-print-color-adjust: exact; print-color-adjust: exact; } }
"""


def _td(main: str, detail: str = "", colour: str = NONE, kind: str = "") -> str:
    """One cell: the answer in bold, its interval or reason beneath in small type (plain text, escaped here)."""
    small = f"<small>{html.escape(detail)}</small>" if detail else ""
    data = f' data-kind="{kind}"' if kind else ""
    return f'<td{data} style="background:{colour}"><b>{html.escape(main)}</b>{small}</td>'


def _ratio(estimate: float, low: float, high: float, confidence: float) -> tuple[str, str]:
    """'1.57×', '95% CI 1.41–1.73' with digits enough that no end prints as 1 unless it is."""
    if finite(low) and finite(high):
        s, lo, hi, _ = figures(estimate, low, high, 1.0)
        return f"{s}×", f"{confidence:.0%} CI {lo}–{hi}"
    return f"{figures(estimate)[0]}×", ""


def _why(note, default: str) -> str:
    """A missing interval's reason, short: a note's first clause."""
    return note.split(":")[0].split(";")[0] if isinstance(note, str) and note else default


def _ratio_cell(estimate: float, low: float, high: float, words: tuple[str, str], confidence: float, kind: str,
                why: str = "") -> str:
    """A ratio against the baseline where more is better (speed, time to target): '1.57× faster' over its interval,
    worse as the inverse ('2× slower'); 'no clear difference' over the ratio and its interval where that holds 1."""
    way = side(low, high, 1.0, "max")
    if way == "worse":
        shown, ci = _ratio(1 / estimate, 1 / high, 1 / low, confidence)
        return _td(f"{shown} {words[1]}", ci, BAD, kind)
    shown, ci = _ratio(estimate, low, high, confidence)
    if way == "better":
        return _td(f"{shown} {words[0]}", ci, GOOD, kind)
    return _td("no clear difference", f"{shown}, {ci or 'no CI: ' + why}", UNCLEAR, kind)


def speed_cell(r: dict, confidence: float) -> str:
    """The speedup (baseline time / this hardware's for the same steps) with its interval."""
    s = r.get("speedup", math.nan)
    if not finite(s):
        return _td("–", "no timing shared", kind="speed")
    return _ratio_cell(s, r.get("speedup_ci_low", math.nan), r.get("speedup_ci_high", math.nan), ("faster", "slower"),
                       confidence, "speed", _why(r.get("speedup_note"), "fewer than 2 seeds"))  # fmt: skip


def cost_cell(r: dict, confidence: float) -> str:
    """'cheaper: 0.8×', 'more expensive: 1.4×' over its interval (the cost per run against the baseline's)."""
    c = r.get("cost_ratio", math.nan)
    if not finite(c):
        return _td("not known", "no price per hour", kind="cost")
    low, high = r.get("cost_ratio_ci_low", math.nan), r.get("cost_ratio_ci_high", math.nan)
    shown, ci = _ratio(c, low, high, confidence)
    way = side(low, high, 1.0, "min")
    if way == "unclear":
        why = _why(r.get("speedup_note"), "fewer than 2 seeds")
        return _td("no clear difference", f"{shown}, {ci or 'no CI: ' + why}", UNCLEAR, "cost")
    word, colour = ("cheaper", GOOD) if way == "better" else ("more expensive", BAD)
    return _td(f"{word}: {shown}", ci, colour, "cost")


def _state(r) -> str:
    return "shifted" if r.verdict == "equivalent" and bool(getattr(r, "shifted", False)) else str(r.verdict)


def _undecided(rows: pd.DataFrame) -> str:
    """Why the inconclusive metrics are: a constant that no seed can change, else the seeds that would show the
    equivalence (the equivalence table's seeds_needed)."""
    notes = [n for n in rows.note if untestable(n)] if "note" in rows else []
    if notes:
        return _why(notes[0], "no spread")
    needed = [x for x in rows.seeds_needed if finite(x) or x == math.inf] if "seeds_needed" in rows else []
    if not needed:
        return "more seeds needed"
    most = max(needed)  # seeds per hardware that show equivalence POWER of the time if there is no difference
    return f"over {SEEDS_CAP} seeds needed" if most == math.inf else f"{int(most)} seeds for {POWER:.0%} power"


def verdict_cell(r: dict, eq: pd.DataFrame) -> str:
    """'✓ equivalent' (every primary metric inside its margin), '? inconclusive' over the metrics that are not
    decided and why; colour as tables.VERDICTS."""
    verdict = str(r.get("verdict", "not compared"))
    primary = eq[eq.primary.astype(bool)] if len(eq) else eq
    states = {row.metric: _state(row) for row in primary.itertuples()}
    shown = "shifted" if verdict == "equivalent" and "shifted" in states.values() else verdict
    mark, colour = VERDICTS.get(shown, ("", NONE))
    word = "equivalent, shifted" if shown == "shifted" else verdict
    detail = ""
    if verdict in ("inconclusive", "different"):
        off = [m for m, s in states.items() if s == verdict]
        names = ", ".join(m.replace("_", " ") for m in off)
        if verdict == "inconclusive" and len(primary):
            detail = f"{names}: {_undecided(primary[primary.metric.isin(off)])}" if names else ""
        else:
            detail = names
    elif shown == "shifted":
        detail = "inside the margin: " + ", ".join(m.replace("_", " ") for m, s in states.items() if s == "shifted")
    return _td(f"{mark} {word}", detail, colour, "verdict")


def target_cell(t: dict | None, baseline: str, confidence: float) -> str:
    """Time to one target: '1.3× sooner' over its interval; where runs did not reach it, how many did."""
    if t is None:
        return _td("–", "not compared", kind="target")
    reached = f"reached {t['n_reached']:.0f} of {t['n_runs']:.0f}, {t['baseline_n_reached']:.0f} of " \
              f"{t['baseline_n_runs']:.0f} on the baseline"  # fmt: skip
    if t["n_reached"] == 0 and t["baseline_n_reached"] == 0:
        step = t.get("censored_at_step", math.nan)
        by = f" by step {_num(step)}" if finite(step) else ""
        return _td("? not reached", f"by any run here or on {baseline}{by}", UNCLEAR, "target")
    s = t.get("speedup", math.nan)
    if not isinstance(t.get("steps_test"), str) or not t["steps_test"] or not finite(s):
        return _td("? not compared", _why(t.get("note"), reached), UNCLEAR, "target")
    cell = _ratio_cell(s, t.get("speedup_ci_low", math.nan), t.get("speedup_ci_high", math.nan), ("sooner", "later"),
                       confidence, "target")  # fmt: skip
    if t["n_reached"] < t["n_runs"] or t["baseline_n_reached"] < t["baseline_n_runs"]:
        cell = cell.replace("</small></td>", f"; {html.escape(reached)}</small></td>")
    return cell


def baseline_row(r: dict, targets: list, ttt: pd.DataFrame, label: str) -> str:
    """The baseline's own row: what the ratios are of (its time and cost per run, its steps to each target)."""
    seconds, cost = r.get("train_seconds", math.nan), r.get("cost_per_run", math.nan)
    time_text = f"training {duration(seconds)} per run" if finite(seconds) else ""
    cost_text = f"{money(cost, r.get('currency', 'USD'))} per run" if finite(cost) else "no price per hour"
    cells = [_td(label, _seeds(r), kind="hardware"),
             _td(f"{VERDICTS['baseline'][0]} baseline", "", VERDICTS["baseline"][1], "verdict"),
             _td("1×" if time_text else "–", time_text, kind="speed"),
             _td("1×" if finite(cost) else "–", cost_text, kind="cost")]  # fmt: skip
    for metric, value in targets:
        own = ttt[(ttt.metric == metric) & (ttt.target == value) & ttt.baseline.astype(bool)] if len(ttt) else ttt
        median = median_words(own.iloc[0].to_dict()) if len(own) else ""
        said = f"median {median} steps" if median[:1].isdigit() else median
        cells.append(_td("1×" if median[:1].isdigit() else "–", said, kind="target"))
    return "<tr>" + "".join(cells) + "</tr>"


def _seeds(r: dict) -> str:
    n = r.get("n_seeds", math.nan)
    devices = f"{_num(r.get('world_size'))} × {r.get('gpu_type')}" if finite(r.get("world_size")) else ""
    return ", ".join(x for x in (devices, f"{_num(n)} seeds" if finite(n) else "") if x)


def suite_table(comparison: pd.DataFrame, equivalence: pd.DataFrame, ttt: pd.DataFrame,
                expected: list[tuple[str, str]] | None = None, confidence: float = 0.95) -> str:  # fmt: skip
    """The table of one suite: per variant its baseline's row, then each hardware against it; `expected`
    (variant, hardware) cells without a row in the comparison (runs not done) as rows that say so."""
    base = comparison[comparison.baseline.astype(bool)]
    baseline = str(base.hardware.iloc[0]) if len(base) else ""
    order = hardware_order(comparison, baseline) if len(comparison) else []
    comparison = in_order(comparison, order)
    several = comparison.variant.nunique() > 1
    targets = list(dict.fromkeys(zip(ttt.metric, ttt.target)))[:MAX_TARGETS] if len(ttt) else []
    primary = equivalence[equivalence.primary.astype(bool)] if len(equivalence) else equivalence
    tost = f"TOST {1 - 2 * (1 - confidence):.0%}"
    margins = html.escape(margin_text(primary.drop_duplicates("metric"))) if len(primary) else "no margins"
    head = ["variant · hardware" if several else "hardware",
            f"Same results as {html.escape(baseline)}?<small>{margins}; {tost}</small>",
            f"Speed vs {html.escape(baseline)}<small>training time, same steps</small>",
            f"Cost per run vs {html.escape(baseline)}<small>device-hours × price</small>"]
    head += [f"Time to {html.escape(target_name(m, v))}<small>vs {html.escape(baseline)}, from the start</small>"
             for m, v in targets]
    rows = []
    done = set()
    for r in comparison.to_dict("records"):
        variant, hw = str(r["variant"]), str(r["hardware"])
        done.add((variant, hw))
        label = f"{variant} · {hw}" if several else hw
        if bool(r["baseline"]):
            rows.append(baseline_row(r, targets, ttt[ttt.variant.astype(str) == variant] if len(ttt) else ttt, label))
            continue
        eq = equivalence[(equivalence.variant.astype(str) == variant) & (equivalence.hardware == hw)] \
            if len(equivalence) else equivalence  # fmt: skip
        cells = [_td(label, _seeds(r), kind="hardware"), verdict_cell(r, eq),
                 speed_cell(r, confidence), cost_cell(r, confidence)]  # fmt: skip
        for metric, value in targets:
            hit = ttt[(ttt.variant.astype(str) == variant) & (ttt.hardware == hw) & (ttt.metric == metric)
                      & (ttt.target == value)]  # fmt: skip
            cells.append(target_cell(hit.iloc[0].to_dict() if len(hit) else None, baseline, confidence))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    for variant, hw in expected or []:
        if (str(variant), str(hw)) not in done:
            label = f"{variant} · {hw}" if several else str(hw)
            rows.append("<tr>" + _td(label, kind="hardware") + f'<td colspan="{len(head) - 1}" data-kind="missing">'
                        "– no finished runs in this suite's tables</td></tr>")  # fmt: skip
    header, body = "".join(f"<th>{h}</th>" for h in head), "\n".join(rows)
    more = len(dict.fromkeys(zip(ttt.metric, ttt.target))) - len(targets) if len(ttt) else 0
    extra = f"<caption>{more} more targets in the sentences below</caption>" if more > 0 else ""
    return (f'<div class="hw-scroll"><table class="hw-first">{extra}<thead><tr>{header}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table></div>")


def variants_table(frame: pd.DataFrame) -> str:
    """A suite on one hardware: each variant against its reference (variants.csv), the overall verdict and what
    decided it (the primary metrics' findings)."""
    rows = []
    for _, cell in frame.groupby(["variant", "hardware"], sort=False):
        first = cell.iloc[0]
        shown = cell[cell.primary.astype(bool)] if cell.primary.astype(bool).any() else cell
        mark, colour = VERDICTS.get(str(first.overall), ("", NONE))
        what = "; ".join(dict.fromkeys(str(f) for f in shown.finding if isinstance(f, str)))
        rows.append("<tr>" + _td(f"{first.variant} against {first.reference}", f"{first.hardware}, {pairing_words(cell)}",
                                 kind="hardware")
                    + _td(f"{mark} {first.overall}", "", colour, "verdict")
                    + f'<td data-kind="finding">{html.escape(what)}</td></tr>')  # fmt: skip
    header, body = "<th>variant</th><th>Result against its reference</th><th>Primary metrics</th>", "\n".join(rows)
    return (f'<div class="hw-scroll"><table class="hw-first"><thead><tr>{header}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table></div>")


def block(title: str, table: str = "", figure: str = "", width: int = 0, line: str = "") -> str:
    """One suite's first-screen block: its title, then the table with the figure beside it (below it where the
    page is narrow), or a line in their place."""
    body = f'<p class="hw-none">{line}</p>' if line else ""
    if table or figure:
        size = f' width="{width}"' if width else ""
        # Lines of the data URI's base64 (whitespace in it is ignored): docutils refuses a line over 10,000 characters.
        src = "\n".join(figure[i:i + LINE] for i in range(0, len(figure), LINE))
        image = f'<img src="{src}"{size} alt="effects and intervals against the margin band">' if figure else ""
        body += f'<div class="hw-row">{table}{image}</div>'
    return f'<div class="hw-glance"><p class="hw-title"><b>{title}</b></p>{body}</div>'
