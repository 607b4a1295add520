"""Thin entry point: every suite's runs -> the config's comparisons across suites (results/compare.csv) and its page."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

from hwsweep.analysis.aggregate import cross  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402
from hwsweep.report import tables  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

matrix = resolve(snakemake.config, config_dir=snakemake.params.config_dir)  # noqa: F821
frame = cross(snakemake.input.runs, matrix.compare, matrix.statistics, list(matrix.metrics), snakemake.output.compare)  # noqa: F821
confidence = matrix.statistics.get("confidence", 0.95)
io.write_text(snakemake.output.page, tables.variants_page(frame, "Comparisons across suites", confidence))  # noqa: F821
