# Before a real run's first job, in the snakemake that schedules it: where the jobs run (the executor), whether
# this machine can provide their hardware, a results/ that can be written, no live writer of any run elsewhere,
# and each run's files settled (spec.json written, damaged or stale records set aside, a done run's snakemake
# metadata dropped: its records decide). Never in jobs or for --report.
from snakemake.io import IOFile

from hwsweep.analysis import holders, quarantine, validation
from hwsweep.analysis.status import status_rows
from hwsweep.contracts import host
from hwsweep.plan import interrupt
from hwsweep.plan.matrix import Run

EXECUTOR = {}


def executor():
    """The executor of this snakemake run (None in jobs and when nothing is executed, e.g. --report);
    known once the DAG is being built, so only input functions ask."""
    if "name" not in EXECUTOR:
        EXECUTOR["name"] = placement.executor_of(workflow)
        EXECUTOR["dry_run"] = (
            bool(workflow.executor_plugin)
            and workflow.executor_plugin.name in placement.PSEUDO
        )
    return EXECUTOR["name"]


PLACED = set()


def placed(hardware):
    """Under the local executor, a CUDA or multi-node entry this machine cannot provide stops snakemake
    here, before any job, with one line."""
    if hardware not in PLACED:
        try:
            placement.refuse({hardware: MATRIX.hardware[hardware]}, executor())
        except ConfigError as e:
            print(f"hwsweep config error: {e}", file=sys.stderr)
            sys.exit(1)
        PLACED.add(hardware)


def warn_unslotted_timing():
    """timing: exclusive (and auto, locally) keeps timed runs apart through the timing_slot resource: a local
    snakemake that offers none (no local profile, no --resources) runs them side by side. Said once; the records
    count the overlap.
    """
    if EXECUTOR.get("warned_timing") or executor() != placement.LOCAL:
        return
    EXECUTOR["warned_timing"] = True
    if MATRIX.timing != "shared" and "timing_slot" not in workflow.global_resources:
        print(
            f"hwsweep warning: timing: {MATRIX.timing}, but this snakemake offers no timing_slot, so training runs "
            "may overlap and their speedups be flagged as contended; use --profile profiles/local or --resources "
            "timing_slot=1",
            file=sys.stderr,
        )


def advise_after_interrupt():
    """Once, before snakemake stops at a killed run's lock or incomplete outputs: the one line of what to run."""
    if not EXECUTOR.get("advised"):
        EXECUTOR["advised"] = True
        for line in interrupt.advice(".", workflow.dag_settings.force_incomplete):
            print(line, file=sys.stderr)


def writable_results(wildcards=None):
    """Once, before a real run's first job: a results/ that cannot be written (read-only, not permitted, full)
    stops snakemake here with one line naming it and the fix, before snakemake or a job meets it in its own
    words. An input function of the jobs that write there (nothing to add: it returns no input).
    """
    if "writable" in EXECUTOR or executor() is None or EXECUTOR["dry_run"]:
        return []
    EXECUTOR["writable"] = True
    problem = io.writable_problem("results")
    if problem is not None:
        print(f"hwsweep: {problem}", file=sys.stderr)
        sys.exit(1)
    return []


def writable_status(wildcards):
    """status's input function: writable_results, but what status knows is on the terminal first where results/
    cannot take its tables (a full or read-only disk): each run's row, as status.csv would hold it.
    """
    if (
        "writable" not in EXECUTOR
        and executor() is not None
        and not EXECUTOR["dry_run"]
    ):
        if io.writable_problem("results") is not None:
            table = status_rows(MATRIX, holders.Scheduler())
            print(table.to_string(index=False), file=sys.stderr)
    return writable_results(wildcards)


SETTLED = set()
# Each settled run's state (hwsweep.analysis.validation): what its train and evaluate jobs have left to do.
SETTLED_STATES = {}


