"""Thin entry point: one suite's run records -> runs, curves, equivalence, speedup, comparison, variants tables;
the verdict tables also go to the trackers the config names (tracking:)."""

import sys
from pathlib import Path

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

from hwsweep.analysis.aggregate import aggregate, prices_of  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402
from hwsweep.run.tracking import publish_tables  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

matrix = resolve(snakemake.config, config_dir=snakemake.params.config_dir)  # noqa: F821
aggregate(
    snakemake.input.train,  # noqa: F821
    snakemake.input.evaluation,  # noqa: F821
    matrix.baseline,
    matrix.statistics,
    list(matrix.metrics),
    dict(snakemake.output.items()),  # noqa: F821
    prices_of(matrix.hardware),
    matrix.references.get(snakemake.wildcards.suite),  # noqa: F821
)
# The settings these tables were made with, for the report to check (hwsweep.report.current).
io.write_text(snakemake.output.settings, snakemake.params.settings_sha256 + "\n")  # noqa: F821
suite = snakemake.wildcards.suite  # noqa: F821
verdicts = {name: snakemake.output[name] for name in ("comparison", "equivalence", "speedup")}  # noqa: F821
publish_tables(suite, Path(verdicts["comparison"]).parent, matrix.tracking, verdicts)
