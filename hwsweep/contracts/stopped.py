"""A run its user stopped for good (`hwsweep stop RUN`): the mark in the run's folder (MARK, written atomically,
with who stopped it and when), which every later attempt of its train job refuses to start on, in one line and
with EXIT_STOPPED (not 75: snakemake fails the job, and each retry, at once), and `status` shows. `hwsweep stop
--undo RUN`, or removing the file, lets it run again."""

from __future__ import annotations

import getpass
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from hwsweep.contracts import io

MARK = "stopped.json"
EXIT_STOPPED = 77  # EX_NOPERM: its user stopped the run for good; nothing was started


@dataclass(frozen=True)
class Mark:
    run: str  # SUITE/VARIANT/HARDWARE/seedN
    who: str  # user@host
    when: str
    cancelled: tuple[str, ...] = ()  # the SLURM jobs `hwsweep stop` cancelled

    def said(self) -> str:
        return f"hwsweep stop by {self.who} at {self.when}"

    def refusal(self) -> str:
        return (f"run {self.run} is stopped for good ({self.said()}); not started. Run `hwsweep stop --undo "
                f"{self.run}` (or remove its {MARK}) to let it run again")  # fmt: skip


def write(run_dir, run: str, cancelled: tuple[str, ...] = ()) -> Mark:
    mark = Mark(run, f"{getpass.getuser()}@{socket.gethostname()}", time.strftime("%Y-%m-%d %H:%M:%S %z"),
                tuple(cancelled))  # fmt: skip
    io.write_json(Path(run_dir) / MARK, {"run": mark.run, "who": mark.who, "when": mark.when,
                                          "cancelled": list(mark.cancelled)})  # fmt: skip
    return mark


def read(run_dir) -> Mark | None:
    """The run's mark; None where it has none. A mark that cannot be read still stops the run."""
    path = Path(run_dir) / MARK
    if not path.exists():
        return None
    try:
        data = io.read_json(path)
        return Mark(str(data["run"]), str(data["who"]), str(data["when"]), tuple(map(str, data.get("cancelled", ()))))
    except (OSError, ValueError, KeyError, TypeError):
        return Mark(str(run_dir), "unknown (an unreadable mark)", "unknown")


def remove(run_dir) -> bool:
    """Take the mark away; whether there was one."""
    path = Path(run_dir) / MARK
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed
