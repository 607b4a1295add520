"""Thin entry point: one suite's tables -> the report's figures that are not per metric."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.analysis.aggregate import fixed_steps  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.report import plots  # noqa: E402
from hwsweep.report.targets import ALL_STOPPED  # noqa: E402

io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

baseline, confidence = snakemake.params.baseline, snakemake.params.confidence  # noqa: F821
if fixed_steps(pd.read_csv(snakemake.input.runs)).empty:  # every run stopped at its targets: no fixed-steps tables
    for path in snakemake.output:
        plots.notice(path, ALL_STOPPED)
else:
    comparison = pd.read_csv(snakemake.input.comparison)
    order = plots.hardware_order(comparison, baseline)  # one order in every figure
    plots.equivalence_forest(pd.read_csv(snakemake.input.equivalence), snakemake.output.equivalence, baseline,
                             confidence, order)  # fmt: skip
    plots.speedup_by_devices(pd.read_csv(snakemake.input.speedup), comparison, baseline, snakemake.output.speedup)
    plots.curves(pd.read_csv(snakemake.input.curves), baseline, snakemake.output.curves, confidence, order)
    plots.time_breakdown(comparison, baseline, snakemake.output.time_breakdown)
