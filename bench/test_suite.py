"""How long the test suite takes (issue 35: the whole suite <= 15 minutes of pytest on 2 cores, the inner loop
`pytest -m "not slow"` <= 3 minutes): the README's test command, as written there, in a fresh clone of this
commit with a new virtualenv; the install timed apart from pytest; then the inner loop in the same clone.

    .venv/bin/python bench/test_suite.py [--runs 3] [--json out.json] [--census census.jsonl]

Prints pytest's own summary line of each run, its wall time, the CPU time of its process tree and of the whole
machine (SLURM's jobs and the daemons are not in the tree), and the slowest 30 tests of the first full run
(pytest's --durations, which the project's addopts ask for) as a markdown table for docs/benchmarks.md. Runs
after the first reuse the clone and its virtualenv: the same command, three times in a row, is the check that
the parallel suite is as deterministic as the serial one was. With --census, the first full run is watched by
bench/census.py: its CPU by kind of process and by test, SLURM's jobs and killed processes included.

Beside each run, before and after it, the reference measured in the same run: the CPU seconds of one
`import torch` in the clone's virtualenv (the median of 5), the suite's commonest work (most of its ~1,500
processes start that way). The host's speed moves (by a quarter within an hour, docs/history/test-suite.md): a run's
seconds divided by the reference compare across hosts and hours, its seconds alone do not.

Each run, full or inner, starts with an empty torch compile cache of its own (TORCHINDUCTOR_CACHE_DIR), as on a
fresh machine (CI, a new clone's first run): inductor's cache in /tmp otherwise outlives runs, and a warm one
spares the compiling tests their C++ builds (test_fastpath's compile test: 19 CPU-s warm, 41 cold).
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import census

REPO = Path(__file__).resolve().parent.parent


def readme_test_command() -> str:
    """The README's second command on its first screen: the one that sets up and runs the tests."""
    blocks = re.findall(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), flags=re.S)
    (command,) = [b for b in blocks[:2] if "pytest" in b]
    return command.strip()


def children_cpu() -> float:
    """User + system CPU seconds of every process this one has reaped, with the processes they reaped (SLURM's
    jobs are the daemons' children: not counted)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: str, cwd: Path, env: dict | None = None) -> tuple[float, int, str, float, float | None]:
    """Wall seconds, exit code, output and CPU seconds of `command` (its process tree), and the machine's busy
    CPU seconds meanwhile (None where unknown)."""
    start, cpu, busy = time.monotonic(), children_cpu(), census.busy_cpu()
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=env)
    after = census.busy_cpu()
    machine = None if busy is None or after is None else after - busy
    return time.monotonic() - start, proc.returncode, proc.stdout + proc.stderr, children_cpu() - cpu, machine


def cold(tmp: str, name: str) -> dict:
    """This environment with an empty torch compile cache of its own, under `tmp` (the compiling tests pay their
    C++ builds as on a fresh machine)."""
    return os.environ | {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix=f"inductor-{name}-", dir=tmp)}


def reference(clone: Path, times: int = 5) -> float:
    """CPU seconds of `import torch` in the clone's virtualenv: the median of `times`."""
    return statistics.median(timed(".venv/bin/python -c 'import torch'", clone)[3] for _ in range(times))


def summary(out: str) -> str:
    """pytest's closing line ('== 700 passed in 800.00s (0:13:20) ==')."""
    lines = [line.strip("= ") for line in out.splitlines() if re.match(r"=+ .*\bin [\d.]+s", line)]
    return lines[-1] if lines else "(no pytest summary)"


def slowest(out: str, n: int = 30) -> list[tuple[float, str, str]]:
    rows = re.findall(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)$", out, flags=re.M)
    return [(float(s), phase, test) for s, phase, test in rows][:n]


def keep(folder: Path | None, name: str, out: str) -> None:
    """A run's whole output, for its failures (the clone and its own copy go when the benchmark ends)."""
    if folder:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="full-suite runs in a row (the flakiness check: 3)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--logs", type=Path, help="write each run's whole output here (full-N.log, inner.log)")
    parser.add_argument("--census", type=Path, help="watch the first full run's processes (bench/census.py); here")
    args = parser.parse_args()
    command = readme_test_command()
    install, _, pytest_part = command.rpartition("&&")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        seconds, code, out, *_ = timed(install.strip(" &"), clone)
        if code:
            sys.exit(f"the README's install failed:\n{out[-3000:]}")
        result = {"commit": commit.strip(), "command": command, "install_seconds": round(seconds, 1), "runs": []}
        print(f"commit {result['commit']}: install {seconds:.0f} s ({install.strip(' &')})")
        for i in range(args.runs):
            before = reference(clone)
            watch = census.Census().start() if args.census and i == 0 else None
            seconds, code, out, cpu, machine = timed(pytest_part.strip(), clone, cold(tmp, f"full-{i + 1}"))
            if watch:
                watch.stop()
                processes = list(watch.processes.values())
                census.write(processes, args.census)
                result["census"] = census.tables(processes, watch.busy)
            torch_s = (before + reference(clone)) / 2
            result["runs"].append({"seconds": round(seconds, 1), "cpu_seconds": round(cpu), "exit": code,
                                   "machine_cpu_seconds": None if machine is None else round(machine),
                                   "summary": summary(out), "import_torch_cpu_seconds": round(torch_s, 3),
                                   "seconds_per_import_torch": round(seconds / torch_s)})  # fmt: skip
            keep(args.logs, f"full-{i + 1}.log", out)
            busy = "" if machine is None else f", the machine's {machine / 60:.1f} min ({machine / seconds:.2f} cores busy)"
            print(f"full suite, run {i + 1}: {seconds:.0f} s, CPU {cpu / 60:.1f} min in its process tree{busy}, exit {code}: "
                  f"{summary(out)}; import torch {torch_s:.2f} CPU-s here then, so {seconds / torch_s:.0f} of them")  # fmt: skip
            if i == 0:
                result["slowest"] = slowest(out)
        seconds, code, out, cpu, _ = timed(f'{pytest_part.strip()} -m "not slow"', clone, cold(tmp, "inner"))
        result["inner_loop"] = {"seconds": round(seconds, 1), "cpu_seconds": round(cpu), "exit": code,
                                "summary": summary(out)}  # fmt: skip
        keep(args.logs, "inner.log", out)
        print(f'inner loop (-m "not slow"): {seconds:.0f} s, exit {code}: {summary(out)}')
    print("\n| seconds | phase | test |\n|---:|---|---|")
    for s, phase, test in result.get("slowest", []):
        print(f"| {s:.1f} | {phase} | `{test}` |")
    if "census" in result:
        print(f"\nThe first run's processes (bench/census.py --read {args.census}):\n\n{result['census']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
