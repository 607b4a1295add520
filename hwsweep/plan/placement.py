"""Whether the place the train jobs will run can provide each hardware entry, decided before any job starts.

Under snakemake's local executor (no cluster profile; `hwsweep plan` without --profile) the train jobs
run on this machine: a CUDA entry needs that many visible GPUs here, and several nodes need a SLURM
allocation of at least that many nodes around snakemake (srun starts one launcher per node). Under a
cluster executor (the slurm profile) the jobs run on nodes that have them, so nothing about this
machine is checked. Torch-free: GPUs are counted from the NVIDIA driver's /proc entries."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

from hwsweep.contracts.hardware import Hardware

LOCAL = "local"  # the executor that runs jobs on this machine
PSEUDO = ("dryrun", "touch")  # -n / --touch stand in for the executor the command line names
UNKNOWN = "unknown"  # a dry run whose real executor cannot be read from inside the workflow (profile_out_of_sight)
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def visible_gpus(environ=None, driver: Path = NVIDIA_GPUS) -> int:
    """CUDA devices a process started here would see: the driver's GPUs, narrowed by CUDA_VISIBLE_DEVICES."""
    environ = os.environ if environ is None else environ
    physical = len(list(driver.iterdir())) if driver.is_dir() else 0
    if physical == 0 and not driver.exists():
        physical = sum(1 for p in Path("/dev").glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name))
    mask = environ.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return physical
    listed = 0
    for item in mask.split(","):  # CUDA stops at the first invalid entry; "" or -1 hides every device
        item = item.strip()
        if not item or item.startswith("-"):
            break
        listed += 1
    return min(listed, physical)


def allocated_nodes(environ=None) -> int:
    """Nodes of the SLURM allocation snakemake runs in (salloc / sbatch), 0 outside one."""
    environ = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in environ:
        return 0
    try:
        return int(environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or 1)
    except ValueError:
        return 1


def problem(name: str, hw: Hardware, executor: str | None, gpus: int, nodes: int) -> str | None:
    """One line naming the field and the fix when `executor` cannot place `hw`, else None."""
    if executor == UNKNOWN:  # refused only where the answer depends on it: what the local executor could not place
        local = problem(name, hw, LOCAL, gpus, nodes)
        return local and (
            f"{local.split(':')[0]}: a dry run with --directory cannot tell whether the real run can place this "
            "entry: snakemake read the relative --profile from the folder it was started in, which the workflow, "
            "already in --directory, cannot see; give the profile's absolute path, or run without --directory"
        )
    if executor != LOCAL:
        return None  # a cluster executor places jobs on nodes that have the hardware; None: not known yet
    if hw.accelerator == "cuda" and hw.devices_per_node > gpus:
        have = f"has {gpus} visible CUDA device{'s' if gpus != 1 else ''}"
        return (
            f"hardware.{name}.accelerator: cuda x {hw.devices_per_node} per node, but the jobs run on this machine "
            f"(local executor), which {have}; run with --profile slurm (the GPUs are elsewhere) or use accelerator: cpu"
        )
    if hw.nodes > 1 and nodes < hw.nodes:
        where = f"an allocation of {nodes} node(s)" if nodes else "no SLURM allocation"
        return (
            f"hardware.{name}.nodes: {hw.nodes} nodes, but the jobs run on this machine (local executor) in {where}; "
            "run with --profile slurm, or set nodes: 1"
        )
    return None


def problems(hardware: dict[str, Hardware], executor: str | None, environ=None) -> list[str]:
    gpus = visible_gpus(environ) if executor in (LOCAL, UNKNOWN) else 0
    nodes = allocated_nodes(environ)
    return [p for name, hw in hardware.items() if (p := problem(name, hw, executor, gpus, nodes))]


