"""Thin entry point: one suite's tables -> HTML pages the report opens inline."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.contracts import io  # noqa: E402
from hwsweep.report import tables  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

comparison, equivalence, speedup = tables.ordered(
    pd.read_csv(snakemake.input.comparison),
    pd.read_csv(snakemake.input.equivalence),
    pd.read_csv(snakemake.input.speedup),
)
pages = {
    "comparison": tables.comparison_page(comparison, snakemake.params.metrics, snakemake.params.scales,
                                         snakemake.params.confidence),
    "equivalence": tables.equivalence_page(equivalence),
    "speedup": tables.speedup_page(speedup, snakemake.params.confidence),
    "variants": tables.variants_page(pd.read_csv(snakemake.input.variants), "Variants against the reference",
                                     snakemake.params.confidence),
}
for name, text in pages.items():
    io.write_text(snakemake.output[name], text)
