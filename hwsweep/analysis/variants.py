"""Variants against each other (issue 21): within a suite, each variant against the suite's reference variant
(`suites.<name>.reference`, default the first); across suites, the pairs the config declares (`compare`). Per
declared metric, on the same hardware:

- the difference (variant - reference) with its t CI, paired by seed where both ran the same seeds
  (stats.pairing, as for hardware; Welch otherwise);
- its direction by the metric's goal (words.side): better or worse only where the whole interval lies on one
  side of 0, else no clear difference. A false 'better' at no true difference is a one-sided error of the
  two-sided CI: at most (1 - confidence) / 2 (tests/analysis/test_stats_simulation.py measures it);
- where the metric has a margin, its equivalence verdict too (TOST, stats.compare);
- reasons that are true where there is no test: a metric one value on every run compared is constant by design
  (NOTHING: not tested, no vote, not blamed on seeds; at a declared bound named so); a metric too few of the seeds
  that ran have (a milestone no run reached) says so (stats.missing); one value per side is identical repeats
  where the runs are (seeded False: hwsweep.analysis.repeats) and a constant per side where they are seeded
  (stats.constant: inconclusive, a metric at its declared floor or ceiling named so); with fewer than 2 seeds on a
  side the means side by side and the seeds that would allow a test;
- a side at its declared bound on every seed, the other not, named beside the test ('exact accuracy 0 points on
  every seed of fixed: solved nothing', stats.one_bound).

Overall, an intersection-union over the primary metrics: better only when every primary metric is better (the
level holds without correction), worse only when every one is worse, mixed when some differ either way.
Training FLOPs (flops_per_step x steps: the FLOPs the steps spent, for HRM at the segments ACT ran) of both sides
stand beside the verdict, flagged when they differ by more than FLOPS_TOLERANCE: a better variant that trained on
more compute is not better at equal compute."""

from __future__ import annotations

import math

import pandas as pd

from hwsweep.analysis import stats
from hwsweep.analysis.stats.untested import at_bound
from hwsweep.analysis.words import amount, finite, in_words, side, times

BETTER, WORSE, UNCLEAR = "better", "worse", "no clear difference"
MIXED = "mixed"  # some primary metrics better, some worse or unclear: no overall direction
NOT_TESTED = "not tested"  # fewer than 2 seeds on a side, or too few runs have the metric (none reached it)
NOTHING = "nothing to test"  # the same on every run compared (constant by design): no vote in the overall verdict
INCONCLUSIVE = "inconclusive"  # identical repeats, a bound on every seed or constant differences: no spread to test
PAIRED_T, WELCH_T = "paired t-test", "Welch t-test"
FLOPS_TOLERANCE = 0.10  # training FLOPs further apart than this: the comparison is not at equal compute
TEST_SEEDS = 3  # the seeds offered when one seed allows no test (2 df: the fewest with a usable interval)

VARIANT_COLUMNS = [
    "suite", "variant", "reference", "hardware", "metric", "primary", "scale", "goal", "test", "n", "n_reference",
    "seeds", "mean", "reference_mean", "difference", "ci_low", "ci_high", "p_difference", "verdict", "finding", "margin",
    "equivalence", "p_tost", "overall", "training_flops", "reference_training_flops", "flops_note", "note",
]  # fmt: skip
COMPARE_COLUMNS = ["comparison"] + VARIANT_COLUMNS[1:]  # variant and reference as suite/variant


def direction(low: float, high: float, goal: str) -> str:
    """better / worse / no clear difference of a difference's interval (words.side at 0)."""
    way = side(low, high, 0.0, goal)
    return UNCLEAR if way == "unclear" else way


def overall(verdicts: list[str]) -> str:
    """Intersection-union over the primary metrics' verdicts (see the module)."""
    verdicts = [v for v in verdicts if v != NOTHING]
    if not verdicts:
        return "not compared"
    for way in (BETTER, WORSE):
        if all(v == way for v in verdicts):
            return way
    if any(v in (BETTER, WORSE) for v in verdicts):
        return MIXED
    if all(v == NOT_TESTED for v in verdicts):
        return NOT_TESTED
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else UNCLEAR


