"""Where a command's CPU goes, process by process (issue 35): every process started while it runs, its CPU, its
kind and the test it ran for, including what a process tree's own accounting misses (SLURM's jobs, children of
the daemons; processes killed before they were reaped).

    .venv/bin/python bench/census.py --out census.jsonl -- .venv/bin/python -m pytest
    .venv/bin/python bench/census.py --read census.jsonl

A thread reads /proc every --period seconds (0.25): each process's user + system CPU at its last reading, its
first arguments, and PYTEST_CURRENT_TEST from its environment (a process started by a test carries it, unless the
test gave it an environment of its own). A process's CPU after its last reading is not seen, nor a process that
lives less than one period: the census says how much of the machine's busy CPU meanwhile (/proc/stat) it saw.
Linux only; root sees every process's environment, another user only its own.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from hwsweep.run.tether import WORKER_NAME

# (kind, pattern searched in the process's arguments): the first that matches names it; a group in the pattern
# goes into the name. The suite's processes by what starts them, the commonest first.
KINDS = [
    ("torchrun agent", r"\btorchrun\b|torch\.distributed\.run"),  # hwsweep.run.torchrun too; before its workers' module
    ("trainer rank", r"hwsweep\.run\.train\b|hwsweep/run/train\.py"),
    ("evaluation", r"hwsweep\.run\.evaluate\b|hwsweep/run/evaluate\.py"),
    ("tracker process", r"tracking import serve"),
    ("launcher", r"hwsweep\.run\.launch\b"),
    ("tether (a script's worker)", r"hwsweep\.run\.tether\b"),
    ("preempt (SLURM job wrapper)", r"hwsweep\.run\.preempt\b"),
    ("pytest-xdist worker", r"exec\(eval\(sys\.stdin"),
    ("workflow script: {}", r"\.snakemake/scripts/tmp\w+\.(\w+)\.py"),
    ("snakemake job step", r"snakemake\b.*--target-jobs"),
    ("snakemake", r"\bsnakemake\b"),
    ("hwsweep command", r"bin/hwsweep\b|-m hwsweep\.cli\b"),
    ("bench: {}", r"bench/(\w+\.py)"),
    ("example script: {}", r"examples/(\w+)/"),
    ("test helper: {}", r"tests/(\S+\.py)"),
    ("pytest", r"-m pytest\b|bin/pytest\b"),  # not a path under /tmp/pytest-of-<user>/
]


def kind(argv: list[str], comm: str) -> str:
    """What a process is, from its arguments (KINDS); otherwise its command name."""
    if comm.startswith(WORKER_NAME):  # forked from torchrun's agent: the agent's arguments, a name of its own
        return "trainer rank"
    line = " ".join(argv)
    for name, pattern in KINDS:
        if found := re.search(pattern, line):
            return name.format(*found.groups())
    return f"other: {comm}"


TICK = os.sysconf("SC_CLK_TCK")  # /proc's clock ticks per second


def busy_cpu() -> float | None:
    """Busy CPU seconds of the whole machine since boot (/proc/stat: user, nice, system, irq, softirq), which counts
    what a process tree's accounting cannot: SLURM's jobs, the daemons, processes nobody reaped; None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / TICK


