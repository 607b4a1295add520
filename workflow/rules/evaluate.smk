rule evaluate:
    """The run's metrics on its held-out data: the built-in evaluator or the user's evaluation command."""
    input:
        spec=run_file(layout.SPEC_FILE),
        record=run_file(layout.TRAIN_RECORD),
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
        python=PYTHON,
    shell:
        "{params.python} -m hwsweep.run.evaluate {input.spec:q} --threads {threads} > {log:q} 2>&1"