def seeds_to_test(seeds) -> str:
    """'seeds: [0, 1, 2] would allow a test' from the seeds that ran."""
    have = sorted({int(s) for s in seeds})  # '0 1' from a CSV's seeds column, or numbers
    top = have[-1] + 1 if have else 0
    more = list(range(top, top + max(TEST_SEEDS - len(have), 0)))
    return f"seeds: {have + more} would allow a test"


def side_by_side(row) -> str:
    """'exact accuracy 93.4 points against 81 points': a metric of both sides where no test is possible."""
    return (f"{row['metric'].replace('_', ' ')} {amount(row['mean'], row['scale'])} against "
            f"{amount(row['reference_mean'], row['scale'])}")  # fmt: skip


def training_flops(frame: pd.DataFrame) -> float:
    """Mean training FLOPs of a side's runs (flops_per_step, the mean FLOPs a step spent, x steps); NaN where a run
    does not say."""
    if not {"flops_per_step", "steps"} <= set(frame):
        return math.nan
    values = pd.to_numeric(frame.flops_per_step, errors="coerce") * pd.to_numeric(frame.steps, errors="coerce")
    return float(values.mean()) if values.notna().all() and len(values) else math.nan


def flops_note(mine: float, theirs: float) -> str:
    """'' within FLOPS_TOLERANCE; else how far apart, so no sentence calls it a comparison at equal compute."""
    if not (finite(mine) and finite(theirs)) or theirs <= 0:
        return "training FLOPs not recorded"
    ratio = mine / theirs
    if abs(ratio - 1) <= FLOPS_TOLERANCE:
        return ""
    return f"{times(ratio, 1.0)} the reference's training FLOPs: more than {FLOPS_TOLERANCE:.0%} apart, not at equal compute"


def constant_metrics(runs: pd.DataFrame, metrics) -> set:
    """The metrics one value on every run compared (stats.same_everywhere: constant by design, nothing to test)."""
    return {m for m in metrics if m in runs and stats.same_everywhere(pd.to_numeric(runs[m], errors="coerce"))}


def contrast(sub: pd.DataFrame, base: pd.DataFrame, metrics, settings: stats.Settings, constant: set = frozenset(),
             labels: tuple = ("the variant", "the reference")) -> list[dict]:  # fmt: skip
    """One hardware's runs of a variant (sub) against the reference's (base): a row per metric. `constant`: the
    metrics the same on every run compared (not tested, not blamed on seeds); labels: how sentences name both."""
    paired, shared, pairing_note = stats.pairing(sub, base)
    test = PAIRED_T if paired else WELCH_T
    seeded = stats.seeded(sub, base)
    flops = {"training_flops": training_flops(sub), "reference_training_flops": training_flops(base)}
    flops["flops_note"] = flops_note(flops["training_flops"], flops["reference_training_flops"])
    seeds = " ".join(str(s) for s in sorted(set(sub.seed) | set(base.seed)))  # both sides' seeds
    ran = min(sub.seed.nunique(), base.seed.nunique())  # the seeds both sides ran (a metric may be empty on some)
    rows = []
    for metric in metrics:
        a, b = stats.sides(sub, base, metric, paired, shared)
        goal, scale = settings.goals.get(metric, "max"), settings.scales.get(metric, 1.0)
        margin = settings.margins.get(metric)
        row = {"metric": metric, "primary": metric in settings.variant_primary, "scale": scale, "goal": goal,
               "test": test, "n": len(a), "n_reference": len(b), "seeds": seeds, "mean": a.mean() if len(a) else math.nan,
               "reference_mean": b.mean() if len(b) else math.nan, "margin": math.nan if margin is None else margin,
               "equivalence": "", "note": pairing_note} | flops  # fmt: skip
        why = stats.constant(a, b, metric, settings, seeded) if metric not in constant else ""
        if metric in constant:  # constant by design: at its bound named so, else the same on every run
            value = float(a[0]) if len(a) else float(pd.to_numeric(sub[metric]).iloc[0])
            said = at_bound(metric, value, settings.bounds.get(metric), scale) or \
                f"{metric.replace('_', ' ')} {amount(value, scale)} on every run: {stats.SAME_EVERYWHERE}"
            row |= {"difference": 0.0, "verdict": NOTHING, "finding": said, "note": said}
        elif ran >= 2 and (len(a) < 2 or len(b) < 2):  # the seeds ran; the metric is empty on some: say so
            counts = {side: (int(f[metric].notna().sum()), len(f)) for side, f in zip(labels, (sub, base))}
            said = stats.missing(metric, counts)
            row |= {"verdict": NOT_TESTED, "finding": said, "note": said}
        elif why:
            row |= {"difference": a.mean() - b.mean(), "verdict": INCONCLUSIVE, "finding": why, "note": why}
        elif len(a) < 2 or len(b) < 2:
            row |= {"verdict": NOT_TESTED, "note": stats.NEEDS_SEEDS,
                    "finding": f"{side_by_side(row)} (one seed: no test; {seeds_to_test(seeds.split())})"}  # fmt: skip
        else:
            r = stats.compare(a, b, margin, settings.confidence, paired)
            row |= {k: r[k] for k in ("difference", "ci_low", "ci_high", "p_difference", "p_tost")}
            row["verdict"] = direction(r["ci_low"], r["ci_high"], goal) if r["note"] != stats.NO_SPREAD else INCONCLUSIVE
            row["finding"] = (in_words(metric, r["difference"], r["ci_low"], r["ci_high"], settings.confidence, goal,
                                       scale) if r["note"] != stats.NO_SPREAD else stats.NO_SPREAD)  # fmt: skip
            row["equivalence"] = r["verdict"] if margin is not None else ""
            bound = stats.one_bound(metric, a, b, labels, settings)  # named first: the test alone would not say it
            row["finding"] = f"{bound}; against {labels[1]}: {row['finding']}" if bound else row["finding"]
        rows.append(row)
    return rows


