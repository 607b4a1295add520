# hwsweep: suites x seeds x hardware -> torchrun DDP train -> evaluate -> aggregate -> report.
# The experiment lives in config/config.yaml; runtime settings live in profiles/.
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
