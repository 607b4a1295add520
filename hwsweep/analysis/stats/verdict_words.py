"""An equivalence verdict in words: the finding of a metric, with the interval the TOST tested and, for an
equivalent but shifted metric, the shift's test."""

from __future__ import annotations

import math

from hwsweep.analysis.stats.power_analysis import seeds_words
from hwsweep.analysis.stats.untested import NO_SPREAD
from hwsweep.analysis.words import amount, finite, in_words, plain, side, span


def finding(row, scale: float = 1.0, metric: str = "difference", goal: str = "max", confidence: float = 0.95) -> str:
    """The verdict in words, with the direction only where the interval shows one (words.in_words):
    'equivalent, but shifted inside ±0.5 points: better token accuracy by +0.44 points (90% interval ...; shift
    p = 0.003)', the interval the TOST tested."""
    v = row["verdict"]
    beyond = f"±{amount(row['margin'], scale)}"

    def said():  # only verdicts that were tested have a difference to word
        return in_words(metric, row["difference"], row["ci_low"], row["ci_high"], confidence, goal, scale)

    if v == "equivalent":
        if row.get("shifted"):
            return f"equivalent, but {shift_words(row, scale, metric, goal, confidence)}"
        if not finite(row.get("tost_ci_low")):  # bitwise equal: nothing estimated
            return "equivalent (bitwise equal on every seed)"
        tested = span(row["tost_ci_low"], row["tost_ci_high"], scale, row["margin"])
        return f"equivalent ({1 - 2 * (1 - confidence):.0%} interval {tested}, inside {beyond})"
    if v == "different":
        return f"different, beyond {beyond}: {said()}"
    if NO_SPREAD in str(row.get("note", "")):
        return f"inconclusive — {NO_SPREAD}"
    tested = ""
    if finite(row.get("tost_ci_low")) and finite(row.get("tost_ci_high")):
        interval = span(row["tost_ci_low"], row["tost_ci_high"], scale, row["margin"])
        tested = f" ({1 - 2 * (1 - confidence):.0%} interval {interval}, not inside {beyond})"
    advice = row.get("advice")  # the binding constraint's fix (stats.metric_advice); tables written before: seeds
    fix = advice if isinstance(advice, str) and advice else seeds_words(row.get("seeds_needed", math.nan))
    return f"inconclusive{tested} — {fix}"


def shift_words(row, scale: float, metric: str, goal: str, confidence: float) -> str:
    """An equivalent but shifted metric with the interval the TOST tested (1 - 2 alpha, inside the margin) and
    the shift's test: 'shifted inside ±0.5 points: better token accuracy by +0.44 points (90% interval +0.389
    to +0.499 points; shift p = 0.003)'. The direction is the 1 - alpha interval's, which excludes 0."""
    way = side(row["ci_low"], row["ci_high"], 0.0, goal)
    tested = span(row["tost_ci_low"], row["tost_ci_high"], scale, row["margin"])
    return (f"shifted inside ±{amount(row['margin'], scale)}: {way} {metric.replace('_', ' ')} by "
            f"{amount(row['difference'], scale, True)} ({1 - 2 * (1 - confidence):.0%} interval {tested}; shift p = "
            f"{plain(row['p_difference'], 2)})")  # fmt: skip
