"""Atomic output: write to a temporary file beside the target, then rename over it, so a
killed job never leaves a half-written file that looks complete."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path):
    """Yield a temporary path in the target's folder; rename it onto `path` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results should read like any other file
    try:
        yield Path(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path, data) -> None:
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def append_line(path, line: str) -> None:
    """Append one line (a JSON-lines log); a kill can cut only the line being written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(line.rstrip("\n") + "\n")


def read_json(path) -> dict:
    """Read a record; a truncated or empty file raises, so it is never taken for a result."""
    with open(path) as f:
        return json.load(f)


def write_csv(frame, path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
