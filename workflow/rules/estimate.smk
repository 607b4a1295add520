rule estimate_vs_actual:
    """What `hwsweep plan --estimate` would have said for each finished run of a suite (from the other
    runs, or the assumed MFU) against the seconds it took: results/{suite}/estimate_vs_actual.csv; and
    what `hwsweep recommend` predicted for the runs it was asked about: results/{suite}/predicted_vs_actual.csv.
    """
    input:
        train=suite_train_records,
        predictions=recorded_predictions,
    output:
        csv="results/{suite}/estimate_vs_actual.csv",
        predicted="results/{suite}/predicted_vs_actual.csv",
        html=report(
            "results/{suite}/tables/estimate_vs_actual.html",
            caption="../report/estimate_vs_actual.rst",
            category="{suite}",
            subcategory="Tables",
            labels={"table": "estimated vs actual time"},
        ),
    log:
        "logs/{suite}/estimate_vs_actual.log",
    localrule: True
    params:
        estimate=MATRIX.estimate,
    script:
        "../scripts/estimate_vs_actual.py"
