"""Parse-and-plan cost of the workflow: `snakemake -n` on a 2,000-job matrix (1,000 runs x train/evaluate; a
run's spec.json is written by the scheduling snakemake, no job) against a bare Snakefile of the same shape, in
one run (goal <= 1.5x).

    .venv/bin/python bench/dry_run.py [--repeats 3]
"""

import argparse
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
SEEDS = list(range(20))
HARDWARE = ["cpu1", "cpu2"]

BARE = f'''
WIDTHS = {WIDTHS}
SEEDS = {SEEDS}
HARDWARE = {HARDWARE}
RUN = "results/{{suite}}/{{variant}}/{{hardware}}/seed{{seed}}"

rule all:
    input: "results/big/comparison.csv"

rule train:
    output: RUN + "/train.json", RUN + "/final.pt"
    shell: "touch {{output}}"

rule evaluate:
    input: RUN + "/train.json", RUN + "/final.pt"
    output: RUN + "/eval.json"
    shell: "touch {{output}}"

rule aggregate:
    input:
        expand("results/big/width-{{w}}/{{h}}/seed{{s}}/train.json", w=WIDTHS, h=HARDWARE, s=SEEDS),
        expand("results/big/width-{{w}}/{{h}}/seed{{s}}/eval.json", w=WIDTHS, h=HARDWARE, s=SEEDS),
    output: "results/big/comparison.csv"
    shell: "touch {{output}}"
'''


def config() -> dict:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["suites"] = {"big": {"sweep": {"model.width": WIDTHS}}}
    cfg["seeds"] = SEEDS
    return cfg


def timed(cmd, cwd) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr[-2000:])
    return time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "bare").mkdir()
        (tmp / "bare/Snakefile").write_text(BARE)
        (tmp / "ours").mkdir()
        (tmp / "ours/config.yaml").write_text(yaml.safe_dump(config()))
        ours = [SNAKEMAKE, "-n", "-q", "--snakefile", str(REPO / "Snakefile"), "--configfile", "config.yaml",
                "--replace-workflow-config", "--cores", "2"]  # fmt: skip
        bare = [SNAKEMAKE, "-n", "-q", "--cores", "2"]
        pairs = [(timed(ours, tmp / "ours"), timed(bare, tmp / "bare")) for _ in range(args.repeats)]
    for o, b in pairs:
        print(f"hwsweep {o:.2f} s, bare {b:.2f} s, ratio {o / b:.2f}")
    print(f"dry run of {len(WIDTHS) * len(SEEDS) * len(HARDWARE) * 2} run jobs: hwsweep / bare Snakefile "
          f"median ratio {statistics.median(o / b for o, b in pairs):.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
