"""`hwsweep plan`, `detect`, `resources`, `recommend`, `profile install`, `stop`, `init`, `workflow`, `import` and
`export`: the batch plan a config gets, here and on the cluster, before anything runs, which hardware answers
soonest, the slurm profile where snakemake finds it, runs stopped for good, a folder to run the installed workflow
from, runs made elsewhere brought into this sweep, and a run's final model as one file."""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
from pathlib import Path

from hwsweep.cluster import profile, recommend, resources, stop
from hwsweep.contracts import io, workflow_files
from hwsweep.contracts.typed import SpecError
from hwsweep.plan import placement
from hwsweep.plan.config import DEFAULT_CONFIG, SCHEMA_PATH, ConfigError, load_or_exit, resolve
from hwsweep.plan.table import format_table, plan_rows


def _executor(args) -> str | None:
    """The executor `snakemake` would run the jobs with: --executor, else the profile's (--profile or
    $SNAKEMAKE_PROFILE, found where snakemake finds it), else local."""
    argv = ["--executor", args.executor] if args.executor else []
    argv += ["--profile", args.profile] if args.profile else []
    return placement.executor_named(argv)


def show_commands(matrix) -> list[str]:
    """Every run's exact command as its train job starts it: argument vector, working folder and the
    environment hwsweep adds (multi-node runs show one node's launcher, its rank and address as SLURM gives them)."""
    import shlex

    from hwsweep.contracts import secrets
    from hwsweep.contracts.spec import SPEC_FILE
    from hwsweep.run import launch, runner

    lines = []
    for run in matrix.runs():
        spec = matrix.spec(run.suite, run.variant, run.hardware, run.seed)
        path = str(Path(spec.run_dir, SPEC_FILE))
        threads = spec.hardware.cpus_per_task
        slurm = {"SLURM_NODEID": "{node_rank}", "SLURM_NNODES": str(spec.plan.nodes), "SLURM_JOB_ID": "0",
                 "SLURM_LAUNCH_NODE_IPADDR": "{first_node}"} if spec.plan.nodes > 1 else {}  # fmt: skip
        if spec.trainer.kind == "builtin":
            env, cwd = {"OMP_NUM_THREADS": "1"}, "."
        else:
            env, cwd = runner.train_environment(spec, path, threads, base={}, reveal=False), runner.train_folder(spec)
        argv = [secrets.PLACEHOLDER.sub(secrets.MASK, a) for a in launch.command_line(spec, path, threads, slurm)]
        lines += [f"{run.suite}/{run.variant}/{run.hardware}/seed{run.seed}:",
                  f"  argv: {shlex.join(argv)}",
                  f"  cwd:  {cwd}",
                  f"  env:  {' '.join(_shown(k, v) for k, v in sorted(env.items()))}"]  # fmt: skip
    return lines


def _shown(name: str, value: str) -> str:
    """NAME=value as a shell would take it, a secret-looking one (by its name or its URI's credentials) masked."""
    from hwsweep.contracts import secrets

    if secrets.redact(f"{name}=x") != f"{name}=x":
        return f"{name}={secrets.MASK}"
    return f"{name}={shlex.quote(secrets.redact(secrets.PLACEHOLDER.sub(secrets.MASK, value)))}"


def _print_plan(raw: dict, fmt: str, config_dir: Path, executor: str | None = placement.LOCAL,
                estimate: bool = False, commands: bool = False) -> int:
    try:
        matrix = resolve(raw, config_dir=config_dir)
        placement.refuse(matrix.hardware, executor)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        return 1
    sep = "\t" if fmt == "tsv" else None
    if commands:
        print("\n".join(show_commands(matrix)))
    elif estimate:  # measured runs are read from results/ under the current directory, as snakemake writes them
        from hwsweep.plan.estimate import RUN_COLUMNS, estimate_rows, run_specs

        rows = estimate_rows(run_specs(matrix), matrix.estimate)
        sys.stdout.write(format_table(rows, sep=sep, columns=RUN_COLUMNS))
    else:
        from hwsweep.plan.estimate import measured_cells, run_specs

        sys.stdout.write(format_table(plan_rows(matrix), sep=sep))
        # results/ under the current directory, as for --estimate; a TSV table stays machine-readable
        measured = [] if sep else measured_cells(run_specs(matrix))
        if measured:
            print("\nmeasured by earlier runs of the same plan in results/:", *measured, sep="\n")
    for warning in matrix.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def detect_hardware() -> tuple[dict, list[str]]:
    """This machine as a hardware entry (CUDA_VISIBLE_DEVICES is honoured by torch itself)."""
    import torch

    from hwsweep.contracts import catalog

    if torch.cuda.is_available():
        props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
        memory = round(props[0].total_memory / 2**30, 1)
        kind = catalog.match(props[0].name, memory)
        entry = {"accelerator": "cuda", "devices_per_node": len(props), "memory_gb": memory,
                 "gpu_type": kind.name if kind else "".join(c if c.isalnum() else "-" for c in props[0].name)[:60]}  # fmt: skip
        lines = [f"cuda:{i} {p.name}, {p.total_memory / 2**30:.1f} GB" for i, p in enumerate(props)]
        lines.insert(0, f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}")
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        entry = {"accelerator": "cpu", "devices_per_node": cores, "gpu_type": "cpu"}
        lines = [f"no CUDA device visible; {cores} CPU core(s): one gloo process per core"]
    return entry, lines


