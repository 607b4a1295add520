"""Thin entry point: one suite's tables -> the report's figures."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep import plots  # noqa: E402

runs = pd.read_csv(snakemake.input.runs)
comparison = pd.read_csv(snakemake.input.comparison)
baseline = snakemake.params.baseline
for metric in ("token_accuracy", "exact_accuracy"):
    plots.metric_by_hardware(runs, comparison, metric, baseline, snakemake.output[metric])
plots.equivalence_forest(pd.read_csv(snakemake.input.equivalence), snakemake.output.equivalence)
plots.speedup_by_devices(pd.read_csv(snakemake.input.speedup), snakemake.output.speedup)
plots.loss_curves(pd.read_csv(snakemake.input.curves), snakemake.output.loss_curves)
plots.time_breakdown(comparison, snakemake.output.time_breakdown)
