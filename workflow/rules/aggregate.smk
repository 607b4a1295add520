rule aggregate_suite:
    """One suite's runs: runs.csv, per-step curves, and the seed/speedup comparison."""
    input:
        train=suite_train_records,
        evaluation=suite_eval_records,
    output:
        runs="results/{suite}/runs.csv",
        curves="results/{suite}/curves.csv",
        comparison=report(
            "results/{suite}/comparison.csv",
            caption="../report/comparison.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"suite": "{suite}", "item": "comparison table"},
        ),
    log:
        "logs/{suite}/aggregate.log",
    conda:
        "../../environment.yml"
    params:
        baseline=MATRIX.baseline,
    script:
        "../scripts/aggregate.py"


rule plot_suite:
    """The suite's figures for the report."""
    input:
        runs="results/{suite}/runs.csv",
        curves="results/{suite}/curves.csv",
        comparison="results/{suite}/comparison.csv",
    output:
        token_accuracy=report(
            "results/{suite}/plots/token_accuracy.png",
            caption="../report/token_accuracy.rst",
            category="{suite}",
            subcategory="Seeds and hardware",
            labels={"suite": "{suite}", "item": "token accuracy"},
        ),
        exact_accuracy=report(
            "results/{suite}/plots/exact_accuracy.png",
            caption="../report/exact_accuracy.rst",
            category="{suite}",
            subcategory="Seeds and hardware",
            labels={"suite": "{suite}", "item": "exact accuracy"},
        ),
        speedup=report(
            "results/{suite}/plots/speedup.png",
            caption="../report/speedup.rst",
            category="{suite}",
            subcategory="Speedup",
            labels={"suite": "{suite}", "item": "speedup"},
        ),
        loss_curves=report(
            "results/{suite}/plots/loss_curves.png",
            caption="../report/loss_curves.rst",
            category="{suite}",
            subcategory="Training",
            labels={"suite": "{suite}", "item": "loss curves"},
        ),
    log:
        "logs/{suite}/plot.log",
    conda:
        "../../environment.yml"
    params:
        baseline=MATRIX.baseline,
    script:
        "../scripts/plot.py"


rule combine:
    """All suites in one table each: results/runs.csv and results/comparison.csv."""
    input:
        runs=all_suite_tables("runs.csv"),
        comparison=all_suite_tables("comparison.csv"),
    output:
        runs="results/runs.csv",
        comparison=report(
            "results/comparison.csv",
            caption="../report/all_comparison.rst",
            category="All suites",
            labels={"suite": "all", "item": "comparison table"},
        ),
    log:
        "logs/combine.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/combine.py"


# One target per suite: `snakemake suite_<name>` builds and aggregates only that suite.
for _suite in MATRIX.suites:

    rule:
        name:
            f"suite_{_suite}"
        input:
            suite_targets(_suite),
