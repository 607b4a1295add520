rule evaluate:
    """The run's metrics on its held-out data: the built-in evaluator or the user's evaluation command."""
    input:
        # Ancient, as train's: the records are matched by content while the DAG is built.
        spec=existing_spec,
        record=ancient(run_file(layout.TRAIN_RECORD)),
    output:
        run_file(layout.EVAL_RECORD),
    log:
        log_file("evaluate.log"),
    threads: eval_threads
    resources:
        # Read by the slurm executor: a GPU run is evaluated on a GPU, for as long as its estimate needs.
        slurm_partition=train_partition,
        gpu=eval_gpus,
        gpu_model=eval_gpu_model,
        cpus_per_task=eval_threads,
        runtime=eval_runtime,
    params:
        spec=run_file(layout.SPEC_FILE),
        python=PYTHON,
    shell:
        "{params.python} -m hwsweep.run.evaluate {params.spec:q} --threads {threads} > {log:q} 2>&1"
