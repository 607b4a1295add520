"""Equivalence: each hardware against the baseline, per compared metric: paired TOST on the per-seed
differences when both ran the same seeds (Welch-TOST otherwise), the difference and its CI, the t-test of "no
difference" (a shift inside the margin is reported), a verdict, the power of these seeds and the seeds an
equivalence decision needs. The overall verdict of a hardware is an intersection-union test over the primary
metrics: equivalent only when every primary metric is. An undecided verdict has the advice of the constraint that
binds (stats.metric_advice: seeds at the observed difference, a bound, censoring), a decided one none."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hwsweep.analysis.stats.power_analysis import power, seeds_needed
from hwsweep.analysis.stats.seed_pairing import pairing, seeded, sides
from hwsweep.analysis.stats.settings import CELL, Settings
from hwsweep.analysis.stats.tost import decide, paired_stats, welch_stats
from hwsweep.analysis.stats.metric_advice import bounded, censored, none, seeds
from hwsweep.analysis.stats.untested import AT_BOUND, BITWISE, NEEDS_SEEDS, NO_SPREAD, constant
from hwsweep.analysis.stats.verdict_words import finding

PAIRED = "paired TOST"
WELCH = "Welch TOST"


def compare(a: np.ndarray, b: np.ndarray, margin: float | None, confidence: float, paired: bool = False) -> dict:
    """One metric of one hardware (a) against the baseline (b); paired: a[i] and b[i] are the
    same seed. margin None: the difference, its CI and its t-test only (verdict 'not compared';
    a variant's metric without a margin)."""
    alpha = 1 - confidence
    a, b = np.asarray(a, float), np.asarray(b, float)
    test = PAIRED if paired else WELCH
    if len(a) < 2 or len(b) < 2:
        return {"test": test, "n": len(a), "n_baseline": len(b), "margin": margin, "verdict": "inconclusive",
                "shifted": False, "note": NEEDS_SEEDS}  # fmt: skip
    d, se, df = paired_stats(a, b) if paired else welch_stats(a, b)
    out = {k: v[0] for k, v in decide(d, se, df, math.nan if margin is None else margin, alpha).items()}
    sd = float(np.std(a - b, ddof=1)) if paired else math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    note = (BITWISE if out["difference"] == 0 else NO_SPREAD) if se[0] == 0 else ""
    if margin is None:  # no margin: nothing to say about equivalence, power or seeds for it
        return {"test": test, "n": len(a), "n_baseline": len(b), **out, "verdict": "not compared", "shifted": False,
                "margin": math.nan, "p_tost": math.nan, "power": math.nan, "seeds_needed": math.nan, "note": note}  # fmt: skip
    n = len(a) if paired else min(len(a), len(b))
    df = len(a) - 1 if paired else len(a) + len(b) - 2  # the spread's degrees of freedom
    return {
        "test": test, "n": len(a), "n_baseline": len(b), **out, "verdict": str(out["verdict"]),
        "shifted": bool(out["shifted"]), "margin": margin, "power": float(power(n, sd, margin, alpha, paired)[0]),
        "seeds_needed": math.nan if sd == 0 else seeds_needed(sd, margin, alpha, paired, df), "note": note,
    }  # fmt: skip


EQUIVALENCE_COLUMNS = [
    "suite", "variant", "hardware", "baseline", "metric", "primary", "scale", "goal", "test", "n", "n_baseline",
    "difference", "ci_low", "ci_high", "tost_ci_low", "tost_ci_high", "p_difference", "p_tost", "margin", "verdict",
    "shifted", "finding", "power", "seeds_needed", "binds", "advice", "advised_seeds", "note",
]  # fmt: skip


def binding(result: dict, a, b, mine: pd.Series, theirs: pd.Series, alpha: float, paired: bool) -> dict:
    """The advice of the constraint that keeps a tested verdict undecided (stats.metric_advice); none where it is
    decided or has nothing to test from. mine, theirs: the metric over every run of both sides (censoring: no value)."""
    if result["verdict"] != "inconclusive" or result["note"].startswith((NO_SPREAD, BITWISE, NEEDS_SEEDS)):
        return none()
    missing = int(mine.isna().sum() + theirs.isna().sum())
    if missing:
        return censored(missing, len(mine) + len(theirs))
    return seeds(a, b, result["margin"], alpha, paired)


def equivalence(runs: pd.DataFrame, baseline: str, settings: Settings = Settings()) -> pd.DataFrame:
    rows = []
    cells = {key: frame for key, frame in runs.groupby(CELL, sort=False)}
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, variant, baseline))
        if hw == baseline or base is None:
            continue
        paired, shared, note = pairing(sub, base)
        for metric, margin in settings.margins.items():
            a, b = sides(sub, base, metric, paired, shared)
            scale, goal = settings.scales.get(metric, 1.0), settings.goals.get(metric, "max")
            why = constant(a, b, metric, settings, seeded(sub, base))
            if why:
                result = {"test": PAIRED if paired else WELCH, "n": len(a), "n_baseline": len(b), "margin": margin,
                          "difference": float(a.mean() - b.mean()), "verdict": "inconclusive", "shifted": False,
                          "finding": why, "note": why} | (bounded(why) if why.endswith(AT_BOUND) else none())  # fmt: skip
            else:
                result = compare(a, b, margin, settings.confidence, paired=paired)
                result["note"] = "; ".join(x for x in (result.get("note", ""), note) if x)
                result |= binding(result, a, b, sub[metric], base[metric], settings.alpha, paired)
                result["finding"] = finding(result, scale, metric, goal, settings.confidence)
            rows.append({"suite": suite, "variant": variant, "hardware": hw, "baseline": baseline, "metric": metric,
                         "primary": metric in settings.primary, "scale": scale, "goal": goal} | result)  # fmt: skip
    return pd.DataFrame(rows, columns=EQUIVALENCE_COLUMNS)


def overall(equiv: pd.DataFrame) -> pd.DataFrame:
    """Per cell: equivalent only when every primary metric is (intersection-union: the 5%
    level holds without correction); different when a primary metric is; else inconclusive."""
    rows = []
    for key, sub in equiv.groupby(CELL, sort=False):
        prim = sub[sub.primary.astype(bool)]
        if prim.empty:
            verdict = "not compared"
        elif (prim.verdict == "equivalent").all():
            verdict = "equivalent"
        elif (prim.verdict == "different").any():
            verdict = "different"
        else:
            verdict = "inconclusive"
        rows.append(dict(zip(CELL, key)) | {"verdict": verdict})
    return pd.DataFrame(rows, columns=CELL + ["verdict"])
