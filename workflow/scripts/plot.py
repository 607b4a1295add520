"""Thin entry point: one suite's tables -> the report's figures that are not per metric."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep import plots  # noqa: E402

comparison = pd.read_csv(snakemake.input.comparison)
plots.equivalence_forest(pd.read_csv(snakemake.input.equivalence), snakemake.output.equivalence)
plots.speedup_by_devices(pd.read_csv(snakemake.input.speedup), snakemake.output.speedup)
plots.curves(pd.read_csv(snakemake.input.curves), snakemake.output.curves)
plots.time_breakdown(comparison, snakemake.output.time_breakdown)
