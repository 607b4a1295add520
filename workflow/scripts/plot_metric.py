"""Thin entry point: one declared metric of one suite -> its figure."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.analysis.aggregate import fixed_steps  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.report import plots  # noqa: E402
from hwsweep.report.targets import ALL_STOPPED  # noqa: E402

io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

runs = fixed_steps(pd.read_csv(snakemake.input.runs))  # a run stopped at its targets has no metric at the fixed steps
if runs.empty:
    plots.notice(snakemake.output[0], ALL_STOPPED)
else:
    plots.metric_by_hardware(
        runs,
        pd.read_csv(snakemake.input.comparison),
        snakemake.wildcards.metric,
        snakemake.params.baseline,
        snakemake.output[0],
        scale=snakemake.params.scale,  # noqa: F821 - shares in percentage points, as in the tables
    )
