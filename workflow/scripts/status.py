"""Thin entry point: the sweep's progress and a partial aggregate in results/partial/."""

import sys

from hwsweep.config import resolve
from hwsweep.status import write_status

counts = write_status(resolve(snakemake.config)).state.value_counts()  # noqa: F821 - snakemake injects it
summary = ", ".join(f"{n} {state}" for state, n in counts.items())
print(f"hwsweep status: {summary}; see results/partial/", file=sys.stderr)
with open(snakemake.log[0], "w") as log:  # noqa: F821
    print(summary, file=log)
