"""Parse-and-plan cost of the workflow: `snakemake -n` on a fresh sweep of --runs runs (1,000: 2,000 run jobs, train and
evaluate; a run's spec.json is written by the scheduling snakemake, no job) against a bare Snakefile of the same
shape, in one run (goal <= 1.5x, at 1,000 and at 10,000 runs), in wall and in CPU seconds.

    .venv/bin/python bench/dry_run.py [--repeats 3] [--runs 10000]
"""

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
WIDTHS = [16 * (i + 1) for i in range(25)]
HARDWARE = ["cpu1", "cpu2"]

def bare_snakefile(suites: dict, hardware: list, seeds: list) -> str:
    """A bare Snakefile of the workflow's shape: per run a train job (record and checkpoint) and an evaluate job,
    per suite an aggregate of its runs' records; `suites`: suite -> its variants' names."""
    return f'''
SUITES = {suites}
HARDWARE = {hardware}
SEEDS = {seeds}
RUN = "results/{{suite}}/{{variant}}/{{hardware}}/seed{{seed}}"

rule all:
    input: expand("results/{{s}}/comparison.csv", s=SUITES)

rule train:
    output: RUN + "/train.json", RUN + "/final.pt"
    shell: "touch {{output}}"

rule evaluate:
    input: RUN + "/train.json", RUN + "/final.pt"
    output: RUN + "/eval.json"
    shell: "touch {{output}}"

def records(wildcards):
    return expand("results/{{s}}/{{v}}/{{h}}/seed{{n}}/{{r}}", s=wildcards.suite, v=SUITES[wildcards.suite],
                  h=HARDWARE, n=SEEDS, r=["train.json", "eval.json"])

rule aggregate:
    input: records
    output: "results/{{suite}}/comparison.csv"
    shell: "touch {{output}}"
'''


def config(seeds: list) -> dict:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["suites"] = {"big": {"sweep": {"model.width": WIDTHS}}}
    cfg["seeds"] = seeds
    return cfg


def timed(cmd, cwd) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the command's whole process tree) of one command. CPU seconds are what
    a shared machine leaves comparable: its other processes take turns, not instructions."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(proc.stderr[-2000:])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1000, help="a multiple of 50 (25 widths x 2 hardware)")
    args = parser.parse_args()
    seeds = list(range(args.runs // (len(WIDTHS) * len(HARDWARE))))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "bare").mkdir()
        names = [f"width-{w}" for w in WIDTHS]
        (tmp / "bare/Snakefile").write_text(bare_snakefile({"big": names}, HARDWARE, seeds))
        (tmp / "ours").mkdir()
        (tmp / "ours/config.yaml").write_text(yaml.safe_dump(config(seeds)))
        ours = [SNAKEMAKE, "-n", "-q", "--snakefile", str(REPO / "Snakefile"), "--configfile", "config.yaml",
                "--replace-workflow-config", "--cores", "2"]  # fmt: skip
        bare = [SNAKEMAKE, "-n", "-q", "--cores", "2"]
        pairs = [(timed(ours, tmp / "ours"), timed(bare, tmp / "bare")) for _ in range(args.repeats)]
    for (o, oc), (b, bc) in pairs:
        print(f"hwsweep {o:.2f} s ({oc:.2f} CPU-s), bare {b:.2f} s ({bc:.2f} CPU-s), ratio {o / b:.2f} "
              f"(CPU {oc / bc:.2f})")
    runs = len(WIDTHS) * len(seeds) * len(HARDWARE)
    print(f"dry run of {runs} runs ({2 * runs} run jobs): hwsweep / bare Snakefile median ratio "
          f"{statistics.median(o / b for (o, _), (b, _) in pairs):.2f}, of CPU time "
          f"{statistics.median(oc / bc for (_, oc), (_, bc) in pairs):.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
