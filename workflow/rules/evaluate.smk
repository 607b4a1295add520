rule evaluate:
    """The run's metrics on its held-out data: the built-in evaluator or the user's evaluation command."""
    input:
        spec=run_file(layout.SPEC_FILE),
        record=run_file(layout.TRAIN_RECORD),
    output:
        run_file(layout.EVAL_RECORD),
    log:
        log_file("evaluate.log"),
    threads: 1
    params:
        python=PYTHON,
    shell:
        "{params.python} -m hwsweep.run.evaluate {input.spec:q} --threads {threads} > {log:q} 2>&1"
