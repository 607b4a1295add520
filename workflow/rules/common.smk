# Bookkeeping only: paths, wildcards, input functions and resources. Never imports torch.
import inspect
import json
import os
import shlex
import sys
from pathlib import Path

from hwsweep.analysis.aggregate import prices_of
from hwsweep.contracts import io, lease, secrets
from hwsweep.contracts.hardware import DEFAULT_RUNTIME_MIN
from hwsweep.contracts import spec as layout
from hwsweep.contracts import tracking as tracking_contract
from hwsweep.plan import placement, shared
from snakemake.common import FUNC_OVERWRITE_PARAMS_ATTR
from snakemake.utils import update_config

from hwsweep.plan.config import ConfigError, load_file, parse_override, resolve_or_exit

# The folder of the config file that was given last: a command's relative workdir is taken from it, and the
# scripts resolve the config from it (a job parameter). Inside the working directory it is named relative to it,
# so a sweep folder moved or copied elsewhere keeps its jobs' parameters: nothing in it reruns.
_CONFIG_PATH = Path(
    (workflow.overwrite_configfiles or workflow.configfiles or ["."])[-1]
).parent.resolve()
CONFIG_DIR = (
    _CONFIG_PATH.relative_to(Path.cwd().resolve())
    if _CONFIG_PATH.is_relative_to(Path.cwd().resolve())
    else _CONFIG_PATH
)

# A job computes from the config its main process resolved, never from its own merge (hwsweep.plan.shared).
IS_JOB = bool(workflow.remote_exec or workflow.subprocess_exec)
SHARED = (workflow.overwrite_configfiles, workflow.config_settings.config_args)
if IS_JOB:
    try:
        shared.read_into(config, *SHARED)
    except shared.MissingConfig as e:
        print(f"hwsweep: {e}", file=sys.stderr)
        sys.exit(1)

# snakemake has read the config files with YAML 1.1 as it is: each is read again, as `hwsweep plan` reads it, so a
# key given twice or a number YAML 1.1 reads otherwise (1:30, 010) is refused in one line, not taken silently.
# `--config KEY=VALUE` values are read the same way (snakemake reads a list's items as strings).
if not IS_JOB:
    try:
        for _path in workflow.overwrite_configfiles or workflow.configfiles:
            load_file(_path)
        for _entry in workflow.config_settings.config_args or []:
            update_config(config, dict([parse_override(_entry)]))
    except ConfigError as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        sys.exit(1)

# snakemake prints its own command line (sys.argv) to the console and .snakemake/log once the workflow starts: a
# secret given in a --config override is masked there (the override itself was read above).
sys.argv[:] = secrets.redact_argv(sys.argv)

# Validates the config (schema + plan) before any job is scheduled; one line on error. Its secrets are sealed in
# place (hwsweep.plan.config.sealing): the config shared with the jobs below holds none, the jobs inherit them.
MATRIX = resolve_or_exit(config, CONFIG_DIR)
if not IS_JOB:
    try:
        shared.write(config, *SHARED)
    except io.StorageError as e:
        print(f"hwsweep: {e}", file=sys.stderr)
        sys.exit(1)
    # The jobs inherit it (sbatch exports the environment): a run's lease names the snakemake that waits for it.
    os.environ[lease.SNAKEMAKE_ENV] = lease.snakemake_mark()
for _warning in MATRIX.warnings:
    print(f"hwsweep warning: {_warning}", file=sys.stderr)


# The planner's rule for names (hwsweep.contracts.spec.name_problem), so a name it accepts is one these match.
wildcard_constraints:
    suite=layout.NAME,
    hardware=layout.NAME,
    variant=layout.VARIANT,
    seed=r"\d+",


MAX_SIGNAL_LEAD_S = 65535  # sbatch --signal's largest sig_time

# The interpreter running snakemake also runs the jobs, so local runs need no activated venv.
PYTHON = shlex.quote(sys.executable)


def run_file(name):
    return f"{layout.RUN_DIR}/{name}"


def log_file(name):
    return f"{layout.LOG_DIR}/{name}"


def run_spec_of(wildcards):
    return MATRIX.spec(
        wildcards.suite, wildcards.variant, wildcards.hardware, int(wildcards.seed)
    )


def run_spec_json(wildcards):
    """The resolved RunSpec as canonical JSON: a params value, so a changed recipe reruns."""
    return layout.canonical_json(run_spec_of(wildcards))


