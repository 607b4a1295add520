"""The stop signals of a run's processes, caught from their first moment, so that a stop at any phase of an attempt
(the wrapper's set-up, the launcher's, torchrun's agent, a worker's imports, rendezvous, data, model) ends it as a
preemption (exit 75, hwsweep.run.preempt) and never as a death by the signal (exit 143). Standard library only:
each process imports it before anything slow (before torch in a worker).

- catch(): a stop signal only raises a flag (`received`); the process decides at its next phase where to stop.
- A worker checks the flag at each phase of its start-up (check(phase)); signalled, it leaves a note in the folder
  its launcher names (STOPPED_DIR: "start-up PHASE", no checkpoint written) and exits 0 (75 without a launcher).
- The launcher, once signalled, leaves a request there (request()): a worker started after the signal (forked by
  torchrun's agent later) never got it, and stops at its first phase all the same.
- HOLD_AT (tests only): "PHASE:FILE[:RANK]" holds a worker at PHASE (of rank RANK, else every rank) after touching
  FILE.<local rank> until a stop signal comes, so a test signals each phase exactly.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

EXIT_PREEMPTED = 75  # EX_TEMPFAIL: stopped by a signal (after a checkpoint, or none this attempt); rerun to resume
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2)
STOPPED_DIR = "HWSWEEP_STOPPED_DIR"  # the environment variable naming the launcher's folder for the stop notes
REQUEST = "requested"  # the launcher's request in that folder: stop, whenever started
STARTUP = "start-up"  # a start-up note: "start-up PHASE"; a note after a checkpoint is the checkpoint's step
HOLD_AT = "HWSWEEP_TEST_HOLD_AT"
HOLD_LIMIT = 120  # seconds a held phase waits for its signal at most

received: list[int] = []  # the stop signals this process got, in order


def _note(signum, frame) -> None:
    received.append(signum)


def catch() -> None:
    """From now on a stop signal only raises the flag (idempotent)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _note)


def names() -> str:
    return ", ".join(signal.Signals(s).name for s in received)


def request(folder: str | os.PathLike) -> None:
    """The launcher's request to every worker, those not yet started included: stop."""
    try:
        Path(folder, REQUEST).touch()
    except OSError:
        pass  # the folder went with the attempt's end


def requested() -> bool:
    """Whether this process got a stop signal or its launcher asked every worker to stop."""
    folder = os.environ.get(STOPPED_DIR)
    return bool(received) or bool(folder) and Path(folder, REQUEST).exists()


def startup_phases(folder: str | os.PathLike) -> list[str]:
    """The start-up phases the workers that stopped before their loop left notes of, by local rank."""
    found = []
    for note in sorted(Path(folder).glob("[0-9]*")):
        try:
            words = note.read_text().split()
        except OSError:
            continue
        if words[:1] == [STARTUP]:
            found.append(" ".join(words[1:]))
    return found


def hold(phase: str) -> None:
    """Tests only (HOLD_AT): wait at `phase` for a stop signal, having said so in a file."""
    said = os.environ.get(HOLD_AT, "").split(":")
    rank = os.environ.get("LOCAL_RANK", "0")
    if len(said) < 2 or said[0] != phase or (len(said) > 2 and said[2] != rank):
        return
    Path(f"{said[1]}.{rank}").touch()
    deadline = time.monotonic() + HOLD_LIMIT
    while not requested() and time.monotonic() < deadline:
        time.sleep(0.05)


COORDINATED = ("resume", "loop")  # phases whose stop the loop takes for every rank at once (several ranks)


def check(phase: str) -> None:
    """A worker at `phase` of its start-up: stop here if a stop was asked for (see the module's docstring)."""
    hold(phase)
    if not requested():
        return
    if phase in COORDINATED and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # Past the model, ranks go straight into the first step's collectives: one rank leaving on its own would
        # leave its peers waiting in one. The loop's stop, decided on the all-reduced flag, takes it at the first
        # step, with a checkpoint.
        return
    folder = os.environ.get(STOPPED_DIR)
    why = names() or "its launcher's request"
    rank = os.environ.get("RANK", "0")
    print(f"hwsweep: stop requested during start-up ({phase}, rank {rank}, {why}); no checkpoint written, "
          f"exiting", flush=True)  # fmt: skip
    if folder:
        try:
            Path(folder, os.environ.get("LOCAL_RANK", "0")).write_text(f"{STARTUP} {phase}\n")
        except OSError:
            pass
        sys.exit(0)  # torchrun's agent reports no failure; the launcher exits 75 on the note
    sys.exit(EXIT_PREEMPTED)  # started by hand (torchrun without hwsweep's launcher)
