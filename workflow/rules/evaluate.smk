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
    group:
        # Under SLURM, in the run's train job when the run still trains (allocation.smk).
        run_group
    threads: eval_threads
    resources:
        # Read by the slurm executor: a GPU run is evaluated on a GPU, for as long as its estimate needs; in its
        # train job's allocation, on what the training asked for.
        slurm_partition=evaluate_resource("slurm_partition", train_partition),
        gres=evaluate_resource("gres"),
        gpu=evaluate_resource("gpu", eval_gpus),
        gpu_model=evaluate_resource("gpu_model", eval_gpu_model),
        mpi=evaluate_mpi,
        slurm_extra=evaluate_slurm_extra,
        cpus_per_task=eval_threads,
        runtime=evaluate_resource("runtime", eval_runtime, grouped=0),
    params:
        spec=run_file(layout.SPEC_FILE),
        python=PYTHON,
    shell:
        "{params.python} -m hwsweep.run.evaluate {params.spec:q} --threads {threads} > {log:q} 2>&1"


share_train_strings()
