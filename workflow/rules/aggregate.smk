from hwsweep.analysis.stats import Settings

# Shares (bounds [0, 1]) are written in percentage points in every table and figure.
SCALES = Settings.of(MATRIX.statistics, MATRIX.metrics).scales


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
            subcategory="Tables (CSV, every column)",
            labels={"table": "comparison"},
        ),
        equivalence=report(
            "results/{suite}/equivalence.csv",
            caption="../report/equivalence.rst",
            category="{suite}",
            subcategory="Tables (CSV, every column)",
            labels={"table": "equivalence"},
        ),
        speedup=report(
            "results/{suite}/speedup.csv",
            caption="../report/speedup_table.rst",
            category="{suite}",
            subcategory="Tables (CSV, every column)",
            labels={"table": "speedup"},
        ),
        variants=report(
            "results/{suite}/variants.csv",
            caption="../report/variants.rst",
            category="{suite}",
            subcategory="Tables (CSV, every column)",
            labels={"table": "variants"},
        ),
        settings=STAMPS["aggregate"][0],
    log:
        "logs/{suite}/aggregate.log",
    localrule: True
    params:
        # The script resolves the same config itself.
        settings_sha256=AGGREGATE_SHA256,
        config_dir=str(CONFIG_DIR),
    script:
        "../scripts/aggregate.py"


rule table_pages:
    """The suite's tables as HTML pages that open in the report."""
    input:
        comparison="results/{suite}/comparison.csv",
        equivalence="results/{suite}/equivalence.csv",
        speedup="results/{suite}/speedup.csv",
        variants="results/{suite}/variants.csv",
    output:
        comparison=report(
            "results/{suite}/tables/comparison.html",
            caption="../report/comparison_page.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"table": "comparison with the baseline"},
        ),
        equivalence=report(
            "results/{suite}/tables/equivalence.html",
            caption="../report/equivalence_page.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"table": "equivalence per metric"},
        ),
        speedup=report(
            "results/{suite}/tables/speedup.html",
            caption="../report/speedup_page.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"table": "speedup and cost"},
        ),
        variants=report(
            "results/{suite}/tables/variants.html",
            caption="../report/variants_page.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"table": "variants against the reference"},
        ),
    log:
        "logs/{suite}/tables.log",
    localrule: True
    params:
        metrics=MATRIX.metric_names(),
        scales=SCALES,
        confidence=MATRIX.statistics.get("confidence", 0.95),
    script:
        "../scripts/tables.py"


rule plot_suite:
    """Every figure of the suite, one per declared metric too (one job: a figure that fails gets a notice, the
    others are drawn, and the log names it)."""
    input:
        runs="results/{suite}/runs.csv",
        curves="results/{suite}/curves.csv",
        comparison="results/{suite}/comparison.csv",
        equivalence="results/{suite}/equivalence.csv",
        speedup="results/{suite}/speedup.csv",
    output:
        **metric_figures(),
        equivalence=report(
            "results/{suite}/plots/equivalence.png",
            caption="../report/equivalence_plot.rst",
            category="{suite}",
            subcategory="Seeds and hardware",
            labels={"figure": "differences to the baseline (forest)"},
        ),
        time_breakdown=report(
            "results/{suite}/plots/time_breakdown.png",
            caption="../report/time_breakdown.rst",
            category="{suite}",
            subcategory="Speedup and cost",
            labels={"figure": "time per run"},
        ),
        speedup=report(
            "results/{suite}/plots/speedup.png",
            caption="../report/speedup.rst",
            category="{suite}",
            subcategory="Speedup and cost",
            labels={"figure": "speedup"},
        ),
        curves=report(
            "results/{suite}/plots/curves.png",
            caption="../report/curves.rst",
            category="{suite}",
            subcategory="Training",
            labels={"figure": "training curves"},
        ),
    log:
        "logs/{suite}/plot.log",
    localrule: True
    params:
        baseline=MATRIX.baseline,
        confidence=MATRIX.statistics.get("confidence", 0.95),
        metrics=MATRIX.metric_names(),
        scales=SCALES,
    script:
        "../scripts/plot.py"


rule combine:
    """All suites in one table each: results/runs.csv and results/comparison.csv."""
    input:
        runs=all_suite_tables("runs.csv"),
        comparison=all_suite_tables("comparison.csv"),
        equivalence=all_suite_tables("equivalence.csv"),
        speedup=all_suite_tables("speedup.csv"),
        variants=all_suite_tables("variants.csv"),
    output:
        runs="results/runs.csv",
        equivalence="results/equivalence.csv",
        speedup="results/speedup.csv",
        variants="results/variants.csv",
        comparison=report(
            "results/comparison.csv",
            caption="../report/all_comparison.rst",
            category="All suites",
            labels={"table": "comparison of every suite (CSV)"},
        ),
        page=report(
            "results/comparison.html",
            caption="../report/all_comparison.rst",
            category="All suites",
            labels={"table": "comparison of every suite"},
        ),
    log:
        "logs/combine.log",
    localrule: True
    params:
        metrics=MATRIX.metric_names(),
        scales=SCALES,
    script:
        "../scripts/combine.py"


rule compare_suites:
    """The config's comparisons across suites (compare): results/compare.csv and its page."""
    input:
        runs=compare_suite_tables,
    output:
        compare=report(
            "results/compare.csv",
            caption="../report/compare.rst",
            category="All suites",
            labels={"table": "comparisons across suites (CSV)"},
        ),
        page=report(
            "results/compare.html",
            caption="../report/compare.rst",
            category="All suites",
            labels={"table": "comparisons across suites"},
        ),
    log:
        "logs/compare.log",
    localrule: True
    params:
        compare=MATRIX.compare,
        config_dir=str(CONFIG_DIR),
    script:
        "../scripts/compare.py"


rule status:
    """Watch a long sweep: done / failed / corrupt / missing runs and a partial aggregate in results/partial/.
    Rerun with `snakemake -f status`; `snakemake --report partial.html status` makes a report of it.
    """
    input:
        writable_status,
    output:
        status=report(
            "results/partial/status.csv",
            caption="../report/status.rst",
            category="Progress",
            labels={"table": "run status"},
        ),
        comparison=report(
            "results/partial/comparison.csv",
            caption="../report/partial_comparison.rst",
            category="Progress",
            labels={"table": "partial comparison"},
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
            suite_outputs(_suite),


rule time_to_target:
    """A suite with targets (issue 23): steps, time and cost to each target per run, compared per hardware."""
    input:
        train=suite_train_records,
    output:
        runs=report(
            "results/{suite}/time_to_target.csv",
            caption="../report/time_to_target.rst",
            category="{suite}",
            subcategory="Tables (CSV, every column)",
            labels={"table": "time to target per run"},
        ),
        comparison="results/{suite}/target_comparison.csv",
        curves="results/{suite}/target_curves.csv",
        page=report(
            "results/{suite}/tables/time_to_target.html",
            caption="../report/time_to_target.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"table": "time to target"},
        ),
        figure=report(
            "results/{suite}/plots/time_to_target.png",
            caption="../report/time_to_target_plot.rst",
            category="{suite}",
            subcategory="Time to target",
            labels={"figure": "metric against steps and time, with the target"},
        ),
        settings=STAMPS["time_to_target"][0],
    log:
        "logs/{suite}/time_to_target.log",
    localrule: True
    params:
        settings_sha256=TARGET_SHA256,
        config_dir=str(CONFIG_DIR),
    script:
        "../scripts/time_to_target.py"
