"""`hwsweep profile install slurm`: put the slurm profile where snakemake finds it by name, with this site's values.

`snakemake --profile slurm` looks for a folder `slurm` in the working directory, then in the user's
snakemake config folder (platformdirs: $XDG_CONFIG_HOME/snakemake or ~/.config/snakemake on Linux),
then in the site folder (/etc/xdg/snakemake). The template is profiles/slurm/config.yaml of the workflow
files (hwsweep.contracts.workflow_files: the installed package's copy, or the clone's); the installed copy
gets the account and partition asked for by flags, and a summary of the partitions and GPU types `sinfo`
reports, as comments.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shutil
import sys
from pathlib import Path

from hwsweep.cluster import slurm
from hwsweep.contracts import workflow_files

SITE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # as the config schema's partition pattern


class ProfileError(ValueError):
    """One line naming the flag or path and the fix."""


def user_profile_dir() -> Path:
    """The folder snakemake searches for profiles by name after the working directory (the same
    platformdirs call snakemake's get_profile_dir makes)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("snakemake", "snakemake"))


def template_path(kind: str, given: Path | None = None) -> Path:
    if given:
        if given.is_file():
            return given
        raise ProfileError(f"--template {given}: no such file; give the profile file to install")
    try:
        path = workflow_files.profile_template(kind)
    except workflow_files.MissingWorkflow as e:
        raise ProfileError(f"{e}; or pass --template PATH") from None
    if not path.is_file():
        raise ProfileError(f"{path}: no such file; reinstall hwsweep or pass --template PATH")
    return path


def check_site_name(flag: str, value: str | None, known: list[str] | None = None) -> None:
    if value is None:
        return
    if not SITE_NAME.match(value):
        raise ProfileError(f"{flag} {value!r}: use only letters, digits, '_', '.' and '-' (a SLURM name)")
    if known and value not in known:
        raise ProfileError(f"{flag} {value!r}: not a partition of this cluster; use one of {', '.join(known)}")


def site_summary(nodes: list[slurm.Node]) -> list[str]:
    """Comment lines: each partition with its GPU types and counts per node, the default marked."""
    lines = []
    for name, members in slurm.partitions(nodes).items():
        kinds = {f"{kind or 'gpu'} x{n.gpus[kind]}" for n in members for kind in n.gpus}
        what = ", ".join(sorted(kinds)) + " per node" if kinds else "CPU only"
        default = " (default)" if members[0].default_partition else ""
        lines.append(f"#   {name}{default}: {len(members)} node(s), {what}")
    return lines


def expression(value: str) -> str:
    """A site name as snakemake reads a resource: a Python expression, so a string in its own quotes (`all`
    unquoted would be Python's all); SITE_NAME allows no quote inside."""
    return json.dumps(f"'{value}'")


def render(template: str, source: Path, site: dict, summary: list[str]) -> str:
    """The template with site values under default-resources, and a header saying where it came from."""
    header = [f"# Installed by `hwsweep profile install` from {source}.", "# Partitions when installed (sinfo):",
              *(summary or ["#   (not read: no reachable SLURM controller)"]),
              "# `hwsweep resources` shows what is free now, with ready-to-paste hardware entries."]  # fmt: skip
    given = {key: (flag, value) for key, (flag, value) in site.items() if value}
    values = [f"  {key}: {expression(value)}  # from --{flag}" for key, (flag, value) in given.items()]
    lines = [line for line in template.splitlines() if not any(re.match(rf"\s*# {key}:", line) for key in given)]
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("default-resources:")), None)
    if at is None:
        lines += (["default-resources:"] + values) if values else []
    else:
        lines[at:at] = values
    return "\n".join(header + lines) + "\n"


