# hwsweep: suites x seeds x hardware -> torchrun DDP train -> evaluate -> aggregate -> report.
# The experiment lives in config/config.yaml; runtime settings live in profiles/.
import gc

# The cyclic collector held while the workflow is parsed: the imports (hwsweep's, pandas') make objects that live
# as long as the process, which the collector would walk again and again as they come (each snakemake of this
# workflow, a job step under SLURM included, spends 0.3-0.4 CPU-s less); on again, with them frozen, at the end.
collecting = gc.isenabled()
gc.disable()

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/settle.smk"
include: "workflow/rules/allocation.smk"
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


signatures_once()

# What parsing made (snakemake's, pandas' and hwsweep's modules) lives as long as the process: left out of the
# garbage collector's walks, each snakemake of this workflow (a dry run, status, a job) spends 0.3 CPU-s less.
gc.freeze()
if collecting:
    gc.enable()
