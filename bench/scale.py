"""Cost against size: the workflow's own steps on finished synthetic sweeps (bench/synthetic_sweep.py) of 100, 1,000
and 10,000 runs. At each size, in CPU seconds (user + system of the command's whole process tree: on a shared
machine its other processes take turns, not instructions) and wall seconds:

- the dry run of a finished sweep (`snakemake -n all`, nothing to do) beside a bare Snakefile of the same shape
  (bench/dry_run.py's) in the same folder, interleaved: their ratio;
- each job of a suite's tables (aggregate_suite, table_pages, plot_suite, estimate_vs_actual), combine and status,
  forced (`snakemake -f TARGET`): the job's own wall seconds, from snakemake's metadata of its output (the job
  alone, without the DAG that leads to it);
- `snakemake --report` and the report's size.

Each step's growth exponent is its log-log slope from the second size to the last (1,000 to 10,000 runs; goal
<= 1.1); the report's size at the last size is compared with its size at the first (goal <= 2x).

    .venv/bin/python bench/scale.py [--sizes 100 1000 10000] [--repeats 3] [--keep FOLDER]
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dry_run import SNAKEMAKE, bare_snakefile, timed  # noqa: E402
from synthetic_sweep import write  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SUITE = "width"  # the suite whose jobs are timed (both suites have the same shape)
JOBS = {
    "aggregate_suite": f"results/{SUITE}/runs.csv",
    "table_pages": f"results/{SUITE}/tables/comparison.html",
    "plot_suite": f"results/{SUITE}/plots/curves.png",
    "estimate_vs_actual": f"results/{SUITE}/estimate_vs_actual.csv",
    "combine": "results/comparison.csv",
    "status": "status",
}


OUTPUT = {"status": "results/partial/status.csv"}  # a job's output, where its target is a rule's name


def job_seconds(folder: Path, output: str) -> float:
    """The job's own seconds, from its start to its end as snakemake's metadata of its output keeps them."""
    name = base64.b64encode(output.encode()).decode()
    meta = json.loads((folder / ".snakemake/metadata" / name).read_text())
    return meta["endtime"] - meta["starttime"]


def ours(*args: str) -> list[str]:
    return [SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--configfile", "config.yaml",
            "--replace-workflow-config", "--cores", "1", *args]  # fmt: skip


def finished(folder: Path, runs: int) -> None:
    """A finished sweep of `runs` runs in `folder`, its tables made by the workflow, and the bare Snakefile."""
    made = folder / "config.yaml"  # the records of an earlier call, kept (--keep)
    cfg = yaml.safe_load(made.read_text()) if made.exists() else write(folder, runs)
    subprocess.run(ours("-q", "all"), cwd=folder, check=True, capture_output=True)
    variants = {}
    for path in sorted((folder / "results").glob("*/*/cpu1/seed0")):
        variants.setdefault(path.parts[-4], []).append(path.parts[-3])
    (folder / "bare.smk").write_text(bare_snakefile(variants, list(cfg["hardware"]), cfg["seeds"]))


def measure(folder: Path, repeats: int) -> dict:
    """step -> (median wall s, median CPU s) at this size (a job's: its wall seconds twice); the dry run's ratio to the
    bare Snakefile too."""
    out = {}
    pairs = []
    for _ in range(repeats):  # interleaved: the same load for both
        pairs.append((timed(ours("-n", "-q", "all"), folder),
                      timed([SNAKEMAKE, "-n", "-q", "--snakefile", "bare.smk", "--cores", "1"], folder)))  # fmt: skip
    out["dry run"] = tuple(statistics.median(p[0][i] for p in pairs) for i in (0, 1))
    out["dry run / bare"] = tuple(statistics.median(o[i] / b[i] for o, b in pairs) for i in (0, 1))
    for job, target in JOBS.items():
        walls = []
        for _ in range(repeats):
            timed(ours("-q", "-f", target), folder)
            walls.append(job_seconds(folder, OUTPUT.get(job, target)))
        out[job] = (statistics.median(walls),) * 2
    reports = [timed(ours("--report", "report.html"), folder) for _ in range(repeats)]
    out["report"] = tuple(statistics.median(r[i] for r in reports) for i in (0, 1))
    out["report size (MB)"] = ((folder / "report.html").stat().st_size / 1e6,) * 2
    return out


def exponent(small: float, large: float, ratio: float) -> float:
    return math.log(max(large, 1e-3) / max(small, 1e-3)) / math.log(ratio)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="make (or reuse) the sweeps here instead of a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        found = {}
        for runs in args.sizes:
            folder = root / f"runs{runs}"
            if not (folder / "results/comparison.csv").exists():
                finished(folder, runs)
            found[runs] = measure(folder, args.repeats)
            print(yaml.safe_dump({runs: {k: [round(v, 3) for v in vs] for k, vs in found[runs].items()}}), flush=True)
    first, second, last = args.sizes[0], args.sizes[-2] if len(args.sizes) > 1 else args.sizes[0], args.sizes[-1]
    print(f"{'step':22} " + " ".join(f"{n:>10} runs" for n in args.sizes) + f"  exponent {second}->{last}")
    for step in found[first]:
        cells = " ".join(f"{found[n][step][1]:>15.2f}" for n in args.sizes)
        slope = "" if "/" in step or "size" in step else f"{exponent(found[second][step][1], found[last][step][1], last / second):.2f}"
        print(f"{step:22} {cells}  {slope}")
    size = found[last]["report size (MB)"][0] / found[first]["report size (MB)"][0]
    print(f"report size at {last} runs / at {first}: {size:.2f} (goal <= 2)")


if __name__ == "__main__":
    main()