def refuse_live_writers(specs):
    """Before a real run's first job: a run (of those being settled) that a job or process no snakemake waits for
    still writes (its snakemake was killed: a dropped ssh session, an OOM killer) stops snakemake here with one line
    per run naming the writer and what to do, so no second writer is started beside it. A dry run says the same as
    a warning.
    """
    if (
        "jobs" not in EXECUTOR
    ):  # one squeue and one scan of /proc for the whole DAG, not one per suite or run
        EXECUTOR["jobs"] = holders.Scheduler() if executor() == "slurm" else None
        EXECUTOR["launched"] = host.launched_specs()
    found = holders.live_writers(specs, EXECUTOR["jobs"], EXECUTOR["launched"])
    if not found:
        return
    for line in found:
        print(
            f"hwsweep{' warning' if EXECUTOR['dry_run'] else ''}: {line}",
            file=sys.stderr,
        )
    if not EXECUTOR["dry_run"]:
        print(
            f"hwsweep: nothing was started: {len(found)} run(s) above are still being written; once they end, "
            "run this again (their records are then taken as they are)",
            file=sys.stderr,
        )
        sys.exit(1)


def forget_provenance(spec, state):
    """A run done by content (its records made from this very spec) is not redone for snakemake's provenance of
    its records: the interpreter's path, the rule's code in another hwsweep version, a job marked incomplete by
    a snakemake killed while it ran. Its metadata in .snakemake/ is dropped, so the records decide.
    """
    names = {
        validation.DONE: (layout.TRAIN_RECORD, layout.EVAL_RECORD),
        validation.TRAINED: (layout.TRAIN_RECORD,),
    }
    for name in names.get(state, ()):
        workflow.persistence.cleanup_metadata(IOFile(spec.path(name).as_posix()))


def settled(suite, runs):
    """Once per run, while the DAG of a real run is built: no live writer elsewhere (refuse_live_writers),
    spec.json written or rewritten from the config, a damaged, implausible or stale record moved aside so this
    run redoes it, and (for a whole suite) its tables dropped unless every run is done
    (hwsweep.analysis.quarantine). Never in jobs or for --report.
    """
    todo = [r for r in runs if r.run_dir not in SETTLED]
    if not todo or executor() is None:
        return
    for hardware in dict.fromkeys(r.hardware for r in todo):
        placed(hardware)  # nothing is moved for a run that cannot start here
    writable_results()
    warn_unslotted_timing()
    advise_after_interrupt()
    SETTLED.update(r.run_dir for r in todo)
    specs = [MATRIX.spec(r.suite, r.variant, r.hardware, r.seed) for r in todo]
    refuse_live_writers(specs)
    # A run folder its job could not write is named now, before snakemake or the job meets it.
    for spec in [] if EXECUTOR["dry_run"] else specs:
        problem = io.writable_problem(spec.run_dir)
        if problem is not None:
            print(f"hwsweep: {problem}", file=sys.stderr)
            sys.exit(1)
    evaluated = MATRIX.evaluation.kind != "none"
    tables = Path("results", suite) if len(todo) == len(MATRIX.runs(suite)) else None
    verdicts = {}
    try:
        with io.storage("results"):
            lines = quarantine.settle_runs(
                specs, tables, evaluated, EXECUTOR["dry_run"], verdicts
            )
    except io.StorageError as e:
        print(f"hwsweep: {e}", file=sys.stderr)
        sys.exit(1)
    for line in lines:
        print(line, file=sys.stderr)
    for spec in specs:
        verdict = verdicts[spec.run_dir]
        SETTLED_STATES[spec.run_dir] = verdict.state
        forget_provenance(spec, verdict.state)
        if EXECUTOR["dry_run"] and verdict.path is not None:
            # What a real run moves aside, a dry run leaves: it lists the job that remakes it all the same.
            workflow.dag.forcefiles.add(verdict.path.as_posix())
    if EXECUTOR["dry_run"] and tables is not None:
        if any(v.state != validation.DONE for v in verdicts.values()):
            # The tables a real run drops (snakemake remakes no record while they exist), a dry run remakes too.
            workflow.dag.forcefiles.update(p.as_posix() for p in tables.glob("*.csv"))


def placed_spec(wildcards):
    """The train job's spec.json, once its hardware is placeable here and its files are settled: ancient (the
    content decides, hwsweep.analysis.quarantine); none in a dry run that has not written it yet.
    """
    placed(wildcards.hardware)
    run = Run(
        wildcards.suite, wildcards.variant, wildcards.hardware, int(wildcards.seed)
    )
    settled(wildcards.suite, [run])
    return existing_spec(wildcards)


def existing_spec(wildcards):
    path = run_file(layout.SPEC_FILE).format(**wildcards)
    return ancient(path) if os.path.exists(path) else []
