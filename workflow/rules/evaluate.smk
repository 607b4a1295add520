rule evaluate:
    """Token and exact-sequence accuracy of the final checkpoint on the fixed held-out set."""
    input:
        spec=run_file(layout.SPEC_FILE),
        record=run_file(layout.TRAIN_RECORD),
        checkpoint=run_file(layout.FINAL_CHECKPOINT),
    output:
        run_file(layout.EVAL_RECORD),
    log:
        log_file("evaluate.log"),
    threads: 1
    params:
        python=PYTHON,
        clean="" if MATRIX.keep_checkpoints else "--clean-checkpoints",
    shell:
        "{params.python} -m hwsweep.evaluate {input.spec:q} --threads {threads} {params.clean} > {log:q} 2>&1"
