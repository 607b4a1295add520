"""Thin entry point: the batch plan of every suite x variant x hardware -> results/plan.tsv."""

from hwsweep.config import resolve
from hwsweep.io import write_text
from hwsweep.plantable import format_table, plan_rows

matrix = resolve(snakemake.config, config_dir=snakemake.params.config_dir)  # noqa: F821 - snakemake injects it
write_text(snakemake.output[0], format_table(plan_rows(matrix), sep="\t"))  # noqa: F821