def tracking_file(wildcards):
    """The train job's ancient input: which trackers see the run (config tracking), its TRACKING_FILE, written
    from the config by this process while it builds the DAG (a dry run says so and writes nothing). Not a rule's
    output: snakemake leaves out of its plan every job after an ancient input's rule that reruns, even a train
    job whose record is missing, so a changed tracking block hid the pending jobs of unfinished runs.
    """
    path = run_file(layout.TRACKING_FILE).format(**wildcards)
    if executor() is not None and path not in SETTLED_TRACKING:
        SETTLED_TRACKING.add(path)
        dry_run = EXECUTOR["dry_run"]
        changed = tracking_contract.refresh_run_file(
            Path(path).parent, MATRIX.tracking, dry_run
        )
        if changed and not EXECUTOR.get("said_tracking"):
            EXECUTOR["said_tracking"] = True
            done = "would be rewritten by a real run" if dry_run else "are rewritten"
            print(
                f"hwsweep: the config's tracking block changed: the runs' {layout.TRACKING_FILE} {done} "
                "(nothing retrains; a run trains with the trackers named when it starts)",
                file=sys.stderr,
            )
    return ancient(path) if os.path.exists(path) else []


SETTLED_TRACKING = set()


def run_spec_sha256(wildcards):
    """What the train job checks spec.json against: the spec this process scheduled."""
    return layout.sha256(run_spec_json(wildcards))


def hardware_of(wildcards):
    return MATRIX.hardware[wildcards.hardware]


def train_processes(wildcards):
    return hardware_of(wildcards).devices_per_node


def train_threads(wildcards):
    return hardware_of(wildcards).cpus_per_task


def train_nodes(wildcards):
    return hardware_of(wildcards).nodes


def in_slurm_job():
    """Whether this process is a job running inside a SLURM allocation (the slurm executor's jobs: remote
    mode, and the jobstep keeps SLURM_JOB_ID in their environment)."""
    return bool(workflow.remote_exec and os.environ.get("SLURM_JOB_ID"))


def train_mpi(wildcards):
    """The prefix that starts the launcher: srun for multi-node hardware (one launcher per node), and in
    every SLURM job, so the trainer runs in a job step, where --signal and `scancel --signal` reach it (they
    skip the batch shell); empty for one node elsewhere. A key on every train job, so the jobstep executor
    never wraps the whole snakemake job in srun. The submitting process sees "" for one node: the slurm
    executor takes a non-empty mpi for an MPI job of several tasks."""
    hw = hardware_of(wildcards)
    if hw.nodes > 1:
        return "srun"
    if in_slurm_job():
        # Explicit: the jobstep removes SLURM_NNODES and friends from the rule's environment.
        return f"srun --nodes=1 --ntasks=1 --cpus-per-task={hw.cpus_per_task}"
    return ""


def train_per_node_launch(wildcards):
    # Passed explicitly: the slurm jobstep removes SLURM_NNODES and friends from the rule's environment.
    hw = hardware_of(wildcards)
    if hw.nodes == 1:
        return ""
    return f"--nodes={hw.nodes} --ntasks-per-node=1 --cpus-per-task={hw.cpus_per_task}"


def train_timing_slot(wildcards):
    """1 unless timing: shared: the local profile offers one slot, so timed runs never overlap (a SLURM
    run has no limit on the slot: there timing: exclusive asks for whole nodes instead).
    """
    return 0 if MATRIX.timing == "shared" else 1


def setting(given, name, rule=None, wildcards=None):
    """The value of resource `name` in a mapping of resources (a profile's set-resources or default-resources, a
    rule's resources) as snakemake evaluates it for `rule`; None if it has none."""
    given = given.get(name)
    if hasattr(given, "evaluate"):
        # an expression or a function: each takes the keywords it names
        given = given.evaluate(
            wildcards, input=None, attempt=1, threads=1, rulename=rule, async_run=None
        ).value
    elif callable(given):
        given = given(wildcards)
    return given


def profile_slurm_extra(rule):
    """The slurm_extra a profile's set-resources (or --set-resources) gives `rule`; "" if none."""
    given = workflow.resource_settings.overwrite_resources.get(rule, {})
    return str(setting(given, "slurm_extra", rule) or "")