def _table(rows: list[dict], columns: list[str], cell: list[str]) -> pd.DataFrame:
    """The rows with each cell's overall verdict over its primary metrics."""
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    verdicts = frame[frame.primary.astype(bool)].groupby(cell, sort=False).verdict.agg(lambda v: overall(list(v)))
    frame["overall"] = [verdicts.get(tuple(k), "not compared") for k in frame[cell].itertuples(index=False)]
    return frame


def variants(runs: pd.DataFrame, reference: str, settings: stats.Settings) -> pd.DataFrame:
    """One suite's runs: each other variant against `reference` on each hardware both ran."""
    cells = {key: frame for key, frame in runs.groupby(stats.CELL, sort=False)}
    metrics = [m for m in settings.metrics if m in runs]
    constant = constant_metrics(runs, metrics)
    rows = []
    for (suite, variant, hw), sub in cells.items():
        base = cells.get((suite, reference, hw))
        if variant == reference or base is None:
            continue
        ids = {"suite": suite, "variant": variant, "reference": reference, "hardware": hw}
        rows += [ids | r for r in contrast(sub, base, metrics, settings, constant, (variant, reference))]
    return _table(rows, VARIANT_COLUMNS, ["suite", "variant", "hardware"])


def cross(runs: pd.DataFrame, compare: dict, settings: stats.Settings) -> pd.DataFrame:
    """The config's `compare`: name -> {variant, reference: suite/variant, metrics}, each pair on every hardware
    both ran (runs: every suite's)."""
    path = runs.suite.astype(str) + "/" + runs.variant.astype(str)
    rows = []
    for name, pair in compare.items():
        sub, base = runs[path == pair["variant"]], runs[path == pair["reference"]]
        metrics = [m for m in pair.get("metrics") or settings.metrics if m in runs]
        constant = constant_metrics(pd.concat([sub, base]), metrics)
        for hw in dict.fromkeys(sub.hardware):
            if not (base.hardware == hw).any():
                continue
            ids = {"comparison": name, "variant": pair["variant"], "reference": pair["reference"], "hardware": hw}
            rows += [ids | r for r in contrast(sub[sub.hardware == hw], base[base.hardware == hw], metrics, settings,
                                               constant, (pair["variant"], pair["reference"]))]  # fmt: skip
    return _table(rows, COMPARE_COLUMNS, ["comparison", "hardware"])
