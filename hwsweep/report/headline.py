"""The answer of a suite in a researcher's words, from its tables (torch-free, pure): which
hardware is equivalent to the baseline on which metrics (and with which test and margin), what is
inconclusive and how many seeds would decide, what differs, and what each hardware costs in time
and money. The report's landing page puts these sentences first."""

from __future__ import annotations

import math
import numbers

import pandas as pd

from hwsweep.analysis.stats import SEEDS_CAP, amount
from hwsweep.contracts.host import LOAD_FACTOR

SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


def _name(metric: str) -> str:
    return metric.replace("_", " ")


def _join(words: list[str]) -> str:
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def finite(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def money(value: float, currency: str) -> str:
    """$0.04, $0.00031, 12 EUR: two significant digits, never in exponent notation."""
    v = abs(float(value))
    digits = 2 if v >= 0.01 or v == 0 else 1 - math.floor(math.log10(v))
    text = f"{v:,.{digits}f}"
    symbol = SYMBOLS.get(currency)
    return f"{symbol}{text}" if symbol else f"{text} {currency}"


def margin_text(rows: pd.DataFrame) -> str:
    """'±0.5 points' when the metrics share one margin, else each margin with its metrics:
    '±0.5 points for token accuracy and exact accuracy, ±0.01 for final loss'."""
    metrics: dict[str, list[str]] = {}
    for r in rows.itertuples():
        metrics.setdefault("±" + amount(r.margin, r.scale), []).append(_name(r.metric))
    if len(metrics) == 1:
        return next(iter(metrics))
    return ", ".join(f"{m} for {_join(names)}" for m, names in metrics.items())


def _state(row) -> str:
    if row.verdict == "equivalent":
        return "shifted" if bool(row.shifted) else "equivalent"
    return row.verdict


def _seeds(rows: pd.DataFrame) -> str:
    needed = [x for x in rows.seeds_needed if finite(x) or x == math.inf]
    if not needed:
        return "more seeds would decide"
    top = max(needed)
    return f"more than {SEEDS_CAP} seeds per hardware would be needed" if top == math.inf else \
        f"{int(top)} seeds would decide"  # fmt: skip


def equivalence_sentences(equivalence: pd.DataFrame, baseline: str) -> list[str]:
    """Hardware with the same outcome on every compared metric share one sentence."""
    if equivalence.empty:
        return [f"Only the baseline {baseline} ran: nothing to compare."]
    groups: dict[tuple, list[str]] = {}
    for hw, rows in equivalence.groupby("hardware", sort=False):
        key = tuple((r.metric, _state(r)) for r in rows.itertuples())
        groups.setdefault(key, []).append(hw)
    out = []
    for key, hws in groups.items():
        rows = equivalence[equivalence.hardware.isin(hws)]
        out.append(_group_sentence(rows, hws, dict(key), baseline))
    return out


def _group_sentence(rows: pd.DataFrame, hws: list[str], states: dict, baseline: str) -> str:
    subject = _join(hws)
    plural = len(hws) > 1
    first = rows.drop_duplicates("metric")
    by_state = {s: [m for m, st in states.items() if st == s] for s in ("equivalent", "shifted", "different",
                                                                         "inconclusive")}  # fmt: skip

    def label(metrics):
        return _join([_name(m) + ("" if first.set_index("metric").primary[m] else " (secondary)") for m in metrics])

    def tests(metrics):
        sub = first[first.metric.isin(metrics)]
        return f"{' / '.join(dict.fromkeys(sub.test))}; {margin_text(sub)}"

    clauses = []
    same = [m for m, st in states.items() if st in ("equivalent", "shifted")]  # in the declared order
    if same:
        verb = "are" if plural else "is"
        clauses.append(f"{subject} {verb} **equivalent** to {baseline} on {label(same)} ({tests(same)})")
        for m in by_state["shifted"]:
            for r in rows[rows.metric == m].itertuples():
                clauses.append(f"{_name(m)} is shifted by {amount(r.difference, r.scale, True)} on {r.hardware} "
                               f"(p = {r.p_difference:.2g}), inside the margin")  # fmt: skip
    if by_state["different"]:
        for hw in hws:
            sub = rows[(rows.hardware == hw) & rows.metric.isin(by_state["different"])]
            what = _join([f"{label([r.metric])} ({amount(r.difference, r.scale, True)}, beyond "
                          f"±{amount(r.margin, r.scale)})" for r in sub.itertuples()])  # fmt: skip
            clauses.append(f"{hw} **differs** from {baseline} on {what} ({tests(by_state['different']).split(';')[0]})")
    if by_state["inconclusive"]:
        m = by_state["inconclusive"]
        sub = rows[rows.metric.isin(m)]
        who = "" if same or by_state["different"] else f" for {subject} against {baseline} ({tests(m)})"
        clauses.append(f"{label(m)} **inconclusive**{who} — {_seeds(sub)}")
    return "; ".join(clauses) + "."


CONTENTION_ADVICE = ("⚠ marks timings measured under contention (other hwsweep runs on the node, or a 1-minute "
                     f"load above {LOAD_FACTOR:g} × the CPUs the run may use: hwsweep.host.contended): such a "
                     "speedup measures the competing work as much as the hardware. Rerun those runs with "
                     "`timing: exclusive` (the local profile's one timing_slot, as the default auto does locally; "
                     "exclusive nodes under SLURM) and nothing else running on the machine; see README, Timings.")


def flagged(contention) -> bool:
    """A speedup table's `contention` cell names runs measured under contention (empty, NaN or None: none)."""
    return isinstance(contention, str) and contention.strip() != ""


def utilisation(row) -> str:
    """'MFU 0.031 (0.0049 TFLOP/s per device)'; '' where it is not known."""
    mfu, tflops = row.get("mfu"), row.get("tflops_per_device")
    if not finite(mfu):
        return ""
    return f"MFU {mfu:.2g}" + (f" ({tflops:.2g} TFLOP/s per device)" if finite(tflops) else "")


def cost_sentence(row, baseline: str, confidence: float = 0.95) -> str:
    """'cpu2 is 1.57× faster (95% CI 1.21–2.04) at +28% device-hours, $0.04 more per run.'"""
    hw = row["hardware"]
    s = row.get("speedup", math.nan)
    if not finite(s):
        return f"{hw}: no speedup (no timing shared with {baseline})."
    ci = ""
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    if finite(low) and finite(high):
        low, high = (low, high) if s >= 1 else (1 / high, 1 / low)  # the interval of what the sentence says
        ci = f" ({confidence:.0%} CI {low:.3g}–{high:.3g})"
    pace = f"{s:.3g}× faster" if s >= 1 else f"{1 / s:.3g}× slower"
    parts = []
    ratio = row.get("device_hours_ratio", math.nan)
    if finite(ratio):
        parts.append(f"at {(ratio - 1) * 100:+.0f}% device-hours")
    else:
        parts.append(f"on another device type ({int(row['world_size'])} × {row['gpu_type']})")
    cost, currency = row.get("cost_per_run", math.nan), row.get("currency", "USD")
    base_cost = row.get("baseline_cost_per_run", math.nan)
    if finite(cost) and finite(base_cost):
        diff = cost - base_cost
        if round(diff, 12) == 0:
            parts.append(f"the same cost ({money(cost, currency)} per run)")
        else:
            parts.append(f"{money(diff, currency)} {'more' if diff > 0 else 'less'} per run "
                         f"({money(cost, currency)} against {money(base_cost, currency)})")  # fmt: skip
    else:
        parts.append(f"cost not known (no price_per_hour for {hw if not finite(cost) else baseline})")
    sentence = f"{hw} is {pace}{ci} {', '.join(parts)}."
    mine, theirs = utilisation(row), row.get("baseline_utilisation", "")
    if mine:
        sentence += f" {mine}" + (f" against {theirs} on {baseline}." if theirs else ".")
    if flagged(row.get("contention")):
        sentence += (f" ⚠ **Measured under contention** ({row['contention']}): this speedup measures the competing "
                     "work as much as the hardware; rerun with `timing: exclusive` and nothing else running "
                     "(README, Timings).")  # fmt: skip
    return sentence


def suite_headline(comparison: pd.DataFrame, equivalence: pd.DataFrame,
                   confidence: float = 0.95) -> dict[str, list[str]]:  # fmt: skip
    """Variant -> its sentences (equivalence first, then time and cost per hardware)."""
    out = {}
    for variant, comp in comparison.groupby("variant", sort=False):
        base_rows = comp[comp.baseline.astype(bool)]
        if base_rows.empty:
            out[variant] = ["The baseline has no finished run: nothing to compare."]
            continue
        baseline = base_rows.hardware.iloc[0]
        equiv = equivalence[equivalence.variant == variant] if len(equivalence) else equivalence
        sentences = equivalence_sentences(equiv, baseline)
        base_cost = base_rows.get("cost_per_run", pd.Series([math.nan])).iloc[0]
        base = {"baseline_cost_per_run": base_cost, "baseline_utilisation": utilisation(base_rows.iloc[0].to_dict())}
        for _, row in comp[~comp.baseline.astype(bool)].iterrows():
            sentences.append(cost_sentence(row.to_dict() | base, baseline, confidence))
        out[variant] = sentences
    return out


def failure_sentence(states: dict[str, int], reasons: list[str]) -> str:
    """A suite without results: how many runs failed or are missing, and the first reason."""
    total = sum(states.values())
    if total and states.get("done") == total:  # every run finished: only the tables are to be made
        return f"**No tables yet** — all {total} runs are done; `snakemake all` aggregates them."
    counts = ", ".join(f"{n} {state}" for state, n in states.items() if n)
    why = f" First failure: {reasons[0]}" if reasons else ""
    return f"**No results** — of {total} runs {counts}.{why}"
