"""The answer of a suite in a researcher's words, from its tables (torch-free, pure): which
hardware is equivalent to the baseline on which metrics (and with which test and margin), what is
inconclusive and how many seeds would decide, what differs, and what each hardware costs in time
and money. The report's landing page puts these sentences first."""

from __future__ import annotations

import math

import pandas as pd

from hwsweep.analysis import variants as versus
from hwsweep.analysis.stats import BITWISE, NEEDS_SEEDS, REPEATS, TIMING_ONLY, seeds_words, shift_words, untestable
from hwsweep.analysis.words import COST, SPEED, amount, duration, finite, flops, in_words, money, plain, span
from hwsweep.analysis.words import change as percent  # the one formatting module (issue 68)
from hwsweep.contracts.host import LOAD_FACTOR


def _name(metric: str) -> str:
    return metric.replace("_", " ")


def _join(words: list[str]) -> str:
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


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
    why = [n for n in rows.note if untestable(n)]
    if why:  # more seeds that are repeats (or at a bound) would not decide anything
        return "; ".join(dict.fromkeys(why))
    advised = rows[rows.advice.fillna("").astype(str) != ""] if "advice" in rows else rows.iloc[:0]
    if len(advised):  # the binding constraint's fix: censoring and bounds, then the most seeds any metric needs
        other = list(advised[advised.binds != "seeds"].advice)
        seeds = advised[advised.binds == "seeds"]
        most = [seeds.loc[seeds.advised_seeds.astype(float).idxmax()].advice] if len(seeds) else []
        return "; ".join(dict.fromkeys(other + most))
    needed = [x for x in rows.seeds_needed if finite(x) or x == math.inf]
    return seeds_words(max(needed)) if needed else seeds_words(math.nan)


def _said(r, confidence: float) -> str:
    """One metric of one hardware against the baseline in the vocabulary of words.in_words."""
    goal = r.goal if isinstance(getattr(r, "goal", None), str) else "max"
    return in_words(r.metric, r.difference, r.ci_low, r.ci_high, confidence, goal, r.scale)


def equivalence_sentences(equivalence: pd.DataFrame, baseline: str, confidence: float = 0.95) -> list[str]:
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
        out.append(_group_sentence(rows, hws, dict(key), baseline, confidence))
    return out


def tested(rows: pd.DataFrame, hws: list[str], metrics: list[str], confidence: float) -> str:
    """The intervals an equivalence was decided on: '90% intervals: token accuracy -0.12 to +0.2 points, final loss
    -0.004 to +0.002' (each hardware named where several share the sentence; a shift has its own clause)."""
    parts = []
    for hw in hws:
        said = []
        for r in rows[(rows.hardware == hw) & rows.metric.isin(metrics)].itertuples():
            low, high = getattr(r, "tost_ci_low", math.nan), getattr(r, "tost_ci_high", math.nan)
            if finite(low) and finite(high):
                said.append(f"{_name(r.metric)} {span(low, high, r.scale, r.margin)}")
            elif getattr(r, "note", "") == BITWISE:
                said.append(f"{_name(r.metric)} bitwise equal")
        if said:
            parts.append((f"{hw} " if len(hws) > 1 else "") + ", ".join(said))
    level = f"{1 - 2 * (1 - confidence):.0%} interval{'s' if len(parts) > 1 or ',' in ''.join(parts) else ''}"
    return f"{level}: {'; '.join(parts)}" if parts else ""


def _group_sentence(rows: pd.DataFrame, hws: list[str], states: dict, baseline: str, confidence: float) -> str:
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
        shown = tested(rows, hws, by_state["equivalent"], confidence)
        clauses.append(f"{subject} {verb} **equivalent** to {baseline} on {label(same)} ({tests(same)}"
                       + (f"; {shown})" if shown else ")"))  # fmt: skip
        for m in by_state["shifted"]:
            for r in rows[rows.metric == m].itertuples():
                goal = r.goal if isinstance(getattr(r, "goal", None), str) else "max"
                clauses.append(f"on {r.hardware}, {shift_words(r._asdict(), r.scale, r.metric, goal, confidence)}")
    if by_state["different"]:
        for hw in hws:
            sub = rows[(rows.hardware == hw) & rows.metric.isin(by_state["different"])]
            what = _join([f"{_said(r, confidence)}, beyond ±{amount(r.margin, r.scale)}"
                          + ("" if r.primary else " (secondary)") for r in sub.itertuples()])  # fmt: skip
            clauses.append(f"{hw} **differs** from {baseline}: {what} ({tests(by_state['different']).split(';')[0]})")
    if by_state["inconclusive"]:
        m = by_state["inconclusive"]
        sub = rows[rows.metric.isin(m)]
        who = "" if same or by_state["different"] else f" for {subject} against {baseline} ({tests(m)})"
        shown = tested(rows, hws, m, confidence)  # not inside the margin: what the TOST saw
        clauses.append(f"{label(m)} **inconclusive**{who}{f' ({shown})' if shown else ''} — {_seeds(sub)}")
    return "; ".join(clauses) + "."


