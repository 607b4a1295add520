"""Thin entry point: one suite's run records -> runs.csv, curves.csv, comparison.csv."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

from hwsweep import io, records, stats  # noqa: E402

runs, curves = records.load(snakemake.input.train, snakemake.input.evaluation)
io.write_csv(runs, snakemake.output.runs)
io.write_csv(curves, snakemake.output.curves)
io.write_csv(stats.comparison(runs, snakemake.params.baseline), snakemake.output.comparison)
