"""Comparisons that have no test, and the notes that say why: too few seeds, bitwise equal seeds, no spread,
identical repeats (seeds that are not seeds) or a metric at its declared bound."""

from __future__ import annotations

from hwsweep.analysis.stats.settings import Settings
from hwsweep.analysis.words import amount

NEEDS_SEEDS = "needs >= 2 seeds on both"
BITWISE = "bitwise equal on every seed: equal without a test"
NO_SPREAD = "no spread over the seeds (every seed's difference the same): nothing to test from"

# Seeds that are not seeds: every seed of both hardware gave the same value (a script that gets no seed, or
# ignores it). Zero spread is no evidence of equivalence: a test would say p = 0 from nothing. The one sentence
# of every comparison that meets them (fixed steps, variants, time to target, speedup).
REPEATS = "no seed variation: nothing can be tested from identical repeats; pass a seed flag the script uses"
AT_BOUND = "no spread to test from: a bound reached, not missing seeds"  # ends the sentence of at_bound()


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


def constant(a, b, name: str, settings: Settings) -> str:
    """Why one metric's values cannot be tested (both sides one value each): the metric at its floor or
    ceiling on either side (named so), else identical repeats (REPEATS); '' when they can be."""
    if not repeats(a, b):
        return ""
    bounds, scale = settings.bounds.get(name), settings.scales.get(name, 1.0)
    return next((said for said in (at_bound(name, float(x[0]), bounds, scale) for x in (b, a)) if said), REPEATS)


def untestable(note) -> bool:
    """Whether a row's note says its values could not be tested at all (constant: more seeds of them decide nothing)."""
    return isinstance(note, str) and (REPEATS in note or note.endswith(AT_BOUND) or NO_SPREAD in note)
