"""Why a run failed, in one line, from its log: the one function the runner's message, the report's
failure list and `status`'s problem column all use, so they name the same cause.

A failed run's log holds the real cause (a worker's exception) above torchrun's report of it (the
agent's ChildFailedError traceback, its summary block, "To enable traceback see: …"), often next to
other ranks' errors that only follow from it (a collective that fails because its peer died).
Torch-free and hwsweep-free: it reads lines."""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from pathlib import Path

# The line that opens each attempt of a train job in its log (hwsweep.run.preempt writes it): a failure's
# reason is read from the newest attempt only, and status finds the SLURM job of that attempt in it.
ATTEMPT = re.compile(r"^==== hwsweep: attempt (?P<attempt>\d+) \((?:SLURM job (?P<job>\d+), )?host [^)]*\) "
                     r"of spec (?P<spec>[0-9a-f]+), ")  # fmt: skip
MAX = 220  # one line of a table or a list, not the whole message
KEEP = 1000  # lines a reader keeps from a log's end: several ranks' tracebacks and torchrun's summary fit

# A terminal's escape sequences a script prints (colour, cursor moves, a hyperlink, a character set): CSI, OSC, nF
# and the two-character ones. Stripped from every line read, so a status table, a report and snakemake's console show text.
ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[ -/]+[0-~]|[0-Z\\-_a-~])")
# torch's excepthook prefixes a worker's traceback with "[rank0]: "; torchrun's --tee/--role with "[trainer0]:".
PREFIX = re.compile(r"^\[[A-Za-z_]\w*?\d+\]: ?")
TRACEBACK = "Traceback (most recent call last):"
CHAIN = {
    "The above exception was the direct cause of the following exception:": "caused by",
    "During handling of the above exception, another exception occurred:": "while handling",
}
# What torchrun's agent adds when a worker fails: it repeats the worker's fate, never its cause.
BOILERPLATE = re.compile(
    r"^\s*(\[?[EWI]\d{4} \d\d:|[=*-]{5,}$|\[\d+\]:$|Failures:$|<NO_OTHER_FAILURES>|Root Cause \(first observed failure\):"
    r"|\S+ FAILED$|WARNING:torch\.distributed|Setting OMP_NUM_THREADS|terminate called without an active exception"
    r"|\s+(time|host|rank|exitcode|error_file|traceback)\s*: |hwsweep: (warning|flagged): |hwsweep\.run\.launch \[node"
    r"|[\w ]*:\s+\d+%\|)"  # a progress bar (tqdm's "train:  79%|███▉ | 473/600 [...]"): progress, never a cause
)
CHILD_FAILED = re.compile(r"\bChildFailedError\b")  # the agent's summary of its workers' exit codes
SIGNALLED = re.compile(r"\bSignalException\b")  # the agent itself was stopped by a signal: the why is elsewhere
# A collective that failed because another rank died or hung: a consequence of that rank's error.
CONSEQUENCE = re.compile(r"(Dist\w*Error|by peer|remote worker|[Ww]atchdog|gloo|NCCL|ProcessGroup|c10d|Socket Timeout)")
OWN = re.compile(r"^hwsweep(\.run\.\w+| config error| evaluate| resources)?: ")  # hwsweep's own one-line verdicts
RUN_ID = re.compile(r"^hwsweep: [^/\s]+/[^/\s]+/[^/\s]+/seed\d+: ")  # the runner's; tables name the run already
# A plain line that says something went wrong: how sys.exit("message") and most scripts' own checks end.
ERRORISH = re.compile(r"(\b(error|ERROR|failed|cannot|can't|not found|No such|does not exist|missing|invalid|refused"
                      r"|denied|Killed|out of memory)\b|Error\b|Exception\b)")
SOURCE = re.compile(r'^\s*(File "|raise\b|[~^]+$)')  # a traceback's frame or source line cut from its header


@dataclass
class _Stream:
    """One writer's place in the log (a rank, or the launcher): tracebacks of ranks interleave."""

    in_traceback: bool = False
    chain: str | None = None  # the link word when the next traceback continues the last exception's chain
    last: int | None = None  # index of this writer's last exception


def _split(line: str) -> tuple[str, str]:
    """(writer, text): escape sequences dropped, the rank prefixes peeled off, as many as torchrun and torch
    stacked."""
    writer, line = "", ANSI.sub("", line)
    while m := PREFIX.match(line):
        writer, line = writer + m.group(0).strip(), line[m.end() :]
    return writer, line.rstrip()


