"""Thin entry point: concatenate every suite's tables into results/."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep.contracts import io  # noqa: E402
from hwsweep.report import tables  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

frames = {name: pd.concat(map(pd.read_csv, snakemake.input[name]), ignore_index=True)
          for name in ("runs", "comparison", "equivalence", "speedup", "variants")}  # fmt: skip
for name, frame in frames.items():
    io.write_csv(frame, snakemake.output[name])
(comparison,) = tables.ordered(frames["comparison"])
page = tables.comparison_page(comparison, snakemake.params.metrics, snakemake.params.scales)
io.write_text(snakemake.output.page, page)
