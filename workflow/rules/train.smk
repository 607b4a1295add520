rule plan:
    """The batch plan of every suite x variant x hardware and the estimate of every run (snakemake plan)."""
    output:
        tsv=report(
            "results/plan.tsv",
            caption="../report/plan.rst",
            category="All suites",
            labels={"table": "batch plan (TSV)"},
        ),
        html=report(
            "results/plan.html",
            caption="../report/plan.rst",
            category="All suites",
            labels={"table": "batch plan"},
        ),
        estimate="results/estimate.tsv",
    log:
        "logs/plan.log",
    localrule: True
    params:
        # The table's hash, not the table: a changed plan reruns the rule, and the report's job
        # parameters stay one line. The script resolves the same config the main process did.
        plan_sha256=lambda wildcards: layout.sha256(plan_table(wildcards)),
        config_dir=str(CONFIG_DIR),
    script:
        # A script, not a run: block: run: jobs are re-parsed in a subprocess that does not see
        # --replace-workflow-config, so they would compute from a merged config.
        "../scripts/plan.py"


rule train:
    """One run of the trainer (built-in or the user's command), under torchrun or as a plain
    process, global batch fixed by the plan. Multi-node hardware starts one launcher per node
    through srun (the plugin's mpi resource). The record is the contract; checkpoints are not
    outputs, so a failed job keeps them for the resume. A preempted or timed-out SLURM job requeues
    itself after its checkpoint (docs/cluster.md).
    """
    input:
        # Ancient: a run is identified by its spec's content (hwsweep.analysis.quarantine), never by file times.
        spec=placed_spec,
        tracking=tracking_file,
    output:
        record=run_file(layout.TRAIN_RECORD),
    log:
        log_file("train.log"),
    benchmark:
        "benchmarks/{suite}/{variant}/{hardware}/seed{seed}/train.tsv"
    group:
        # Under SLURM, one job trains and then evaluates the run (allocation.smk).
        run_group
    threads: train_threads
    resources:
        # Read by the slurm executor; the profile's set-resources can override site names.
        slurm_partition=train_partition,
        gres=train_gres,
        cpus_per_task=train_threads,
        mem_mb=train_mem_mb,
        runtime=train_runtime,
        nodes=train_nodes,
        tasks=train_nodes,
        tasks_per_gpu=0,
        mpi=train_mpi,
        timing_slot=train_timing_slot,
        slurm_extra=train_slurm_extra,
    params:
        spec=run_file(layout.SPEC_FILE),
        per_node=train_per_node_launch,
        python=PYTHON,
        spec_sha256=run_spec_sha256,
    shell:
        # hwsweep.run.preempt: the run's lease held, each attempt in train.N.log (train.log the newest); in SLURM
        # a checkpointed stop requeues. A done run is not redone for its parameters (the interpreter's path on
        # another machine): its snakemake metadata is dropped while the DAG is built (common.smk).
        "{params.python} -m hwsweep.run.preempt {params.spec:q} {log:q} --"
        " {resources.mpi} {params.per_node} {params.python} -m hwsweep.run.launch {params.spec:q}"
        " --threads {threads} --spec-sha256 {params.spec_sha256}"


# A profile's set-resources replaces a resource outright: the train job's sbatch options are merged with it
# instead (train_slurm_extra), so --signal and --exclusive stay unless the profile names them.
rules.train.rule.resources["slurm_extra"] = train_slurm_extra
