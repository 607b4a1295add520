"""Statistics over seeds and hardware: pure functions on DataFrames, vectorised cores. One module per idea:

- settings: how to compare (Settings) and the cell every statistic is per (CELL).
- t_interval: Student t intervals of a mean; summary: seed_summary, per cell and metric.
- tost: the equivalence test's cores (paired or Welch, TOST, the verdict); interval_tost: the same test for
  values known only to an interval (time to target).
- power_analysis: power and seeds needed; untested: comparisons that have no test, and why; metric_advice: the
  constraint that keeps a metric's equivalence undecided, and its fix.
- seed_pairing: paired or not; verdicts: equivalence per metric and overall; verdict_words: a verdict in words.
- distributions: the t, normal and chi-squared functions and the skewness test, without scipy.stats.
- normality: seeds that lie apart or look skewed.
- speedup_ratio: a speedup and its interval; amdahl: the serial fraction; speedup_table: speedup, efficiency
  and cost per cell.
- export: the comparison table; curves: logged series over seeds.

Every function works for whatever metrics the config declares (Settings); no name is listed here. The modules
take their distributions from distributions (scipy.special underneath), never scipy.stats: its import (~1 CPU-s)
was the largest constant cost of a suite's aggregate and of status; scipy's submodules load on first use, so
scipy.special loads only where a statistic is computed (the Snakefile imports this package). This package
re-exports what the rest of hwsweep, the workflow, bench/ and the tests use as `stats.<name>`.
"""

from hwsweep.analysis.stats.amdahl import amdahl_fit
from hwsweep.analysis.stats.curves import curve_band, curve_difference
from hwsweep.analysis.stats.export import comparison
from hwsweep.analysis.stats.interval_tost import (  # the private three: tests/analysis/test_target_simulation.py checks them
    CORNERS_UP_TO,
    _ball_bound,
    _ball_bound_welch,
    _corner_moments,
    interval_decide,
)
from hwsweep.analysis.stats.metric_advice import BOUND, SEEDS
from hwsweep.analysis.stats.normality import SPREAD_LEVEL, grubbs, spread_check
from hwsweep.analysis.stats.power_analysis import (POWER, SEEDS_CAP, power, seeds_needed, seeds_to_decide,
                                                    seeds_words, spread_bound)
from hwsweep.analysis.stats.seed_pairing import pairing, seeded, sides
from hwsweep.analysis.stats.settings import CELL, Settings
from hwsweep.analysis.stats.speedup_ratio import GEOMETRIC, RATIO_OF_MEANS, speedup_ci
from hwsweep.analysis.stats.speedup_table import known_speedup, speedup
from hwsweep.analysis.stats.summary import CI_METHOD, seed_summary
from hwsweep.analysis.stats.t_interval import mean_ci, t_half_width
from hwsweep.analysis.stats.tost import decide, paired_stats, welch_stats
from hwsweep.analysis.stats.untested import (AT_BOUND, BITWISE, CONSTANT_SIDES, NEEDS_SEEDS, NO_SPREAD, REPEATS,
                                             SAME_EVERYWHERE, TIMING_ONLY, constant, missing, one_bound, repeats,
                                             same_everywhere, untestable)  # fmt: skip
from hwsweep.analysis.stats.verdict_words import finding, shift_words
from hwsweep.analysis.stats.verdicts import PAIRED, WELCH, compare, equivalence, overall

__all__ = [
    "AT_BOUND", "BITWISE", "BOUND", "SEEDS", "CELL", "CONSTANT_SIDES", "SAME_EVERYWHERE", "TIMING_ONLY", "missing", "one_bound",
    "same_everywhere", "CI_METHOD", "CORNERS_UP_TO", "GEOMETRIC", "NEEDS_SEEDS", "NO_SPREAD", "PAIRED",
    "POWER", "RATIO_OF_MEANS", "REPEATS", "SEEDS_CAP", "SPREAD_LEVEL", "Settings", "WELCH", "_ball_bound",
    "_ball_bound_welch", "_corner_moments", "amdahl_fit", "comparison", "compare", "constant", "curve_band",
    "curve_difference", "decide", "equivalence", "finding", "grubbs", "interval_decide", "known_speedup", "mean_ci",
    "overall", "paired_stats", "pairing", "power", "repeats", "seed_summary", "seeded", "seeds_needed", "seeds_to_decide", "seeds_words",
    "shift_words", "sides", "speedup", "speedup_ci", "spread_bound", "spread_check", "t_half_width", "untestable",
    "welch_stats",
]  # fmt: skip
