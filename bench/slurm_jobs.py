"""SLURM jobs a sweep puts in the queue: a dry run of the workflow under the slurm profile in an empty folder, its
jobs counted by rule, less those snakemake runs on the submit host (rules marked `localrule: True`, and `all`,
which has no action); a group job (a run's train and evaluate in one allocation) is one SLURM job. `--repo`
measures another checkout (an older commit) with this environment.

    .venv/bin/python bench/slurm_jobs.py [--repo PATH] [--configfile PATH]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def local_rules(repo: Path) -> set[str]:
    """Rules whose block in workflow/rules/*.smk says `localrule: True`."""
    local = set()
    for smk in (repo / "workflow/rules").glob("*.smk"):
        blocks = re.split(r"^rule (\w+):", smk.read_text(), flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2]):
            if re.search(r"^    localrule: True", body, flags=re.M):
                local.add(name)
    return local


def dry_run(repo: Path, configfile: Path) -> str:
    """snakemake -n all in an empty folder, the profile named by its absolute path (so the dry run plans for it)."""
    with tempfile.TemporaryDirectory() as folder:
        cmd = [SNAKEMAKE, "-n", "--snakefile", str(repo / "Snakefile"), "--profile", str(repo / "profiles/slurm"),
               "--configfile", str(configfile), "--directory", folder, "all"]  # fmt: skip
        env = os.environ | {"PYTHONPATH": str(repo)}  # that checkout's hwsweep, not the installed one
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=True).stdout


def job_counts(out: str) -> dict[str, int]:
    """Jobs per rule (snakemake's dry-run job stats)."""
    stats = out.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, flags=re.M)}
    return {rule: n for rule, n in counts.items() if rule != "total"}


def slurm_jobs(out: str, local: set[str]) -> tuple[int, dict[str, int]]:
    """Group jobs, and the jobs of each rule outside a group that is not run on the submit host (a group's jobs are
    listed indented below its header)."""
    groups = len(re.findall(r"Group job \S+", out))
    alone: dict[str, int] = {}
    for rule in re.findall(r"^rule (\w+):", out, flags=re.M):
        if rule not in local:
            alone[rule] = alone.get(rule, 0) + 1
    return groups, alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--configfile", type=Path, default=None, help="default: the repo's config/config.yaml")
    args = parser.parse_args()
    out = dry_run(args.repo, args.configfile or args.repo / "config/config.yaml")
    counts = job_counts(out)
    groups, alone = slurm_jobs(out, local_rules(args.repo) | {"all"})
    print(f"{sum(counts.values())} jobs, {groups + sum(alone.values())} SLURM jobs: {groups} group jobs (a run's "
          "training and evaluation)" + "".join(f", {rule} {n}" for rule, n in sorted(alone.items())))  # fmt: skip

if __name__ == "__main__":
    main()
