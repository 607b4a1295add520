"""Comparisons that have no test, and the notes that say why: too few seeds, bitwise equal seeds, no spread,
identical repeats (seeds that are not seeds), a metric at its declared bound, a metric the same on every run (constant
by design), a metric no run reached; and a bound reached on one side only, named beside the test."""

from __future__ import annotations

import math

from hwsweep.analysis.stats.settings import Settings
from hwsweep.analysis.words import amount

NEEDS_SEEDS = "needs >= 2 seeds on both"
BITWISE = "bitwise equal on every seed: equal without a test"
NO_SPREAD = "no spread over the seeds (every seed's difference the same): nothing to test from"

# Seeds that are not seeds: every seed of both hardware gave the same value (a script that gets no seed, or
# ignores it; or seeds whose runs came out identical: hwsweep.analysis.repeats). Zero spread is no evidence of
# equivalence: a test would say p = 0 from nothing. The one sentence of every comparison of metrics that meets them
# (fixed steps, variants, time to target); the landing page says it once per suite. The time a run took still
# varies between repeats: a speedup's interval stands, as timing noise only (TIMING_ONLY).
REPEATS = "identical repeats: no seed variance to test"
TIMING_ONLY = "the runs are identical repeats: the interval is timing noise only"
AT_BOUND = "no spread to test from: a bound reached, not missing seeds"  # ends the sentence of at_bound()
SAME_EVERYWHERE = "the same on every run: nothing to test"  # a metric constant by design (every run, every side)
CONSTANT_SIDES = "one value on every seed of each side: no spread to test from"  # seeded runs, not repeats


def repeats(a, b) -> bool:
    """Whether both sides are >= 2 runs that all gave one value each (identical repeats, not seeds): values, or
    whole curves' fingerprints (time to target)."""
    return len(a) >= 2 and len(b) >= 2 and len(set(list(a))) == 1 and len(set(list(b))) == 1


def at_bound(name: str, value: float, bounds, scale: float = 1.0) -> str:
    """'exact accuracy is 0 on every seed (its floor): no spread ...' for a value at a declared bound; ''
    elsewhere."""
    if bounds is None or value not in tuple(bounds):
        return ""
    which = "floor" if value == bounds[0] else "ceiling"
    return f"{name.replace('_', ' ')} is {amount(value, scale)} on every seed (its {which}): {AT_BOUND}"


def constant(a, b, name: str, settings: Settings, seeded: bool = False) -> str:
    """Why one metric's values cannot be tested (both sides one value each): the metric at its floor or
    ceiling on either side (named so), else identical repeats (REPEATS), or, where the runs are seeded (not repeats:
    the metric is constant on each side by design), both values and CONSTANT_SIDES; '' when they can be."""
    if not repeats(a, b):
        return ""
    bounds, scale = settings.bounds.get(name), settings.scales.get(name, 1.0)
    said = next((said for said in (at_bound(name, float(x[0]), bounds, scale) for x in (b, a)) if said), "")
    if said or not seeded:
        return said or REPEATS
    return f"{name.replace('_', ' ')} {amount(a[0], scale)} against {amount(b[0], scale)}: {CONSTANT_SIDES}"


def same_everywhere(values) -> bool:
    """Whether a metric is one value on every run (>= 2, none missing) of every side compared: constant by design
    (HRM's eval_segments_per_sample, every segment evaluated), nothing to test and nothing seeds could change."""
    values = [float(v) for v in values]
    return len(values) >= 2 and not any(math.isnan(v) for v in values) and len(set(values)) == 1


def missing(name: str, counts: dict) -> str:
    """Why a metric that ran on >= 2 seeds per side has too few values to test: 'no run reached it (0 of 3 runs of
    fixed, 0 of 3 of base)' for a milestone (steps_to_*: empty where not reached), 'no run recorded it ...' for
    another metric; counts: side -> (values, runs)."""
    verb = "reached" if name.startswith("steps_to_") else "recorded"
    parts = [f"{k} of {n} runs of {side}" if i == 0 else f"{k} of {n} of {side}"
             for i, (side, (k, n)) in enumerate(counts.items())]  # fmt: skip
    label = name.replace("_", " ")
    if not any(k for k, _ in counts.values()):
        return f"{label}: no run {verb} it ({', '.join(parts)}): nothing to test"
    return f"{label}: {' and '.join(parts)} {verb} it: too few values for a test"


def one_bound(name: str, a, b, labels: tuple, settings: Settings) -> str:
    """'exact accuracy 0 points on every seed of fixed: solved nothing' where one side (>= 2 seeds) sits at a
    declared bound and the other does not: named beside the test, which alone would say 'no clear difference'
    or 'equivalent' without it. A share at its floor (goal max) solved nothing, at its ceiling every one; '' elsewhere."""
    bounds, scale, goal = settings.bounds.get(name), settings.scales.get(name, 1.0), settings.goals.get(name, "max")
    if bounds is None:
        return ""
    said = []
    for values, label in zip((a, b), labels):
        if len(values) >= 2 and len(set(list(values))) == 1 and float(values[0]) in tuple(bounds):
            floor = float(values[0]) == bounds[0]
            what = (("solved nothing" if floor else "solved every one") if scale == 100 and goal == "max" else
                    f"its {'floor' if floor else 'ceiling'}")  # fmt: skip
            said.append(f"{name.replace('_', ' ')} {amount(values[0], scale)} on every seed of {label}: {what}")
    return "; ".join(said) if len(said) == 1 else ""


def untestable(note) -> bool:
    """Whether a row's note says its values could not be tested at all (constant: more seeds of them decide nothing)."""
    return isinstance(note, str) and any(
        x in note for x in (REPEATS, NO_SPREAD, SAME_EVERYWHERE, CONSTANT_SIDES)) or (
        isinstance(note, str) and note.endswith(AT_BOUND))  # fmt: skip