CONTENTION_ADVICE = ("⚠ marks timings measured under contention (other hwsweep runs on the node, or a 1-minute "
                     f"load above {LOAD_FACTOR:g} × the CPUs the run may use: hwsweep.host.contended): such a "
                     "speedup measures the competing work as much as the hardware. Rerun those runs with "
                     "`timing: exclusive` (the local profile's one timing_slot, as the default auto does locally; "
                     "exclusive nodes under SLURM) and nothing else running on the machine; see docs/timings.md.")


def flagged(contention) -> bool:
    """A speedup table's `contention` cell names runs measured under contention (empty, NaN or None: none)."""
    return isinstance(contention, str) and contention.strip() != ""


def utilisation(row) -> str:
    """'MFU 0.031 (0.0049 TFLOP/s per device)'; '' where it is not known."""
    mfu, tflops = row.get("mfu"), row.get("tflops_per_device")
    if not finite(mfu):
        return ""
    return f"MFU {plain(mfu, 2)}" + (f" ({plain(tflops, 2)} TFLOP/s per device)" if finite(tflops) else "")


def no_interval(row) -> dict:
    """in_words' `why` for a speedup row without an interval (identical repeats, no spread: its speedup_note);
    {} elsewhere."""
    note = row.get("speedup_note")
    return {"why": note} if isinstance(note, str) and note and note != TIMING_ONLY else {}


def cost_sentence(row, baseline: str, confidence: float = 0.95) -> str:
    """'cpu2: 1.57× faster (95% CI 1.41–1.73) at +28% device-hours (95% CI +16% to +42%); more expensive: 1.4×
    the baseline's cost per run (95% CI ...). Mean per run: 2 h 10 min and $0.14 against ... on cpu1.' The
    directions come from the intervals (words.in_words); the ratios all follow the geometric-mean speedup,
    the absolute figures (arithmetic means over seeds) stand in a sentence of their own."""
    hw = row["hardware"]
    s = row.get("speedup", math.nan)
    if not finite(s):
        return f"{hw}: no speedup (no timing shared with {baseline})."
    low, high = row.get("speedup_ci_low", math.nan), row.get("speedup_ci_high", math.nan)
    why = no_interval(row)
    speed = in_words(SPEED, s, low, high, confidence, **why)
    if row.get("speedup_note") == TIMING_ONLY:  # repeats: the interval stands, said in the same sentence
        speed = f"{speed[:-1]}; {TIMING_ONLY})"
    ratio = row.get("device_hours_ratio", math.nan)
    if finite(ratio):
        hours = f"at {percent(ratio)} device-hours"
        if finite(low) and finite(high):  # device-hours = devices / speedup: its interval is the speedup's
            hours += f" ({confidence:.0%} CI {percent(ratio * s / high)} to {percent(ratio * s / low)})"
    else:
        hours = f"on another device type ({int(row['world_size'])} × {row['gpu_type']})"
    cost = row.get("cost_ratio", math.nan)
    if finite(cost):
        money_words = in_words(COST, cost, row.get("cost_ratio_ci_low"), row.get("cost_ratio_ci_high"), confidence,
                               **why)  # fmt: skip
    else:
        missing = hw if not finite(row.get("cost_per_run", math.nan)) else baseline
        money_words = f"cost not known (no price_per_hour for {missing})"
    sentence = f"{hw}: {speed} {hours}; {money_words}."
    means = _means(row, baseline)
    if means:
        sentence += f" {means}"
    mine, theirs = utilisation(row), row.get("baseline_utilisation", "")
    if mine:
        sentence += f" {mine}" + (f" against {theirs} on {baseline}." if theirs else ".")
    if flagged(row.get("contention")):
        sentence += (f" ⚠ **Measured under contention** ({row['contention']}): this speedup measures the competing "
                     "work as much as the hardware; rerun with `timing: exclusive` and nothing else running "
                     "(docs/timings.md).")  # fmt: skip
    return sentence


