"""Thin entry point: one suite's tables -> every figure of the suite's report (one job: the per-metric figures too)."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.analysis.aggregate import fixed_steps  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.report import plots  # noqa: E402
from hwsweep.report.targets import ALL_STOPPED  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

out, params = snakemake.output, snakemake.params  # noqa: F821
runs = fixed_steps(pd.read_csv(snakemake.input.runs))  # noqa: F821 - a run stopped at its targets has no fixed steps
if runs.empty:  # every run stopped at its targets: no fixed-steps tables
    for path in out:
        plots.notice(path, ALL_STOPPED)
else:
    comparison = pd.read_csv(snakemake.input.comparison)  # noqa: F821
    order = plots.hardware_order(comparison, params.baseline)  # one order in every figure
    figures = {
        out.equivalence: lambda: plots.equivalence_forest(pd.read_csv(snakemake.input.equivalence),  # noqa: F821
                                                          out.equivalence, params.baseline, params.confidence, order),
        out.speedup: lambda: plots.speedup_by_devices(pd.read_csv(snakemake.input.speedup), comparison,  # noqa: F821
                                                      params.baseline, out.speedup),
        out.curves: lambda: plots.curves(pd.read_csv(snakemake.input.curves), params.baseline, out.curves,  # noqa: F821
                                         params.confidence, order),
        out.time_breakdown: lambda: plots.time_breakdown(comparison, params.baseline, out.time_breakdown),
    }
    for metric in params.metrics:  # shares in percentage points, as in the tables
        path = out[f"metric_{metric}"]
        figures[path] = lambda m=metric, p=path: plots.metric_by_hardware(runs, comparison, m, params.baseline, p,
                                                                          scale=params.scales.get(m, 1.0))
    plots.each_figure(figures, snakemake.log[0])  # noqa: F821 - a figure that fails costs no other its figure
