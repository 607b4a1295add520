"""Thin entry point: one suite's run records -> estimated vs actual seconds per run."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

from hwsweep.estimate import write_estimate_vs_actual  # noqa: E402

write_estimate_vs_actual(snakemake.input.train, snakemake.params.estimate, snakemake.output[0])  # noqa: F821
