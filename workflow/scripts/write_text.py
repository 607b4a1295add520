"""Thin entry point: write the text the main process computed (params.text) to the output, atomically."""

from hwsweep.contracts import io

io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

io.write_text(snakemake.output[0], snakemake.params.text)  # noqa: F821 - snakemake injects it
