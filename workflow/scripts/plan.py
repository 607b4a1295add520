"""Thin entry point: the batch plan of every suite x variant x hardware -> results/plan.tsv and
an HTML page of it for the report; the estimate of every run (hwsweep plan --estimate) -> results/estimate.tsv."""

import io as text_io

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

import pandas as pd  # noqa: E402

from hwsweep.contracts import io  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402
from hwsweep.plan.estimate import run_specs, write_estimate  # noqa: E402
from hwsweep.plan.table import format_table, plan_rows  # noqa: E402
from hwsweep.report import tables  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

matrix = resolve(snakemake.config, config_dir=snakemake.params.config_dir)  # noqa: F821 - snakemake injects it
tsv = format_table(plan_rows(matrix), sep="\t")
io.write_text(snakemake.output.tsv, tsv)  # noqa: F821
frame = pd.read_csv(text_io.StringIO(tsv), sep="\t", keep_default_na=False)
note = ("micro_batch × devices (nodes × devices_per_node) × accumulation = global_batch on every hardware; "
        "est_memory_gb is the planner's estimate per device against memory_gb.")
io.write_text(snakemake.output.html, tables.plain_page("Batch plan", note, frame))  # noqa: F821
write_estimate([s.to_dict() for s in run_specs(matrix)], matrix.estimate, snakemake.output.estimate)  # noqa: F821
