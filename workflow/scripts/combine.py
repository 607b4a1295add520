"""Thin entry point: concatenate every suite's tables into results/."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 - snakemake injects it

import pandas as pd  # noqa: E402

from hwsweep import io  # noqa: E402

for name in ("runs", "comparison", "equivalence", "speedup"):
    io.write_csv(pd.concat(map(pd.read_csv, snakemake.input[name]), ignore_index=True), snakemake.output[name])