# The Snakefile `hwsweep init` writes: it includes the workflow of the hwsweep installed beside the snakemake
# that reads it (found at every run, so an upgraded or moved installation needs no new Snakefile).
STARTER_SNAKEFILE = """\
# Written by `hwsweep init`. The workflow is the one installed with hwsweep in the Python environment that runs
# snakemake (`hwsweep workflow` prints its path); the experiment is config/config.yaml, runtime settings profiles/.
from hwsweep.contracts.workflow_files import snakefile as hwsweep_snakefile


include: hwsweep_snakefile()


# snakemake takes no default target from an included file: without a target, `all` is what runs.
rule default:
    default_target: True
    input:
        rules.all.input,
"""


def init(args) -> int:
    """Write what the workflow needs to run from `args.folder`: a Snakefile that includes the installed workflow,
    the config templates in config/ and the local profile. Existing files are kept, never replaced."""
    folder = args.folder
    try:
        files = {"Snakefile": None} | workflow_files.starter_files()
    except workflow_files.MissingWorkflow as e:
        print(f"hwsweep init: {e}", file=sys.stderr)
        return 1
    if folder.exists() and not folder.is_dir():
        print(f"hwsweep init: {folder} is not a folder; give a folder to set up (default: the current one)",
              file=sys.stderr)  # fmt: skip
        return 1
    lines = []
    for name, source in files.items():
        target = folder / name
        if target.exists():
            lines.append(f"kept {target} (it exists)")
            continue
        io.write_text(target, STARTER_SNAKEFILE if source is None else source.read_text(encoding="utf-8"))
        lines.append(f"wrote {target}")
    go = "" if folder.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(str(folder))} && "
    lines += [f"workflow: {workflow_files.snakefile()}",
              f"next: edit {folder / DEFAULT_CONFIG} (every key is described in {SCHEMA_PATH}), then",
              f"run: {go}snakemake --profile profiles/local all && snakemake --report report.html",
              "on a cluster: hwsweep profile install slurm --account NAME, then snakemake --profile slurm all"]  # fmt: skip
    print("\n".join(lines))
    return 0


def import_runs(args) -> int:
    """Bring the runs another machine made of this config (OTHER: its sweep folder, or its results/) into this
    folder's sweep; one line per run brought in or left where it is (hwsweep.analysis.harvest)."""
    from hwsweep.analysis import harvest

    try:
        matrix = resolve(load_or_exit(args.configfile), config_dir=args.configfile.parent)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        return 1
    specs = [matrix.spec(r.suite, r.variant, r.hardware, r.seed) for r in matrix.runs()]
    try:
        with io.storage("results"):
            found = harvest.harvest(specs, args.other, matrix.evaluation.kind != "none", args.dry_run)
    except (OSError, ValueError, io.StorageError) as e:
        print(f"hwsweep import: {e}", file=sys.stderr)
        return 1
    verb = "would import" if args.dry_run else "imported"
    for line in found.imported:
        print(f"{verb} {line}")
    for line in found.refused:
        print(f"hwsweep import: {line}", file=sys.stderr)
    print(f"hwsweep import: {len(found.imported)} run(s) {verb}, {found.kept} already here, {len(found.refused)} "
          f"left where they are, {found.absent} of this config's runs not in {args.other}"
          + ("; next: snakemake --profile profiles/local all (or --report report.html)" if found.imported else ""),
          file=sys.stderr)  # fmt: skip
    if found.imported or found.kept:
        return 0
    print(f"hwsweep import: nothing of {args.other} is a run of {args.configfile}: is it a sweep of another config?",
          file=sys.stderr)  # fmt: skip
    return 1


def show_workflow(args) -> int:
    try:
        print(workflow_files.snakefile())
    except workflow_files.MissingWorkflow as e:
        print(f"hwsweep workflow: {e}", file=sys.stderr)
        return 1
    return 0


def export_model(args) -> int:
    from hwsweep.run import export  # torch: only this command pays for it

    return export.main(args.run_dir, args.out)


