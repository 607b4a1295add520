"""Thin entry point: one suite's run records -> estimated vs actual seconds per run (CSV and a page
for the report)."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.contracts import io  # noqa: E402
from hwsweep.plan import predictions  # noqa: E402
from hwsweep.plan.estimate import write_estimate_vs_actual  # noqa: E402
from hwsweep.report import tables  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

write_estimate_vs_actual(snakemake.input.train, snakemake.params.estimate, snakemake.output.csv)  # noqa: F821
note = ("What hwsweep plan --estimate says for each finished run, from the suite's other runs (measured MFU) or "
        "the assumed MFU (source), against the seconds it took (startup + training); ratio = estimated / actual. "
        "hwsweep recommend's predictions (predicted_vs_actual.csv): ")
found = predictions.write_versus(snakemake.input.train, (snakemake.input.predictions or [None])[0],  # noqa: F821
                                 snakemake.output.predicted)  # noqa: F821
note += predictions.coverage(found) + "."
frame = pd.read_csv(snakemake.output.csv)  # noqa: F821
io.write_text(snakemake.output.html, tables.plain_page("Estimated vs actual time", note, frame))  # noqa: F821
