# hwsweep: suites x seeds x hardware -> torchrun DDP train -> evaluate -> aggregate -> report.
# The experiment lives in config/config.yaml; runtime settings live in profiles/.
import gc

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/estimate.smk"


# The landing page: workflow/report/workflow.rst, headed by each suite's answer when a report is built.
report: report_text()


rule all:
    default_target: True
    input:
        all_inputs(),


# What parsing made (snakemake's, pandas' and hwsweep's modules) lives as long as the process: left out of the
# garbage collector's walks, each snakemake of this workflow (a dry run, status, a job) spends 0.3 CPU-s less.
gc.freeze()