def train_slurm_extra(wildcards):
    """sbatch options of a train job. SIGTERM 180 s before the training's time limit (a quarter of a limit under 12
    minutes: hwsweep.contracts.hardware.Hardware.signal_lead; in a run's job that also evaluates, before the
    evaluation's minutes too, so the evaluation runs in the time kept for it), to every process of the job's steps:
    the trainer checkpoints and the job requeues itself (hwsweep.run.preempt), which --requeue allows where a
    site's default does not; SLURM's own log of the job keeps every attempt (--open-mode=append). With
    timing: exclusive, whole nodes: no other job shares a timed run's cores, memory bandwidth or GPUs. A
    profile's slurm_extra for train is kept and these are added unless it sets the same flag (train.smk puts
    this function back in place of the profile's value).
    """
    exclusive = ["--exclusive"] if MATRIX.timing == "exclusive" else []
    lead = hardware_of(wildcards).signal_lead  # 180 s, less for a short time limit
    if run_group(wildcards) is not None:
        lead = min(lead + 60 * eval_runtime(wildcards), MAX_SIGNAL_LEAD_S)
    ours = [f"--signal=TERM@{lead}", "--requeue", "--open-mode=append"] + exclusive
    return placement.merged_options(profile_slurm_extra("train"), ours)


def train_partition(wildcards):
    return hardware_of(wildcards).partition or ""


def train_gres(wildcards):
    """GPUs per node (SLURM's --gres is per node), also for gpu_model entries (hwsweep.contracts.hardware)."""
    return hardware_of(wildcards).slurm_gres or ""


def train_mem_mb(wildcards):
    hw = hardware_of(wildcards)
    return hw.mem_mb or 2000 * hw.cpus_per_task


def train_runtime(wildcards):
    """Minutes of a train job: the hardware's runtime, and the evaluation's where the run's job also evaluates
    (allocation.smk): a job of the training alone then ends early, its signal still comes in time.
    """
    minutes = hardware_of(wildcards).runtime or DEFAULT_RUNTIME_MIN
    return minutes + (eval_runtime(wildcards) if run_group(wildcards) else 0)


def eval_processes(wildcards):
    """How many processes evaluate the run: a sharded (FSDP, HSDP) run's final checkpoint stays sharded and is
    evaluated sharded, one process per device of a node, as it trained on one node (hwsweep.run.sharded_eval);
    any other run's, one."""
    spec = run_spec_of(wildcards)
    return spec.plan.devices_per_node if spec.recipe.parallel.sharded else 1


def eval_gpus(wildcards):
    """A GPU run is evaluated on GPUs of its model (hwsweep.run.evaluate runs where it trained), one per evaluating
    process; 0 otherwise."""
    hw = hardware_of(wildcards)
    return eval_processes(wildcards) if hw.accelerator == "cuda" and hw.gpu_model else 0


def eval_gpu_model(wildcards):
    return hardware_of(wildcards).gpu_model or "" if eval_gpus(wildcards) else ""


def eval_threads(wildcards):
    """A CPU run's evaluation gets the cores its training had, and so does a sharded run's (its processes share
    them as the training's did); a GPU run evaluated by one process, one."""
    hw = hardware_of(wildcards)
    return (
        hw.cpus_per_task
        if hw.accelerator == "cpu" or eval_processes(wildcards) > 1
        else 1
    )


def eval_runtime(wildcards):
    """Minutes of a SLURM evaluate job: twice the estimated evaluation (hwsweep plan --estimate's, at the
    assumed MFU) plus 10 for start-up, at least 30; 30 where nothing is known (a user's evaluation command).
    Only asked under SLURM: the estimate builds the run's tables."""
    if executor() != "slurm":
        return 30
    from hwsweep.plan import estimate

    seconds = estimate.eval_job_seconds(run_spec_of(wildcards), MATRIX.estimate)
    return 30 if seconds is None else max(30, int(2 * seconds / 60) + 10)


def suite_run_files(suite, name):
    return [f"{run.run_dir}/{name}" for run in MATRIX.runs(suite)]


def suite_train_records(wildcards):
    settled(wildcards.suite, MATRIX.runs(wildcards.suite))
    return suite_run_files(wildcards.suite, layout.TRAIN_RECORD)


def suite_eval_records(wildcards):
    """Nothing when the config has no evaluation stage (the trainer reports its metrics)."""
    if MATRIX.evaluation.kind == "none":
        return []
    return suite_run_files(wildcards.suite, layout.EVAL_RECORD)


SUITE_OUTPUTS = [
    "runs.csv",
    "comparison.csv",
    "equivalence.csv",
    "speedup.csv",
    "variants.csv",
    "plots/equivalence.png",
    "plots/time_breakdown.png",
    "plots/speedup.png",
    "plots/curves.png",
    "estimate_vs_actual.csv",
]


