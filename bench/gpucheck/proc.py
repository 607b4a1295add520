"""The programs a section of bench/gpu_check.py starts (snakemake, hwsweep's launcher and evaluator, torchrun), run
so that a failure or a stop says where it was (torch-free).

Each runs in a process group of its own, its output (stdout and stderr) to a log file in the section's folder,
and a marker file beside the log (`<log>.running`, holding the group's id) while it runs. When it fails or
outlives its timeout (its group is stopped: SIGTERM, then SIGKILL), the last TAIL lines of its log are printed
to the section's output, which goes to gpu_check.log, and the error raised names the program, how it ended and its
log's last line. When the parent stops a whole section over its budget, the section cannot print anything:
the parent finds the markers left in the section's folder (`leftovers`), stops their groups and puts their logs'
tails into gpu_check.log itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TAIL = 40  # lines of a failed or stopped program's log put into gpu_check.log
RUNNING = ".running"
GRACE_S = 10  # between SIGTERM and SIGKILL of a program's group


class Failed(RuntimeError):
    """A program exited non-zero or outlived its timeout; the message: which, how, and its log's last line."""


def tail(path: Path, lines: int = TAIL) -> str:
    """The last `lines` non-empty lines of `path` (progress bars' carriage returns split into lines)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    kept = [x for x in text.replace("\r", "\n").splitlines() if x.strip()]
    return "\n".join(kept[-lines:])


def what(cmd: list[str]) -> str:
    """A program in a few words: its name, then the module it runs (`-m`) or the file it is given, e.g.
    `torchrun hwsweep.run.train spec.json`, `snakemake comparison.csv`."""
    args = [str(a) for a in cmd]
    words = [Path(args[0]).name]
    if "-m" in args[:-1]:
        i = args.index("-m")
        words += [args[i + 1], *[Path(a).name for a in args[i + 2 : i + 3]]]
    else:
        words += [Path(a).name for a in args[1:] if a.endswith((".py", ".json", ".csv"))][:1]
    return " ".join(words)


def _say(header: str, log: Path) -> None:
    print(f"----- {header}: the last {TAIL} lines of {log} -----\n{tail(log) or '(empty)'}\n-----", file=sys.stderr,
          flush=True)  # fmt: skip


def stop_group(pgid: int, grace: float = GRACE_S, leader: subprocess.Popen | None = None) -> None:
    """SIGTERM to a process group, SIGKILL after `grace` seconds if any of it is left (`leader`: the group's first
    process where it is this process's child, reaped as it ends: a zombie would count as left)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        end = time.monotonic() + (grace if sig == signal.SIGTERM else 5)
        while time.monotonic() < end:
            if leader is not None:
                leader.poll()
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.1)


class Program:
    """One program started in a process group of its own, its output to `log`, a marker beside the log while it
    runs."""

    def __init__(self, cmd: list, log: Path, cwd: Path | None = None, env: dict | None = None):
        self.cmd = [str(c) for c in cmd]
        self.log = Path(log)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.marker = self.log.with_name(self.log.name + RUNNING)
        self.t0 = time.monotonic()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                         start_new_session=True)  # fmt: skip
        self.marker.write_text(f"{self.proc.pid}\n{' '.join(self.cmd)}\n")

    @property
    def name(self) -> str:
        return what(self.cmd)

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Stopped, if it still runs (no error: its result is not wanted)."""
        if self.proc.poll() is None:
            stop_group(self.proc.pid, leader=self.proc)
            self.proc.wait()
        self.marker.unlink(missing_ok=True)

    def finish(self, timeout: float, poll=None) -> str:
        """Wait for it at most `timeout` more seconds (`poll`: called about every second meanwhile); its output.
        Raises Failed, the log's tail printed first, when it exits non-zero or is stopped at the timeout."""
        end = time.monotonic() + timeout
        code = None
        try:
            while code is None and time.monotonic() < end:
                try:
                    code = self.proc.wait(timeout=max(0.01, min(1.0, end - time.monotonic())))
                except subprocess.TimeoutExpired:
                    if poll is not None:
                        poll()
        except BaseException:  # the section stopped (its time over), or an error in `poll`: not left running
            seconds = time.monotonic() - self.t0
            if self.proc.poll() is None:
                stop_group(self.proc.pid, grace=3, leader=self.proc)
                self.proc.wait()
                _say(f"{self.name} stopped with the section, after {seconds:.0f} s", self.log)
            self.marker.unlink(missing_ok=True)
            raise
        seconds = time.monotonic() - self.t0
        if code is None:
            stop_group(self.proc.pid, leader=self.proc)
            self.proc.wait()
        self.marker.unlink(missing_ok=True)
        if code is None:
            _say(f"{self.name} stopped at its timeout, after {seconds:.0f} s", self.log)
            last = tail(self.log, 1)
            raise Failed(f"{self.name} timed out after {seconds:.0f} s" + (f"; its log's last line: {last[-300:]}"
                                                                          if last else ""))  # fmt: skip
        if code:
            _say(f"{self.name} exited {code} after {seconds:.0f} s", self.log)
            raise Failed(f"{self.name} exited {code}: {tail(self.log, 1)[-300:]}")
        return self.log.read_text(errors="replace")


def run(cmd: list, log: Path, timeout: float, cwd: Path | None = None, env: dict | None = None, poll=None) -> str:
    """Run `cmd` (stdout and stderr to `log`) for at most `timeout` seconds; its output (Program.finish)."""
    return Program(cmd, log, cwd, env).finish(timeout, poll)


def leftovers(folder: Path) -> list[tuple[Path, str]]:
    """For each program a stopped section left running (a marker in `folder`): its group stopped, and (its log,
    the log's tail)."""
    found = []
    for marker in sorted(Path(folder).rglob("*" + RUNNING)):
        log = marker.with_name(marker.name[: -len(RUNNING)])
        try:
            pgid = int(marker.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pgid = None
        if pgid:
            stop_group(pgid)
        found.append((log, tail(log)))
        marker.unlink(missing_ok=True)
    return found
