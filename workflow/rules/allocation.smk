# One SLURM job per run: a run that still trains is trained and evaluated in one allocation (a snakemake group of
# its train and evaluate jobs), so it waits in the queue once; an evaluation redone alone asks for its one device.
# Locally, groups have no effect (snakemake runs each job itself).

# The string resources a train job sends to sbatch: in a group, every job must ask for the same value of each.
TRAIN_STRINGS = ("slurm_partition", "gres", "mpi", "slurm_extra")


def evaluation_settings_of_its_own():
    """Whether the profile sets evaluate's string resources itself (set-resources: a partition or GPUs of its
    own): then the evaluation stays a job of its own, as asked."""
    given = workflow.resource_settings.overwrite_resources.get("evaluate", {})
    return any(name in given for name in TRAIN_STRINGS + ("gpu", "gpu_model"))


RUN_GROUPS = {}


def run_group(wildcards):
    """The group that puts this run's train and evaluate jobs in one SLURM job (run_<suite>_<variant>_<hardware>
    _seed<seed>), when the run still trains under the slurm executor and is evaluated; None otherwise (the
    evaluation of a trained run, local runs, and inside jobs, where snakemake runs the group's jobs one by one).
    The train job holds the evaluation's minutes (train_runtime), so a group of the training alone (a train
    record asked for by itself) still gets its signal in time.
    """
    if (
        executor() != "slurm"
        or MATRIX.evaluation.kind == "none"
        or evaluation_settings_of_its_own()
    ):
        return None
    run = Run(
        wildcards.suite, wildcards.variant, wildcards.hardware, int(wildcards.seed)
    )
    if (
        run not in RUN_GROUPS
    ):  # asked by each resource of both jobs: the run's spec made once
        settled(wildcards.suite, [run])
        state = SETTLED_STATES.get(run.run_dir)
        trains = state not in (validation.DONE, validation.TRAINED)
        RUN_GROUPS[run] = (
            "run_{suite}_{variant}_{hardware}_seed{seed}".format(**wildcards)
            if trains
            else None
        )
    return RUN_GROUPS[run]


def train_resource(name, wildcards):
    """The value of a train job's resource `name` as sbatch gets it (the rule's resources hold the profile's
    set-resources for train)."""
    return setting(rules.train.rule.resources, name, "train", wildcards)


def evaluate_resource(name, alone=lambda wildcards: None, grouped=None):
    """Evaluate's resource `name`: when the two share a group, `grouped` if given, else the train job's value
    (snakemake refuses a group whose jobs ask for different strings); else `alone`'s."""

    def value(wildcards):
        if run_group(wildcards) is None:
            return alone(wildcards)
        return train_resource(name, wildcards) if grouped is None else grouped

    return value


def evaluate_mpi(wildcards):
    """In a group, train's; inside a job, a key (empty) all the same: the slurm jobstep then runs the evaluation in
    the job's batch shell, where the signal SLURM sends the training's steps before the time limit does not reach
    it (it is planned to fit: train_slurm_extra)."""
    if in_slurm_job():
        return ""
    return evaluate_resource("mpi")(wildcards)


def evaluate_slurm_extra(wildcards):
    """In a group, train's (its signal lead counts the evaluation's minutes); alone, the profile's default."""
    return evaluate_resource(
        "slurm_extra",
        lambda wildcards: setting(
            workflow.resource_settings.default_resources or {},
            "slurm_extra",
            "evaluate",
            wildcards,
        ),
    )(wildcards)


def share_train_strings():
    """Evaluate's resources for the string resources a profile gives train alone (set-resources: an account, a
    QOS, a constraint): train's value in a group, evaluate's own otherwise."""
    for name in workflow.resource_settings.overwrite_resources.get("train", {}):
        if name in TRAIN_STRINGS or not isinstance(train_resource(name, None), str):
            continue
        own = {name: rules.evaluate.rule.resources.get(name)}
        rules.evaluate.rule.resources[name] = evaluate_resource(
            name,
            lambda wildcards, own=own, name=name: setting(
                own, name, "evaluate", wildcards
            ),
        )