def compare_suite_tables(wildcards):
    """runs.csv of each suite a comparison across suites names (compare)."""
    paths = [
        p
        for pair in MATRIX.compare.values()
        for p in (pair["variant"], pair["reference"])
    ]
    return [
        f"results/{suite}/runs.csv"
        for suite in dict.fromkeys(p.split("/")[0] for p in paths)
    ]


# A suite with targets (issue 23) adds its time-to-target tables, page and figure.
TARGET_OUTPUTS = [
    "time_to_target.csv",
    "tables/time_to_target.html",
    "plots/time_to_target.png",
]


def suite_targets(suite):
    metric_plots = [f"plots/metric_{name}.png" for name in MATRIX.metric_names()]
    ttt = TARGET_OUTPUTS if MATRIX.targets.get(suite) else []
    return [f"results/{suite}/{name}" for name in SUITE_OUTPUTS + metric_plots + ttt]


def metric_figures():
    """plot_suite's figure of each declared metric: its own path, caption and label in the report."""
    return {
        f"metric_{m.name}": report(
            f"results/{{suite}}/plots/metric_{m.name}.png",
            caption=metric_caption(m),
            category="{suite}",
            subcategory="Seeds and hardware",
            labels={"figure": f"{m.name} per hardware"},
        )
        for m in MATRIX.metrics
    }


def all_suite_tables(name):
    return [f"results/{suite}/{name}" for suite in MATRIX.suites]


def all_targets():
    targets = [t for suite in MATRIX.suites for t in suite_targets(suite)]
    tables = [
        "plan.tsv",
        "runs.csv",
        "comparison.csv",
        "equivalence.csv",
        "speedup.csv",
        "variants.csv",
    ] + (["compare.csv"] if MATRIX.compare else [])
    return targets + [f"results/{name}" for name in tables]


def plan_table(wildcards):
    from hwsweep.plan.table import format_table, plan_rows

    return format_table(plan_rows(MATRIX), sep="\t")


def settings_sha256(*more):
    """What a suite's tables depend on besides its runs, hashed: a job parameter, so a changed margin, price or
    target reruns the job (and the report's job parameters stay one line), and a stamp the job writes beside
    its tables, so a report built before that rerun leaves them out (report.smk, hwsweep.report.current).
    """
    return layout.sha256(
        json.dumps(
            [
                MATRIX.baseline,
                MATRIX.statistics,
                [m.to_dict() for m in MATRIX.metrics],
                prices_of(MATRIX.hardware),
                *more,
            ],
            sort_keys=True,
        )
    )


AGGREGATE_SHA256 = settings_sha256(MATRIX.references)
TARGET_SHA256 = settings_sha256(
    {s: [t.to_dict() for t in ts] for s, ts in MATRIX.targets.items()}
)
STAMPS = {
    "aggregate": ("results/{suite}/settings.sha256", AGGREGATE_SHA256),
    "time_to_target": ("results/{suite}/time_to_target.sha256", TARGET_SHA256),
}


def suite_stamps(suite):
    """Each stamp of a suite's tables -> what it reads when they were made with this config's settings."""
    jobs = ["aggregate"] + (["time_to_target"] if MATRIX.targets.get(suite) else [])
    return {STAMPS[j][0].format(suite=suite): STAMPS[j][1] + "\n" for j in jobs}


def recorded_predictions(wildcards):
    """results/predictions.csv where `hwsweep recommend` has written it (nothing otherwise)."""
    return [layout.PREDICTIONS_FILE] if os.path.exists(layout.PREDICTIONS_FILE) else []


def signatures_once():
    """Each function the rules call per job (inputs, parameters, resources, threads, group) gets its signature read
    here, once: snakemake reads it again at every call (its inspect.signature, about 20 a run, was a fifth of a
    10,000-run dry run's cost beyond a bare Snakefile's). The attribute is snakemake's own hook
    (snakemake.common.get_function_params); the signature stays the function's."""
    for each in workflow.rules:
        given = [*each.input, *each.params, *each.log, getattr(each, "_group", None)]
        given += [getattr(r, "_evaluator", r) for r in each.resources.values()]
        for item in given:
            function = getattr(getattr(item, "_file", item), "callable", item)
            if inspect.isfunction(function) and not hasattr(
                function, FUNC_OVERWRITE_PARAMS_ATTR
            ):
                setattr(
                    function,
                    FUNC_OVERWRITE_PARAMS_ATTR,
                    inspect.signature(function).parameters,
                )
