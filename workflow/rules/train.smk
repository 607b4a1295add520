rule spec:
    """Resolve one run's RunSpec (recipe, hardware, batch plan, seed) into spec.json."""
    output:
        run_file(layout.SPEC_FILE),
    params:
        spec=run_spec_json,
    log:
        log_file("spec.log"),
    localrule: True
    run:
        from hwsweep.io import write_text

        write_text(output[0], params.spec + "\n")


rule train:
    """One run under torchrun: gloo on CPU, NCCL on CUDA, global batch fixed by the plan."""
    input:
        spec=run_file(layout.SPEC_FILE),
    output:
        record=run_file(layout.TRAIN_RECORD),
        checkpoint=run_file(layout.FINAL_CHECKPOINT),
    log:
        log_file("train.log"),
    benchmark:
        "benchmarks/{suite}/{variant}/{hardware}/seed{seed}/train.tsv"
    params:
        processes=train_processes,
    threads: train_threads
    shell:
        # OMP_NUM_THREADS only silences torchrun's notice; the trainer sets threads per process.
        "OMP_NUM_THREADS=1 {TORCHRUN} --standalone --nnodes 1 --nproc_per_node {params.processes}"
        " -m hwsweep.train {input.spec:q} --threads {threads} > {log:q} 2>&1"
