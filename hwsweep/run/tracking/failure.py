"""How trouble with a tracker is told: one warning line in the job's log, and a failure's first line (what the
record and the warning say)."""

from __future__ import annotations

import sys


def warn(line: str) -> None:
    print(f"hwsweep: warning: {line}", file=sys.stderr, flush=True)


def first_line(error: BaseException) -> str:
    """Why a client failed, as the record and the warning say it: its type and the first line of its message."""
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {text}"[:300] if text else type(error).__name__