def refuse(hardware: dict[str, Hardware], executor: str | None, environ=None) -> None:
    """ConfigError with the first problem, if `executor` cannot place one of `hardware`."""
    from hwsweep.plan.config import ConfigError

    found = problems(hardware, executor, environ)
    if found:
        raise ConfigError(found[0])


# Where snakemake finds settings it was not given (its parse_args): $SNAKEMAKE_PROFILE, and a workflow profile, a
# folder `default` or `profiles/default` here or profiles/default beside the Snakefile it would run from here.
SNAKEFILES = ("Snakefile", "snakefile", "workflow/Snakefile", "workflow/snakefile")


def no_profile_applies(argv: list[str], environ=None) -> bool:
    """Whether snakemake run here with `argv` would read no profile and no executor: none given, none in the
    environment, no workflow profile where snakemake looks for one."""
    environ = os.environ if environ is None else environ
    if argv or environ.get("SNAKEMAKE_PROFILE"):
        return False
    beside = [Path(name).parent / "profiles/default" for name in SNAKEFILES if Path(name).exists()]
    return not any(place.exists() for place in (Path("default"), Path("profiles/default"), *beside))


def executor_named(argv: list[str]) -> str | None:
    """The executor a snakemake command line (with its profile, or $SNAKEMAKE_PROFILE) names, read with
    snakemake's own parser (its import is 0.5 CPU-s: where no profile can apply, local without it); None if it
    cannot be read."""
    if no_profile_applies(argv):
        return LOCAL
    import contextlib
    import io

    from snakemake.cli import parse_args

    said = io.StringIO()  # its "Using profile ..." note: the caller's own output says what matters
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            _, args = parse_args(list(argv))
    except (Exception, SystemExit):  # noqa: BLE001 - argparse exits on what it cannot parse
        return None
    return args.executor or LOCAL


def executor_of(workflow) -> str | None:
    """The executor snakemake runs this workflow's jobs with, from inside the Snakefile once the DAG is
    being built (input functions); None before that, and in jobs (which the main process has checked)."""
    if workflow.remote_exec or workflow.subprocess_exec or workflow.executor_plugin is None:
        return None
    name = workflow.executor_plugin.name
    if name in PSEUDO:  # a dry run keeps only the pseudo-executor; the command line still names the real one
        return UNKNOWN if profile_out_of_sight(sys.argv[1:]) else executor_named(sys.argv[1:])
    return name


def profile_out_of_sight(argv: list[str]) -> str | None:
    """A profile that a snakemake command line with --directory (or $SNAKEMAKE_PROFILE) names by a relative
    path: snakemake read it from the folder it was started in, before moving to the directory, and a
    Snakefile (already there, and without a record of that folder) would read another profile or none. That
    path; None otherwise."""
    from snakemake.cli import get_argument_parser

    try:  # the command line alone, before snakemake looks for the profiles it names
        args = get_argument_parser().parse_args(list(argv))
    except (Exception, SystemExit):  # noqa: BLE001 - argparse exits on what it cannot parse
        return None
    if not args.directory or Path(args.directory) == Path("."):
        return None
    named = list(args.profile or []) + [p for p in [args.workflow_profile] if p and p != "none"]
    return next((p for p in named if not Path(p).is_absolute() and (os.sep in p or p.startswith("."))), None)


def merged_options(given: str, ours: list[str]) -> str:
    """sbatch options: those `given` (a profile's slurm_extra), then each of `ours` whose flag they do not
    set, so a profile adds to hwsweep's --signal and --exclusive, or changes them by naming them, never
    drops them by saying something else."""
    theirs = shlex.split(given or "")
    named = {option.split("=", 1)[0] for option in theirs if option.startswith("-")}
    named |= {OPPOSITE[flag] for flag in named if flag in OPPOSITE}
    return shlex.join(theirs + [option for option in ours if option.split("=", 1)[0] not in named])


OPPOSITE = {"--no-requeue": "--requeue", "--requeue": "--no-requeue"}  # naming one sets the other too