def _short(text: str) -> str:
    return text if len(text) <= MAX else text[: MAX - 1] + "…"


STOPPED_SILENTLY = "stopped without a failure line (killed?)"


def reason(lines: list[str]) -> str | None:
    """The cause in lines (_cause), the last plain line as it is where nothing else says why (a command that printed
    its message and exited with a status names its own end)."""
    return _cause(lines)[0]


def _cause(lines: list[str]) -> tuple[str | None, bool]:
    """The real cause of a failure in a log's lines, or None for a log with nothing to say.

    In order: the first exception that is not a consequence of another rank's failure (log order: the
    rank that failed first printed first); hwsweep's own last verdict line; the last plain line that
    names an error (sys.exit("…") prints no traceback); a consequential collective error; torchrun's
    agent stopped by a signal; the last plain line, flagged as saying nothing of why. A chained exception is named by its last link (what
    the script chose to raise, usually with its context: "cannot read the dataset config x") followed by
    its root (the low-level error that started it), as the last link alone can hide a handler's bug."""
    streams: dict[str, _Stream] = collections.defaultdict(_Stream)
    exceptions: list[tuple[str, str | None]] = []  # (last link, "caused by <root>" or None)
    signalled, own, plain = [], [], []
    for raw in lines:
        writer, line = _split(raw)
        s = streams[writer]
        if not line.strip():
            continue  # blank lines sit between the links of a chain
        if line == TRACEBACK:
            s.in_traceback = True
            continue
        if line in CHAIN:
            s.chain = CHAIN[line]
            continue
        if s.in_traceback:
            if line[0].isspace():
                continue  # a frame, its source line or the carets under it
            s.in_traceback = False
            if CHILD_FAILED.search(line):
                continue
            if SIGNALLED.search(line):
                signalled.append(line)
                continue
            if s.chain and s.last is not None:
                first, root = exceptions[s.last]
                exceptions[s.last] = (line, root or f"{s.chain} {first}")
            else:
                s.last = len(exceptions)
                exceptions.append((line, None))
            s.chain = None
            continue
        s.chain = None
        if BOILERPLATE.match(line) or SOURCE.match(line):
            continue
        (own if OWN.match(line) else plain).append(line)

    def text(exception):
        last, root = exception
        return f"{last} ({root})" if root else last

    real = [e for e in exceptions if not CONSEQUENCE.search(text(e))]
    errorish = [x for x in plain if ERRORISH.search(x)]
    candidates = ([text(real[0])] if real else []) + [RUN_ID.sub("", x) for x in own[-1:]] + errorish[-1:] + \
        [text(e) for e in exceptions[:1]] + signalled[-1:]  # fmt: skip
    if candidates:
        return _short(candidates[0].strip()), False
    return (_short(plain[-1].strip()), True) if plain else (None, False)  # True: nothing in the lines says why


def attempt_line(attempt: int, job: str | None, host: str, spec: str, stamp: str) -> str:
    """The marker line of one attempt (ATTEMPT reads it back)."""
    where = (f"SLURM job {job}, " if job else "") + f"host {host}"
    return f"==== hwsweep: attempt {attempt} ({where}) of spec {spec}, {stamp} ===="


def newest_attempt(lines: list[str]) -> list[str]:
    """The lines of the log's newest attempt (all of them when it has no attempt markers)."""
    starts = [i for i, line in enumerate(lines) if ATTEMPT.match(line)]
    return lines[starts[-1] + 1 :] if starts else lines


def log_reason(path: Path) -> str:
    """reason() of a log file's last lines (KEEP at most); says so when there is no log or nothing in it."""
    try:
        with open(path, "rb") as f:
            start = max(0, f.seek(0, 2) - KEEP * 256)  # the end of a long log, not all of it (status reads many)
            f.seek(start)
            lines = f.read().decode(errors="replace").splitlines()[1 if start else 0 :]  # the first may be cut
    except OSError:
        return "no log"
    # A log that just stops (SIGKILL, the OOM killer: nothing printed why) says so, with its last line.
    found, silent = _cause(newest_attempt(lines)[-KEEP:])
    if silent:
        return _short(f"{STOPPED_SILENTLY}; its last line: {found}")
    return found or "empty log"
