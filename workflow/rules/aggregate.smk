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
        equivalence=report(
            "results/{suite}/equivalence.csv",
            caption="../report/equivalence.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"suite": "{suite}", "item": "equivalence table"},
        ),
        speedup=report(
            "results/{suite}/speedup.csv",
            caption="../report/speedup_table.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"suite": "{suite}", "item": "speedup table"},
        ),
    log:
        "logs/{suite}/aggregate.log",
    params:
        baseline=MATRIX.baseline,
        statistics=MATRIX.statistics,
        metrics=[m.to_dict() for m in MATRIX.metrics],
    script:
        "../scripts/aggregate.py"


rule plot_metric:
    """One declared metric per hardware, over seeds."""
    input:
        runs="results/{suite}/runs.csv",
        comparison="results/{suite}/comparison.csv",
    output:
        report(
            "results/{suite}/plots/metric_{metric}.png",
            caption="../report/metric.rst",
            category="{suite}",
            subcategory="Seeds and hardware",
            labels={"suite": "{suite}", "item": "{metric}"},
        ),
    log:
        "logs/{suite}/plot_{metric}.log",
    params:
        baseline=MATRIX.baseline,
        metric=metric_of,
    script:
        "../scripts/plot_metric.py"


rule plot_suite:
    """The suite's figures that are not per metric."""
    input:
        runs="results/{suite}/runs.csv",
        curves="results/{suite}/curves.csv",
        comparison="results/{suite}/comparison.csv",
        equivalence="results/{suite}/equivalence.csv",
        speedup="results/{suite}/speedup.csv",
    output:
        equivalence=report(
            "results/{suite}/plots/equivalence.png",
            caption="../report/equivalence_plot.rst",
            category="{suite}",
            subcategory="Seeds and hardware",
            labels={"suite": "{suite}", "item": "equivalence forest"},
        ),
        time_breakdown=report(
            "results/{suite}/plots/time_breakdown.png",
            caption="../report/time_breakdown.rst",
            category="{suite}",
            subcategory="Speedup",
            labels={"suite": "{suite}", "item": "time breakdown"},
        ),
        speedup=report(
            "results/{suite}/plots/speedup.png",
            caption="../report/speedup.rst",
            category="{suite}",
            subcategory="Speedup",
            labels={"suite": "{suite}", "item": "speedup"},
        ),
        curves=report(
            "results/{suite}/plots/curves.png",
            caption="../report/curves.rst",
            category="{suite}",
            subcategory="Training",
            labels={"suite": "{suite}", "item": "training curves"},
        ),
    log:
        "logs/{suite}/plot.log",
    params:
        baseline=MATRIX.baseline,
    script:
        "../scripts/plot.py"


rule combine:
    """All suites in one table each: results/runs.csv and results/comparison.csv."""
    input:
        runs=all_suite_tables("runs.csv"),
        comparison=all_suite_tables("comparison.csv"),
        equivalence=all_suite_tables("equivalence.csv"),
        speedup=all_suite_tables("speedup.csv"),
    output:
        runs="results/runs.csv",
        equivalence="results/equivalence.csv",
        speedup="results/speedup.csv",
        comparison=report(
            "results/comparison.csv",
            caption="../report/all_comparison.rst",
            category="All suites",
            labels={"suite": "all", "item": "comparison table"},
        ),
    log:
        "logs/combine.log",
    script:
        "../scripts/combine.py"


rule status:
    """Watch a long sweep: done / failed / corrupt / missing runs and a partial aggregate in results/partial/.
    Rerun with `snakemake -f status`; `snakemake --report partial.html status` makes a report of it.
    """
    output:
        status=report(
            "results/partial/status.csv",
            caption="../report/status.rst",
            category="Progress",
            labels={"suite": "all", "item": "run status"},
        ),
        comparison=report(
            "results/partial/comparison.csv",
            caption="../report/partial_comparison.rst",
            category="Progress",
            labels={"suite": "all", "item": "partial comparison"},
        ),
    log:
        "logs/status.log",
    localrule: True
    params:
        config_dir=str(CONFIG_DIR),
    script:
        "../scripts/status.py"


# One target per suite: `snakemake suite_<name>` builds and aggregates only that suite.
for _suite in MATRIX.suites:

    rule:
        name:
            f"suite_{_suite}"
        input:
            suite_targets(_suite),
