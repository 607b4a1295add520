"""Thin entry point: one suite's run records -> estimated vs actual seconds per run (CSV and a page
for the report)."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.contracts.io import write_text  # noqa: E402
from hwsweep.plan.estimate import write_estimate_vs_actual  # noqa: E402
from hwsweep.report import tables  # noqa: E402

write_estimate_vs_actual(snakemake.input.train, snakemake.params.estimate, snakemake.output.csv)  # noqa: F821
note = ("What hwsweep plan --estimate says for each finished run, from the suite's other runs (measured MFU) or "
        "the assumed MFU (source), against the seconds it took (startup + training); ratio = estimated / actual.")
frame = pd.read_csv(snakemake.output.csv)  # noqa: F821
write_text(snakemake.output.html, tables.plain_page("Estimated vs actual time", note, frame))  # noqa: F821
