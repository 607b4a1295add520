"""A suite's tables as self-contained HTML pages that the report opens inline: the columns a
reader needs, numbers rounded, differences in the metric's units (shares in points), and
verdict cells coloured and marked by text. The CSVs keep every column."""

from __future__ import annotations

import html
import math

import pandas as pd

from hwsweep.analysis import stats
from hwsweep.analysis.variants import FLOPS_TOLERANCE
from hwsweep.analysis.words import COST, SPEED, amount, devices, duration, finite, in_words, money, plain
from hwsweep.report import headline

# Text marks first, so the verdict reads without colour; the colour repeats it.
VERDICTS = {
    "equivalent": ("✓", "#d8f0d8"),
    "shifted": ("✓~", "#e6f3c8"),
    "different": ("✗", "#f6d2d2"),
    "inconclusive": ("?", "#fbe8c0"),
    "baseline": ("◆", "#e4e4ea"),
    "not compared": ("–", "#ffffff"),
    # a variant against its reference (hwsweep.analysis.variants)
    "better": ("▲", "#d8f0d8"),
    "worse": ("▼", "#f6d2d2"),
    "no clear difference": ("○", "#fbe8c0"),
    "mixed": ("▲▼", "#fbe8c0"),
    "not tested": ("–", "#ffffff"),
}
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 12px; color: #1d2330; }
h1 { font-size: 17px; margin: 0 0 4px; } p.note { margin: 2px 0 10px; color: #444; max-width: 70em; }
table { border-collapse: collapse; } th, td { border: 1px solid #c8ccd4; padding: 4px 8px; vertical-align: top; }
th { background: #eef0f4; text-align: left; position: sticky; top: 0; }
td.num { text-align: right; white-space: nowrap; }
td.verdict { font-weight: 600; white-space: nowrap; } td.text { max-width: 32em; }
"""


def hardware_order(frame: pd.DataFrame, baseline: str) -> list[str]:
    """The baseline first, then by device type (the baseline's first), device count and name:
    the order of every figure, table and headline."""
    hw = frame.drop_duplicates("hardware")
    if "gpu_type" in hw:
        types = list(dict.fromkeys(hw[hw.hardware == baseline].gpu_type.tolist() + hw.gpu_type.tolist()))
        hw = hw.assign(type_rank=hw.gpu_type.map({t: i for i, t in enumerate(types)}))
    cols = [c for c in ("type_rank", "world_size", "hardware") if c in hw]
    order = hw.sort_values(cols).hardware.tolist()
    return ([baseline] if baseline in order else []) + [h for h in order if h != baseline]


def in_order(frame: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Rows by suite and variant (as they come), then hardware in `order`."""
    if frame.empty:
        return frame
    group = frame.suite + "/" + frame.variant.astype(str) if "suite" in frame else frame.variant.astype(str)
    groups = {g: i for i, g in enumerate(dict.fromkeys(group))}
    ranks = {h: i for i, h in enumerate(order)}
    key = group.map(groups) * (len(order) + 1) + frame.hardware.map(ranks).fillna(len(order))
    return frame.iloc[key.to_numpy().argsort(kind="stable")]


def ordered(comparison: pd.DataFrame, *frames: pd.DataFrame) -> list[pd.DataFrame]:
    """The comparison and other tables of it with their rows in the hardware order."""
    base = comparison.loc[comparison.baseline.astype(bool), "hardware"]
    order = hardware_order(comparison, base.iloc[0] if len(base) else "")
    return [in_order(f, order) for f in (comparison, *frames)]


def _num(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    if isinstance(x, (int,)) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e6):
        return f"{int(x)}"
    return plain(x, digits)  # never exponent notation (issue 68)


def _interval(low, high, digits: int = 3, scale: float = 1.0) -> str:
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high)):
        return ""
    return f"[{plain(low * scale, digits)}, {plain(high * scale, digits)}]"


def verdict_cell(verdict: str, text: str | None = None) -> str:
    mark, colour = VERDICTS.get(verdict, ("", "#ffffff"))
    body = html.escape(text or verdict)
    return f'<td class="verdict" data-verdict="{html.escape(verdict)}" style="background:{colour}">{mark} {body}</td>'


def page(title: str, note: str, header: list[str], rows: list[list[str]]) -> str:
    """A whole HTML page; `rows` hold finished <td> cells."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1><p class=\"note\">{note}</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></body></html>\n")  # fmt: skip


def _td(value, cls: str = "num") -> str:
    return f'<td class="{cls}">{html.escape(str(value))}</td>'


NORMALITY = ("The intervals assume roughly normal seed-to-seed spread (log-normal for times); a seed far from the "
             "others is named in the last column.")
LEGEND = ("Verdict marks: ✓ equivalent, ✓~ equivalent but shifted inside the margin, ✗ different, ? inconclusive, "
          "◆ baseline.")


def comparison_page(comparison: pd.DataFrame, metrics: list[str], scales: dict, confidence: float = 0.95) -> str:
    """One row per variant and hardware: the overall verdict over the primary metrics, speedup
    and cost first (what a reader decides on), then each metric's seed mean with its CI and its
    finding, and the diagnosis."""
    several = comparison.variant.nunique() > 1
    suites = comparison.suite.nunique() > 1  # the table of every suite
    header = (["suite"] if suites else []) + (["variant"] if several else [])
    header += ["hardware", "devices", "seeds", "overall verdict", "speed vs baseline", "cost per run",
               "device-hours per run"]  # fmt: skip
    for m in metrics:
        header += [f"{m} mean [CI]", f"{m} vs baseline"]
    header += ["diagnosis and seed spread"]
    rows = []
    for r in comparison.to_dict("records"):
        row = ([_td(r["suite"], "text")] if suites else []) + ([_td(r["variant"], "text")] if several else [])
        row += [_td(r["hardware"], "text"), _td(devices(r), "text"),
                _td(_num(r["n_seeds"])), verdict_cell(str(r["verdict"]))]  # fmt: skip
        row.append(_td(_speed(r, confidence) if finite(r.get("speedup")) else "", "text"))
        cost = r.get("cost_per_run")
        row.append(_td(money(cost, r.get("currency", "USD")) if finite(cost) else "no price"))
        row.append(_td(_num(r.get("device_hours"))))
        for m in metrics:
            s = scales.get(m, 1.0)
            unit = " pt" if s == 100 else ""
            mean = r.get(f"{m}_mean")
            row.append(_td(f"{_num(mean * s, 4)}{unit} {_interval(r.get(f'{m}_ci_low'), r.get(f'{m}_ci_high'), 4, s)}"
                           if finite(mean) else ""))  # fmt: skip
            v = str(r.get(f"{m}_verdict", "not compared"))
            if v == "nan":
                v = "not compared"
            state = "shifted" if v == "equivalent" and "shifted" in str(r.get(f"{m}_finding", "")) else v
            row.append(verdict_cell(state, str(r.get(f"{m}_finding")) if state not in ("baseline", "not compared")
                                    else v))  # fmt: skip
        diag = r.get("diagnosis")
        spread = r.get("seed_spread")
        row.append(_td("; ".join(x for x in (diag, spread) if isinstance(x, str) and x), "text"))
        rows.append(row)
    note = ("Means over seeds with their t confidence intervals (shares in percentage points, pt); "
            "each metric against the baseline by the test in the equivalence table. " + NORMALITY + " " + LEGEND)
    return page("Comparison with the baseline", note, header, rows)


def equivalence_page(equivalence: pd.DataFrame) -> str:
    header = ["variant", "hardware", "metric", "test", "seeds (hw / base)", "difference", "CI", "TOST interval",
              "margin", "p TOST", "p difference", "verdict", "power", "seeds needed", "note", "diagnosis"]  # fmt: skip
    rows = []
    for r in equivalence.to_dict("records"):
        s = r["scale"]
        state = "shifted" if r["verdict"] == "equivalent" and bool(r["shifted"]) else r["verdict"]
        needed = r.get("seeds_needed")
        rows.append([
            _td(r["variant"], "text"), _td(r["hardware"], "text"),
            _td(r["metric"] + ("" if r["primary"] else " (secondary)"), "text"), _td(r["test"], "text"),
            _td(f"{r['n']} / {r['n_baseline']}"), _td(amount(r.get("difference"), s, True)),
            _td(_interval(r.get("ci_low"), r.get("ci_high"), 3, s)),
            _td(_interval(r.get("tost_ci_low"), r.get("tost_ci_high"), 3, s)), _td("±" + amount(r["margin"], s)),
            _td(_num(r.get("p_tost"), 2)), _td(_num(r.get("p_difference"), 2)), verdict_cell(state, r["finding"]),
            _td(_num(r.get("power"), 2)), _td("> 100" if needed == math.inf else _num(needed)),
            _td(r["note"] if isinstance(r.get("note"), str) else "", "text"),
            _td(r["diagnosis"] if isinstance(r.get("diagnosis"), str) else "", "text"),
        ])  # fmt: skip
    note = ("Each hardware minus the baseline, per metric: the difference with its confidence interval, the "
            "TOST interval (1 - 2α) that must lie inside ±margin for equivalence, the tests' p-values, the "
            "power of these seeds and the seeds that show equivalence 80% of the time if there is no true difference "
            "(planned with a 70% upper confidence bound of the seed spread). " + NORMALITY + " " + LEGEND)
    return page("Equivalence to the baseline", note, header, rows)


VARIANT_LEGEND = ("Verdict marks: ▲ better, ▼ worse (the whole interval on one side of no difference, by the metric's "
                  "goal), ○ no clear difference, ▲▼ mixed (primary metrics not all one way), – not tested (one seed), "
                  "? inconclusive (identical repeats).")


def variants_page(frame: pd.DataFrame, title: str, confidence: float = 0.95) -> str:
    """Each variant against its reference, per hardware and metric (results/<suite>/variants.csv, or
    results/compare.csv with a comparison column): both means, the difference with its CI and its direction, the
    equivalence where the metric has a margin, the overall verdict over the primary metrics and the training FLOPs."""
    named = "comparison" in frame
    header = (["comparison"] if named else []) + ["variant", "reference", "hardware", "overall", "metric", "test",
                                                   "seeds (variant / reference)", "mean", "reference mean",
                                                   "difference", f"{confidence:.0%} CI", "verdict", "equivalence",
                                                   "training FLOPs (variant / reference)", "note"]  # fmt: skip
    rows = []
    for r in frame.to_dict("records"):
        s = r["scale"]
        flops = f"{_num(r.get('training_flops'))} / {_num(r.get('reference_training_flops'))}"
        notes = [x for x in (r.get("flops_note"), r.get("note")) if isinstance(x, str) and x]
        margin = f" (±{amount(r['margin'], s)})" if finite(r.get("margin")) else ""
        equivalence = r.get("equivalence") if isinstance(r.get("equivalence"), str) else ""
        rows.append(([_td(r["comparison"], "text")] if named else []) + [
            _td(r["variant"], "text"), _td(r["reference"], "text"), _td(r["hardware"], "text"),
            verdict_cell(str(r["overall"])), _td(r["metric"] + ("" if r["primary"] else " (secondary)"), "text"),
            _td(r["test"], "text"), _td(f"{r['n']} / {r['n_reference']}"), _td(amount(r.get("mean"), s)),
            _td(amount(r.get("reference_mean"), s)), _td(amount(r.get("difference"), s, True)),
            _td(_interval(r.get("ci_low"), r.get("ci_high"), 3, s)), verdict_cell(str(r["verdict"]), r["finding"]),
            _td(equivalence + margin if equivalence else "", "text"), _td(flops), _td("; ".join(notes), "text"),
        ])  # fmt: skip
    if not rows:  # a suite of one variant: say so rather than show an empty table
        rows = [[f'<td class="text" colspan="{len(header)}">One variant only: nothing to compare it with '
                 "(a suite compares variants when it sweeps a recipe key).</td>"]]
    note = ("Each variant minus its reference on the same hardware, per metric: paired by seed where both ran the same "
            "seeds (Welch otherwise), the difference with its t confidence interval (shares in percentage points); "
            "overall better or worse only when every primary metric is (intersection-union); equivalence (TOST) where "
            "the metric has a margin. Training FLOPs = FLOPs spent per step (HRM: at the segments ACT ran) × steps, mean "
            "over seeds; a note says when they "
            f"differ by more than {FLOPS_TOLERANCE:.0%}. {NORMALITY} {VARIANT_LEGEND}")
    return page(title, note, header, rows)


SHORT_METHODS = {stats.GEOMETRIC: "geometric mean", stats.RATIO_OF_MEANS: "ratio of means"}


def _speed(r, confidence: float) -> str:
    """The speedup in words; the baseline's own row says so (never 'no clear difference, 1×')."""
    if bool(r.get("baseline")) is True:
        return "baseline"
    return in_words(SPEED, r["speedup"], r.get("speedup_ci_low"), r.get("speedup_ci_high"), confidence,
                    **headline.no_interval(r))  # fmt: skip


def _efficiency(r) -> str:
    """'0.89 against cpu1 (1 × cpu)': what the efficiency is measured against; '' without a smaller count."""
    if not finite(r.get("efficiency")):
        return ""
    return f"{_num(r['efficiency'])} against {r['scaling_reference']}"


def speedup_page(speedup: pd.DataFrame, confidence: float = 0.95) -> str:
    header = ["variant", "hardware", "devices", "speed vs baseline", "method", "time saved per run",
              "device-hours per run", "device-hours vs baseline", "price per device-hour", "cost per run",
              "cost vs baseline", "efficiency (same type, against a smaller count)", "Amdahl serial fraction",
              "samples/s per device", "TFLOP/s per device", "MFU", "measured under contention"]  # fmt: skip
    rows = []
    for r in speedup.to_dict("records"):
        currency = r.get("currency", "USD")
        ratio = r.get("device_hours_ratio")
        amdahl = r.get("amdahl_serial_fraction")
        amdahl_ci = _interval(r.get("amdahl_serial_fraction_ci_low"), r.get("amdahl_serial_fraction_ci_high"), 2)
        cost = (in_words(COST, r["cost_ratio"], r.get("cost_ratio_ci_low"), r.get("cost_ratio_ci_high"), confidence,
                         **headline.no_interval(r)) if finite(r.get("cost_ratio")) else "")  # fmt: skip
        if bool(r.get("baseline")) is True:  # the reference itself: nothing compared
            cost, ratio = "baseline", None
        rows.append([
            _td(r["variant"], "text"), _td(r["hardware"], "text"),
            _td(devices(r), "text"),
            _td(_speed(r, confidence) if finite(r.get("speedup")) else "", "text"),
            _td(SHORT_METHODS.get(r["speedup_method"], r["speedup_method"]), "text"),
            _td(duration(r.get("time_saved_seconds"))), _td(_num(r.get("device_hours"))),
            _td(headline.percent(ratio) if finite(ratio) else "baseline" if ratio is None else "other device type"),
            _td(money(r["price_per_device_hour"], currency) if finite(r.get("price_per_device_hour")) else "not known"),
            _td(money(r["cost_per_run"], currency) if finite(r.get("cost_per_run")) else ""),
            _td(cost, "text"), _td(_efficiency(r), "text"),
            _td(f"{_num(amdahl, 2)} {amdahl_ci}" if finite(amdahl) else ""),
            _td(_num(r.get("samples_per_second_per_device"))), _td(_num(r.get("tflops_per_device"))),
            _td(_num(r.get("mfu"), 2)),
            _td(f"⚠ {r['contention']}" if headline.flagged(r.get("contention")) else "no", "text"),
        ])  # fmt: skip
    note = ("Speedup = baseline training time / this hardware's for the same steps: the geometric mean of the "
            "per-seed ratios with a t interval on the log ratios when seeds are shared, else the ratio of mean times "
            "(Welch interval on the log means); faster or slower only where the whole interval lies above or below "
            "1. Device-hours and cost against the baseline follow that speedup (devices × price / speedup), so "
            "cheaper or more expensive likewise. Cost = device-hours × price per device-hour; device-hours and cost "
            "per run are means over seeds. Efficiency only within one device type, for a hardware with a smaller "
            "device count of its type to compare with (named); Amdahl's serial fraction fitted to every run's time "
            "of a type with three or more counts. " + NORMALITY + " "
            "Throughput, TFLOP/s and MFU (model FLOPs utilisation: achieved / the catalog's peak FLOP/s of one "
            "device, for a CPU process the cores of its threads) per device in the steady state, mean over seeds; "
            f"empty where the FLOPs or the peak are not known. {headline.CONTENTION_ADVICE}")
    return page("Speedup and cost", note, header, rows)


def plain_page(title: str, note: str, frame: pd.DataFrame) -> str:
    """Any table as it is, numbers rounded (the batch plan)."""
    rows = [[_td(_num(v, 4) if isinstance(v, float) else ("" if v is None else v),
                 "num" if isinstance(v, (int, float)) and not isinstance(v, bool) else "text") for v in r]
            for r in frame.itertuples(index=False)]  # fmt: skip
    return page(title, note, list(frame.columns), rows)

