# hwsweep: suites x seeds x hardware -> torchrun DDP train -> evaluate -> aggregate -> report.
# The experiment lives in config/config.yaml; runtime settings live in profiles/.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/estimate.smk"


rule all:
    default_target: True
    input:
        all_targets(),
