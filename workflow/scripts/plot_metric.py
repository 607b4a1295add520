"""Thin entry point: one declared metric of one suite -> its figure."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep import plots  # noqa: E402

metric = snakemake.params.metric  # noqa: F821
plots.metric_by_hardware(
    pd.read_csv(snakemake.input.runs),
    pd.read_csv(snakemake.input.comparison),
    snakemake.wildcards.metric,
    snakemake.params.baseline,
    snakemake.output[0],
    scale=100.0 if metric.get("bounds") == [0, 1] else 1.0,  # shares in percentage points, as the tables
)
