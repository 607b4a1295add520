"""Thin entry point: one suite's run records -> runs, curves, equivalence, speedup, comparison tables."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

from hwsweep.aggregate import aggregate  # noqa: E402
from hwsweep.metrics import Metric  # noqa: E402

aggregate(
    snakemake.input.train,
    snakemake.input.evaluation,
    snakemake.params.baseline,
    snakemake.params.statistics,
    [Metric.from_dict(m) for m in snakemake.params.metrics],
    dict(snakemake.output.items()),
    snakemake.params.prices,
)