def check_loads(folder: Path, site: dict[str, str]) -> None:
    """Read the written profile with snakemake's own profile parsing and evaluate each site value the way
    snakemake evaluates a resource; ProfileError unless each reads back as the name given."""
    from snakemake.cli import parse_args

    path = folder / "config.yaml"
    try:
        # Its "Using profile ..." note (stderr) and an argparse complaint are not our output: one line says it.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _, args = parse_args(["--profile", str(folder)])
    except (Exception, SystemExit) as e:  # noqa: BLE001 - whatever snakemake stops at, said in one line
        raise ProfileError(f"{path}: snakemake cannot read the written profile ({one_line(e)}); nothing was installed") from None
    written = args.default_resources or {}
    for key, value in site.items():
        try:  # as a job would: wildcards, input, attempt, threads, rule name, async runner
            read = written[key].evaluate(None, None, 1, 1, "train", None).value
        except Exception as e:  # noqa: BLE001 - e.g. a value that evaluates to a function
            read = f"nothing usable ({one_line(e)})"
        if read != value:
            raise ProfileError(f"{path}: snakemake reads {key} as {read!r}, not {value!r}; nothing was installed")


def one_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def free_backup(target: Path) -> Path:
    n = 1
    while (backup := target.with_name(f"{target.name}.bak{n if n > 1 else ''}")).exists():
        n += 1
    return backup


def install(kind: str, name: str, account: str | None, partition: str | None, force: bool,
            template: Path | None = None) -> list[str]:  # fmt: skip
    """Write the profile; returns the lines to print. Raises ProfileError (one line) on bad input."""
    check_site_name("--name", name)
    check_site_name("--account", account)
    source = template_path(kind, template)
    try:
        nodes, note = slurm.read_nodes(), None
    except slurm.SchedulerError as e:
        nodes, note = [], f"note: site values not detected: {e}"
    known = list(slurm.partitions(nodes))
    check_site_name("--partition", partition, known)
    target = user_profile_dir() / name
    out = [note] if note else []
    if target.exists() and not force:
        raise ProfileError(f"profile {name!r} already exists at {target}; pass --force to replace it "
                           f"(the old one is kept as {free_backup(target).name}) or --name OTHER to install beside it")  # fmt: skip
    site = {"slurm_account": ("account", account), "slurm_partition": ("partition", partition)}
    text = render(source.read_text(), source, site, site_summary(nodes))
    age = slurm.short_job_age() if nodes else None
    if age is not None:
        out.append(f"note: this controller forgets an ended job after {age} s (MinJobAge), so snakemake's slurm "
                   "executor asks sacct for job states, where (plugin 2.8) it never sees the end of a job ended by "
                   "`scancel`: after cancelling a job, stop snakemake (Ctrl-C) once its other jobs end and run it again")  # fmt: skip
    staged = target.with_name(f".{name}.new")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    (staged / "config.yaml").write_text(text)
    try:
        check_loads(staged, {key: value for key, (_, value) in site.items() if value})
    except ProfileError:
        shutil.rmtree(staged)
        raise
    if target.exists():
        backup = free_backup(target)
        target.rename(backup)
        out.append(f"kept the previous profile as {backup}")
    staged.rename(target)
    if nodes and not partition and not any(n.default_partition for n in nodes):
        out.append("note: this cluster has no default partition; rerun with --force --partition NAME for the small jobs")
    if (Path.cwd() / name).exists():
        out.append(f"note: ./{name} exists here; snakemake run from this folder would take it instead")
    return out + [f"installed profile {name}: {target / 'config.yaml'}", f"run: snakemake --profile {name} all"]


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="install a snakemake profile where `snakemake --profile NAME` finds it")
    inner = p.add_subparsers(dest="action", required=True)
    i = inner.add_parser("install", help="write profiles/KIND/config.yaml with this site's values into snakemake's profile folder")
    i.add_argument("kind", choices=["slurm"])
    i.add_argument("--name", help="profile name to install as (default: the kind)")
    i.add_argument("--account", help="SLURM account to charge jobs to (slurm_account)")
    i.add_argument("--partition", help="partition for the small jobs: evaluate, aggregate, plots (slurm_partition)")
    i.add_argument("--force", action="store_true", help="replace an existing profile of that name (kept as NAME.bak)")
    i.add_argument("--template", type=Path, help="profile file to install instead of profiles/KIND/config.yaml")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    try:
        lines = install(args.kind, args.name or args.kind, args.account, args.partition, args.force, args.template)
    except ProfileError as e:
        print(f"hwsweep profile: {e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
