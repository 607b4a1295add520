"""Thin entry point: write the text the main process computed (params.text) to the output, atomically."""

from hwsweep.contracts.io import write_text

write_text(snakemake.output[0], snakemake.params.text)  # noqa: F821 - snakemake injects it