def _means(row, baseline: str) -> str:
    """'Mean per run: 2 h 10 min and $0.14 against 2 h 46 min and $0.10 on cpu1.' ('' when no time is known)."""
    t, tb = row.get("train_seconds", math.nan), row.get("baseline_train_seconds", math.nan)
    c, cb = row.get("cost_per_run", math.nan), row.get("baseline_cost_per_run", math.nan)
    currency = row.get("currency", "USD")
    if not (finite(t) and finite(tb)):
        return ""
    mine, theirs = f"training {duration(t, tb)}", f"{duration(tb, t)}"  # read against each other
    if finite(c) and finite(cb):
        mine, theirs = f"{mine} and {money(c, currency, cb)}", f"{theirs} and {money(cb, currency, c)}"
    return f"Mean per run: {mine} against {theirs} on {baseline}."


def overall_sentence(comp: pd.DataFrame, equivalence: pd.DataFrame, baseline: str) -> str:
    """'Overall against cpu1 (every primary metric: token accuracy and final loss): cpu2 **equivalent**,
    cpu4 **inconclusive**.'"""
    others = comp[~comp.baseline.astype(bool)]
    if others.empty:
        return ""
    primary = equivalence[equivalence.primary.astype(bool)].metric.drop_duplicates() if len(equivalence) else []
    which = f" (every primary metric: {_join([_name(m) for m in primary])})" if len(primary) else ""
    verdicts = _join([f"{r.hardware} **{r.verdict}**" for r in others.itertuples()])
    return f"Overall against {baseline}{which}: {verdicts}."


def spread_sentences(comp: pd.DataFrame) -> list[str]:
    """'⚠ cpu2: seed 4 lies apart in token accuracy (...): the intervals assume ...' per flagged hardware."""
    if "seed_spread" not in comp:
        return []
    return [f"⚠ {r.hardware}: {r.seed_spread}." for r in comp.itertuples()
            if isinstance(r.seed_spread, str) and r.seed_spread]  # fmt: skip


def check_sentences(comp: pd.DataFrame) -> list[str]:
    """'⚠ cpu1, runs' checks: unverified: no process of the command ...' per hardware whose runs' records hold checks
    (what the script was seen to do against its plan, what could not be verified, its own log against the plan)."""
    if "checks" not in comp:
        return []
    return [f"⚠ {r.hardware}, runs' checks: {r.checks}." for r in comp.itertuples()
            if isinstance(r.checks, str) and r.checks]  # fmt: skip


def suite_headline(comparison: pd.DataFrame, equivalence: pd.DataFrame,
                   confidence: float = 0.95) -> dict[str, list[str]]:  # fmt: skip
    """Variant -> its sentences (the overall verdicts, equivalence per metric, then time and cost per
    hardware, then seeds whose spread the intervals' normality does not fit, then the runs' checks)."""
    out = {}
    for variant, comp in comparison.groupby("variant", sort=False):
        base_rows = comp[comp.baseline.astype(bool)]
        if base_rows.empty:
            out[variant] = ["The baseline has no finished run: nothing to compare."]
            continue
        baseline = base_rows.hardware.iloc[0]
        if comp.baseline.astype(bool).all():  # one hardware: nothing to set against it (the landing says it once)
            out[variant] = spread_sentences(comp) + check_sentences(comp)
            continue
        equiv = equivalence[equivalence.variant == variant] if len(equivalence) else equivalence
        sentences = [s for s in [overall_sentence(comp, equiv, baseline)] if s]
        sentences += equivalence_sentences(equiv, baseline, confidence)
        first = base_rows.iloc[0]
        base = {"baseline_cost_per_run": first.get("cost_per_run", math.nan),
                "baseline_train_seconds": first.get("train_seconds", math.nan),
                "baseline_utilisation": utilisation(first.to_dict())}  # fmt: skip
        for _, row in comp[~comp.baseline.astype(bool)].iterrows():
            sentences.append(cost_sentence(row.to_dict() | base, baseline, confidence))
        out[variant] = sentences + spread_sentences(comp) + check_sentences(comp)
    return out