def main(argv=None) -> int:
    # As the `hwsweep` command (its arguments from the command line, not a caller's), without the cyclic
    # collector: a command lasts seconds and is mostly imports (snakemake's CLI, pandas, torch for a FLOP count),
    # whose objects live to its end and which the collector would walk again and again as they come and once more
    # at the exit (0.5 of a `hwsweep plan`'s 2.2 CPU-s); the ending process gives its memory back anyway.
    command = argv is None
    if command:
        gc.disable()
    try:
        return run(argv)
    except BrokenPipeError:
        # The reader stopped early (`hwsweep resources | head`): not an error. Point stdout at /dev/null so
        # Python's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        if command:
            gc.freeze()  # the exit's own collection runs even with the collector off: it walks nothing frozen


def run(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="the batch plan of every suite x variant x hardware")
    d = sub.add_parser("detect", help="this machine's devices and the plan the config would get on them")
    for s in (p, d):
        s.add_argument("--configfile", type=Path, default=DEFAULT_CONFIG)
        s.add_argument("--format", choices=["table", "tsv"], default="table")
        s.add_argument("--estimate", action="store_true",
                       help="wall clock, device-hours and cost of every run, cell, suite and the total")  # fmt: skip
        s.add_argument("--show-commands", action="store_true",
                       help="every run's exact argument vector, working folder and environment, as its train job runs it")  # fmt: skip
        s.add_argument("--profile", help="plan for this snakemake profile's executor (e.g. slurm)")
        s.add_argument("--executor", help="plan for this snakemake executor (default: the profile's, else local)")
    d.add_argument("--no-probe", action="store_true",
                   help="on a GPU, plan from the memory estimate instead of measuring each cell's peak")  # fmt: skip
    profile.add_parser(sub)
    resources.add_parser(sub)
    recommend.add_parser(sub)
    stop.add_parser(sub)
    i = sub.add_parser("init", help="set up a folder to run the installed workflow from (docs/package.md)")
    i.add_argument("folder", type=Path, nargs="?", default=Path("."), help="the folder (default: this one)")
    i.set_defaults(handler=init)
    w = sub.add_parser("workflow", help='the Snakefile\'s path: snakemake --snakefile "$(hwsweep workflow)" ...')
    w.set_defaults(handler=show_workflow)
    m = sub.add_parser("import", help="bring the runs another machine or folder made of this config into this sweep")
    m.add_argument("other", type=Path, help="the other sweep's folder (or its results/)")
    m.add_argument("--configfile", type=Path, default=DEFAULT_CONFIG)
    m.add_argument("--dry-run", "-n", action="store_true", help="say what would be imported, change nothing")
    m.set_defaults(handler=import_runs)
    e = sub.add_parser("export", help="a run's final model as one file (an FSDP run's gathered from its shards)")
    e.add_argument("run_dir", type=Path, help="the run's folder (results/<suite>/<variant>/<hardware>/seed<seed>)")
    e.add_argument("--out", type=Path, help="where to write it (default: RUN_DIR/model.pt)")
    e.set_defaults(handler=export_model)
    args = parser.parse_args(argv)
    if hasattr(args, "handler"):
        return args.handler(args)
    raw = load_or_exit(args.configfile)
    if args.command == "plan":
        executor = _executor(args)
        if executor is None:
            sys.exit(f"hwsweep: cannot read the executor of profile {args.profile!r}; check --profile and --executor")
        return _print_plan(raw, args.format, args.configfile.parent, executor, args.estimate, args.show_commands)
    entry, lines = detect_hardware()
    print("\n".join(lines))
    raw = raw | {"hardware": {"detected": entry}, "baseline": "detected"}
    raw["suites"] = {name: {k: v for k, v in body.items() if k != "hardware"} for name, body in raw["suites"].items()}
    if entry["accelerator"] == "cuda" and not args.no_probe:
        _probe_memory(raw, args.configfile.parent)
    return _print_plan(raw, args.format, args.configfile.parent, placement.LOCAL, args.estimate, args.show_commands)


def _probe_memory(raw: dict, config_dir: Path) -> None:
    """Measure the peak memory of each cell's step on this GPU into the probe's cache, which the plan printed
    next (and every later plan for this device type) uses instead of the estimate."""
    import torch

    from hwsweep.contracts import memory
    from hwsweep.run import probe

    try:
        matrix = resolve(raw, config_dir=config_dir)
    except (ConfigError, SpecError):
        return  # _print_plan names the problem
    for line in probe.probe_matrix(matrix, "detected", torch.device("cuda", 0)):
        print(line)
    print(f"memory probe cache: {memory.cache_path()}")


if __name__ == "__main__":
    sys.exit(main())
