"""Thin entry point: one suite's train records -> time-to-target per run, per hardware, its page and figure."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

from hwsweep.analysis import target  # noqa: E402
from hwsweep.analysis.aggregate import prices_of  # noqa: E402
from hwsweep.contracts import catalog, io  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402
from hwsweep.report import targets as report  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

matrix = resolve(snakemake.config, config_dir=snakemake.params.config_dir)  # noqa: F821
goals = matrix.targets[snakemake.wildcards.suite]  # noqa: F821
runs, curves = target.load(snakemake.input.train, goals, list(matrix.metrics), prices_of(matrix.hardware),  # noqa: F821
                           catalog.CURRENCY)  # fmt: skip
margins = {(t.metric, t.value): t.steps_margin for t in goals}
confidence = matrix.statistics.get("confidence", 0.95)
table = target.compare(runs, matrix.baseline, margins, confidence)
out = snakemake.output  # noqa: F821
io.write_csv(runs, out.runs)
io.write_csv(table, out.comparison)
io.write_csv(curves, out.curves)
io.write_text(out.page, report.page_html(table, confidence))
report.figure(curves, runs, [(t.metric, t.value) for t in goals], matrix.baseline, out.figure)
io.write_text(out.settings, snakemake.params.settings_sha256 + "\n")  # noqa: F821 - the settings, for the report