def pairing_words(rows: pd.DataFrame) -> str:
    """'paired by seed, 3 seeds', 'unpaired (Welch), 3 and 2 seeds' or 'one seed' for one cell's rows."""
    first = rows.iloc[0]
    n, m = int(rows.n.max()), int(rows.n_reference.max())  # a metric empty on some runs does not count the seeds
    if min(n, m) < 2:
        return "one seed" if max(n, m) <= 1 else f"{n} and {m} seeds"
    return f"paired by seed, {n} seeds" if first.test == versus.PAIRED_T else f"unpaired (Welch), {n} and {m} seeds"


def _flops(first, side_by_side: bool) -> str:
    """Both sides' training FLOPs (side_by_side), and a warning where they differ beyond the tolerance."""
    note = first.flops_note if isinstance(first.flops_note, str) else ""
    shown = ""
    if side_by_side and finite(first.training_flops) and finite(first.reference_training_flops):
        mine, theirs = first.training_flops, first.reference_training_flops
        shown = f" Training FLOPs {flops(mine, theirs)} against {flops(theirs, mine)}"
        shown += f" ({note})." if note else f" (within {versus.FLOPS_TOLERANCE:.0%}: about equal training compute)."
    elif note:
        shown = f" {note[0].upper()}{note[1:]}."
    return shown


def variant_sentences(frame: pd.DataFrame, side_by_side: bool = False) -> list[str]:
    """Each variant on each hardware against its reference (results/<suite>/variants.csv or results/compare.csv):
    'views-8 against views-0 on cpu1 (paired by seed, 3 seeds): **better** — better exact accuracy: +12.3 points
    (95% CI +8.1 to +16.5 points).' Over the primary metrics (every metric where none is); with one seed the means
    side by side and the seeds that would allow a test. side_by_side: both sides' training FLOPs (across suites)."""
    if frame.empty:
        return []
    cell = ["comparison", "hardware"] if "comparison" in frame else ["variant", "hardware"]
    out = []
    for _, rows in frame.groupby(cell, sort=False):
        first = rows.iloc[0]
        shown = rows[rows.primary.astype(bool)] if rows.primary.astype(bool).any() else rows
        head = f"{first.variant} against {first.reference} on {first.hardware} ({pairing_words(rows)})"
        if "comparison" in frame:
            head = f"{first.comparison}: {head}"
        if first.overall == versus.NOT_TESTED and (shown.note == NEEDS_SEEDS).all():  # seeds are what is missing
            said = _join([versus.side_by_side(r) for _, r in shown.iterrows()])
            text = f"{head}: {said}; **no test** — {versus.seeds_to_test(str(first.seeds).split())}."
        else:
            text = f"{head}: **{first.overall}** — {'; '.join(dict.fromkeys(shown.finding))}."
        out.append(text + _flops(first, side_by_side))
    return out


AS_ABOVE = "identical repeats, as above"  # REPEATS after its first time on a suite's page


def once(lines: list[str]) -> list[str]:
    """A suite's lines with stats.REPEATS said once: the first time in full, after it AS_ABOVE (the metrics,
    equivalence, time to target and variants of one suite of identical repeats would otherwise each say it)."""
    out, seen = [], False
    for line in lines:
        head, found, tail = line.partition(REPEATS)
        out.append(head + (AS_ABOVE if seen else found) + tail.replace(REPEATS, AS_ABOVE) if found else line)
        seen = seen or bool(found)
    return out


def failure_sentence(states: dict[str, int], reasons: list[str]) -> str:
    """A suite without results: how many runs failed or are missing, and the first reason."""
    total = sum(states.values())
    if total and states.get("done") == total:  # every run finished: only the tables are to be made
        return f"**No tables yet** — all {total} runs are done; `snakemake all` aggregates them."
    counts = ", ".join(f"{n} {state}" for state, n in states.items() if n)
    why = f" First failure: {reasons[0]}" if reasons else ""
    return f"**No results** — of {total} runs {counts}.{why}"
