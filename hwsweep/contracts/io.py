"""Atomic output: write to a temporary file beside the target, then rename over it, so a
killed job never leaves a half-written file that looks complete.

A write the file system refuses (full, read-only, not permitted) becomes StorageError: one line naming the
folder, what is wrong and the fix, the same in the job's log, `status` and the report (they read the log)."""

from __future__ import annotations

import errno
import getpass
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

FULL = (errno.ENOSPC, errno.EDQUOT)
READ_ONLY = (errno.EROFS,)
DENIED = (errno.EACCES, errno.EPERM)
# Below this a file system counts as full when a write failed without saying why (torch's writer reports a full
# disk as "unexpected pos"), and a run does not start: one more log line or checkpoint would not fit.
MIN_FREE = 1 << 20

def temporaries(name: str) -> str:
    """The glob of what atomic_path writes before it renames onto `name` (a glob itself, e.g. step*)."""
    return f".{name}.*.tmp"


class StorageError(OSError):
    """A write the file system refused, as one line: the folder, what is wrong, the fix."""

    def __str__(self) -> str:
        return self.strerror


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def free_bytes(folder) -> int | None:
    """Free bytes for this user on the file system of `folder` (its nearest existing parent); None if unknown."""
    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def storage_message(folder, code: int, need: int | None = None) -> str:
    """The one line for a file system fault `code` (an errno) under `folder`."""
    again = "then run snakemake again (finished work is kept)"  # a failed run's one line stays under failure.MAX
    if code in FULL:
        free = free_bytes(folder)
        has = f"{_size(free)} free" if free is not None else "free space unknown"
        wants = f", about {_size(need)} needed" if need else ""
        return f"{folder}: no space left on device ({has}{wants}); free space there or move results/ to a larger disk, {again}"
    if code in READ_ONLY:
        return f"{folder}: read-only file system; remount it read-write or work in a writable copy, {again}"
    if code in DENIED:
        return f"{folder}: permission denied for user {getpass.getuser()}; make it writable for that user (chmod u+w, chown), {again}"
    return f"{folder}: {os.strerror(code)}"


def fault(folder, code: int, need: int | None = None) -> StorageError:
    return StorageError(code, storage_message(folder, code, need))


@contextmanager
def storage(folder):
    """Writes under `folder`: a full, read-only or forbidden file system becomes StorageError's one line, also
    where the writer reports a full disk in its own words (torch: "unexpected pos", DCP: a CheckpointException)."""
    try:
        yield
    except StorageError:
        raise
    except OSError as e:
        if e.errno in FULL + READ_ONLY + DENIED:
            raise fault(folder, e.errno) from e
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        free = free_bytes(folder)
        if free is not None and free < MIN_FREE:
            raise fault(folder, errno.ENOSPC) from e
        raise


def one_line_refusals(prog: str = "hwsweep") -> None:
    """For an entry point's process (a job's script, a launcher): a StorageError that reaches the top prints its
    one line on stderr instead of a traceback (exit status 1), so the job's log, `status` and the report name the
    folder and the fix."""
    previous = sys.excepthook
    if getattr(previous, "one_line", False):
        return

    def hook(kind, value, traceback):
        if issubclass(kind, StorageError):
            print(f"{prog}: {value}", file=sys.stderr, flush=True)
        else:
            previous(kind, value, traceback)

    hook.one_line = True
    sys.excepthook = hook


def writable_problem(folder, need: int = MIN_FREE) -> StorageError | None:
    """Why nothing can be written under `folder` (its nearest existing parent): read-only, not permitted, or fewer
    than `need` bytes free; None when it can. Cheap (statvfs and access): checked before a run or a large write."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            return fault(folder, errno.EROFS)
    except OSError:
        return None
    if not os.access(existing, os.W_OK | os.X_OK):
        return fault(folder, errno.EACCES)
    free = free_bytes(existing)
    if free is not None and free < need:
        return fault(folder, errno.ENOSPC, need)
    return None


def require_space(folder, need: int) -> None:
    """Before writing about `need` bytes under `folder`: StorageError when they cannot be written there."""
    problem = writable_problem(folder, need + MIN_FREE)
    if problem is not None:
        raise problem


def remove_temporaries(folder, patterns: tuple[str, ...]) -> list[Path]:
    """Remove what killed atomic writes left in `folder`: the hidden .tmp files (or a sharded checkpoint's .tmp
    folder) that match `patterns` (globs: hwsweep's own, never a script's). Call it only where no write can be under
    way (a run's start, before its processes). Returns what it removed."""
    gone = []
    for path in sorted({p for pattern in patterns for p in Path(folder).glob(pattern)}):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        gone.append(path)
    return gone


@contextmanager
def atomic_path(path):
    """Yield a temporary path in the target's folder; rename it onto `path` on success. A failure of the file
    system (also one the writer reports in its own words while the disk is full) is StorageError's one line."""
    path = Path(path)
    with storage(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # temporaries(name)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results should read like any other file
    try:
        with storage(path.parent):
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
    with storage(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(line.rstrip("\n") + "\n")


def read_json(path) -> dict:
    """Read a record; a truncated or empty file raises, so it is never taken for a result."""
    with open(path) as f:
        return json.load(f)


def read_cache(path) -> dict:
    """A cache file's JSON object; {} where it is missing, unreadable, damaged or not an object: a cache only
    saves work, so what it cannot give is measured or counted again."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_csv(frame, path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