class Census:
    """Reads /proc every `period` seconds from start() to stop(): `processes`, one dict per process started after
    start() (pid, ppid, comm, argv, test, cpu)."""

    def __init__(self, period: float = 0.25):
        self.period, self.processes, self.busy = period, {}, 0.0
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="census", daemon=True)

    def start(self) -> "Census":
        self._busy = busy_cpu()
        # In /proc's clock (ticks of 10 ms, rounded down): started by what is measured, not before it.
        self._born_after = _uptime() - 0.02
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        self._thread.join()
        self.busy = busy_cpu() - self._busy

    def _watch(self) -> None:
        me, halted = str(os.getpid()), False
        while not halted:
            halted = self._halt.is_set()  # one reading more after stop(): what still runs then
            now = _uptime()
            for pid in os.listdir("/proc"):
                if pid.isdigit() and pid != me:
                    self._read(pid, now)
            self._halt.wait(0 if halted else self.period)

    def _read(self, pid: str, now: float) -> None:
        found = stat(pid)
        if found is None or found["started"] < self._born_after:  # gone since listed, or older than the census
            return
        seen = self.processes.get((pid, found["started"]))
        if seen is None:
            seen = self.processes[(pid, found["started"])] = {"pid": int(pid), "ppid": found["ppid"], "cpu": 0.0}
        # A process seen between its fork and its exec still shows its parent's arguments and environment: read
        # them again at each reading of its first second (exec follows fork within milliseconds).
        if "argv" not in seen or now - found["started"] < 1.0:
            seen |= {"comm": found["comm"], "argv": _argv(pid), "test": _test(pid)}
        seen["cpu"] = max(seen["cpu"], found["cpu"])


def stat(pid: str | int) -> dict | None:
    """/proc/PID/stat: the process's command name, parent, start (seconds since boot) and CPU (user + system
    seconds); None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return {"comm": text[text.index("(") + 1 : text.rindex(")")], "ppid": int(fields[1]),
            "started": int(fields[19]) / TICK, "cpu": (int(fields[11]) + int(fields[12])) / TICK}  # fmt: skip


def _uptime() -> float:
    """Seconds since boot: the clock of a process's start time in /proc."""
    return float(Path("/proc/uptime").read_text().split()[0])


def _argv(pid: str) -> list[str]:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:16]
        return [a.decode(errors="replace")[:300] for a in args if a]
    except OSError:
        return []


def _test(pid: str) -> str:
    """The test that started the process (PYTEST_CURRENT_TEST without its phase), or ""."""
    try:
        for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if item.startswith(b"PYTEST_CURRENT_TEST="):
                return item.split(b"=", 1)[1].decode(errors="replace").rsplit(" (", 1)[0]
    except OSError:  # another user's process, or gone
        pass
    return ""


def tables(processes: list[dict], busy: float | None = None, top: int = 30) -> str:
    """Markdown: CPU by kind of process, then by test (the `top` largest of each)."""
    total = sum(p["cpu"] for p in processes) or 1.0
    lines = [f"{len(processes)} processes, {total:,.1f} CPU-s"
             + (f" ({total / busy:.0%} of the machine's {busy:,.1f} busy CPU-s meanwhile)" if busy else "")]  # fmt: skip
    for title, key in (("kind of process", lambda p: kind(p["argv"], p["comm"])),
                       ("test (none: a process without the variable)", lambda p: p["test"] or "(none)")):  # fmt: skip
        groups = collections.defaultdict(list)
        for p in processes:
            groups[key(p)].append(p["cpu"])
        lines += ["", f"| CPU-s | share | processes | CPU-s each | {title} |", "|---:|---:|---:|---:|---|"]
        for name, cpus in sorted(groups.items(), key=lambda g: -sum(g[1]))[:top]:
            lines.append(f"| {sum(cpus):.1f} | {sum(cpus) / total:.1%} | {len(cpus)} | {sum(cpus) / len(cpus):.2f} "
                         f"| {name} |")  # fmt: skip
    return "\n".join(lines)


def write(processes: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(p) + "\n" for p in processes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="each process as a line of JSON")
    parser.add_argument("--read", type=Path, help="print the tables of an earlier census instead")
    parser.add_argument("--period", type=float, default=0.25, help="seconds between readings of /proc")
    parser.add_argument("command", nargs="*", help="the command to run and watch (after --)")
    args = parser.parse_args()
    if args.read:
        print(tables([json.loads(line) for line in args.read.read_text().splitlines()]))
        return
    if not args.command:
        parser.error("give a command after --, or --read a census")
    census = Census(args.period).start()
    code = subprocess.call(args.command)
    census.stop()
    processes = list(census.processes.values())
    if args.out:
        write(processes, args.out)
    print(tables(processes, census.busy))
    sys.exit(code)


if __name__ == "__main__":
    main()
