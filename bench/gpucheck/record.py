"""What one section of bench/gpu_check.py found, row by row, in a JSON file rewritten (atomically) after every
row: a section stopped at its time budget keeps the rows it finished (torch-free).

A row is one claim with its goal: name, status, what was measured (`shown`, the figure as the table prints it;
`value`, the number the goal judges), the goal in words and a detail line. Statuses:

    pass     measured, goal met            fail     measured, goal missed
    info     measured, no goal applies here (e.g. a CPU stand-in in --smoke)
    skipped  not measured, with the reason  error    the measurement broke (the reason: the exception's line)
    pending  declared, not reached yet (the parent turns it into skipped when the section ends)
"""

from __future__ import annotations

import time
import traceback
from contextlib import contextmanager
from pathlib import Path

from hwsweep.contracts import io

STATUSES = ("pass", "fail", "info", "skipped", "error", "pending")


class Stopped(BaseException):
    """The parent stopped this section (SIGTERM: its time was over). Not a row's error: guarded() lets it through,
    and the rows not finished stay pending (the parent lists them as not reached, with what they had reached)."""


def judged(ok: bool) -> str:
    return "pass" if ok else "fail"


def bytes_text(n: float) -> str:
    """Bytes as the table shows them: GiB, or MiB under one GiB."""
    return f"{n / 2**30:.2f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:.1f} MiB"


class Recorder:
    """The rows of one section, saved to `path` after every change."""

    def __init__(self, path: Path, section: str):
        self.path = Path(path)
        self.data = {"section": section, "rows": [], "notes": []}
        self.save()

    def declare(self, names: list[str]) -> None:
        """The rows this section will measure, in order: each pending until recorded."""
        for name in names:
            if self._find(name) is None:
                self.data["rows"].append({"name": name, "status": "pending"})
        self.save()

    def row(self, name: str, status: str, shown: str = "", goal: str = "", value=None, detail: str = "",
            **extra) -> dict:  # fmt: skip
        if status not in STATUSES:
            raise ValueError(f"row status {status!r}: not one of {STATUSES}")
        row = {"name": name, "status": status, "shown": shown, "goal": goal, "value": value, "detail": detail} | extra
        found = self._find(name)
        if found is None:
            self.data["rows"].append(row)
        else:
            self.data["rows"][found] = row
        self.save()
        return row

    def note(self, line: str) -> None:
        """A line about the whole section (what it scaled, what it could not measure)."""
        self.data["notes"].append(line)
        self.save()

    @contextmanager
    def guarded(self, name: str):
        """Run one row's measurement: an exception becomes that row's error (its last line) and the
        section goes on with the next row."""
        t0 = time.monotonic()
        try:
            yield
        except (Exception, SystemExit) as e:  # one row's failure (a bench helper's sys.exit too) is a finding
            traceback.print_exc()
            line = (str(e) if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}").strip().splitlines()
            said = line[0][:300] + (f" ... {line[-1][-300:]}" if len(line) > 1 else "") if line else type(e).__name__
            self.row(name, "error", detail=said,
                     seconds=round(time.monotonic() - t0, 1))  # fmt: skip

    def _find(self, name: str) -> int | None:
        return next((i for i, r in enumerate(self.data["rows"]) if r["name"] == name), None)

    def save(self) -> None:
        io.write_json(self.path, self.data)
