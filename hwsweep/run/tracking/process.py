"""The tracker's process: where the clients run, apart from the run's, fed items on stdin and answering on stdout;
one at a time per tracked folder (a resumed attempt's waits for a hard-killed one's)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from hwsweep.contracts import io
from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.target import Target
from hwsweep.run.tracking.worker import Worker

PID_FILE = "tracking.pid"  # in the tracked folder: the tracker's process that writes there now
SERVE = "from hwsweep.run.tracking import serve; serve()"  # its code (Tracker starts it); _follow knows it by it


def _follow(path: Path, limit: float) -> None:
    """Wait (at most `limit` s) until the tracker's process that last wrote `path` has ended, then write ours:
    a hard-killed run's tracker closes its tracked runs while the resumed attempt starts, and the resumed one must
    see what that one sent (W&B's last step) and close after it (MLflow's status)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text())
        deadline = time.monotonic() + limit
        while pid != os.getpid() and time.monotonic() < deadline:
            if SERVE not in Path(f"/proc/{pid}/cmdline").read_text():
                break  # raises OSError once that process is gone; another process with its number: not ours
            time.sleep(0.1)
    with contextlib.suppress(OSError):
        io.write_text(path, f"{os.getpid()}\n")


def serve() -> None:
    """The tracker's process (Tracker, process=True): its first line on stdin says what to track, each next line
    is an item; each mark and the stop are answered on stdout. Apart from the run's process so that the clients'
    Python never holds the run's interpreter lock, and on the CPUs the run left spare. It ends once the stop is
    answered; if its stdin ends first (the run is gone), it closes the tracked runs as failed, as far as the
    trackers take them within close_timeout (close_limit in all)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C or a scheduler's TERM is the run's to handle: it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # checkpoints, then stops its tracker or ends (stdin closes)
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a client library's prints go to the run's log, not into the answers
    # The clients' own retry chatter (urllib3's "Retrying ..." per attempt) is not the one warning line a
    # failing backend gets.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    first = sys.stdin.readline()
    if not first:  # the run ended before it said what to track
        return
    start = json.loads(first)
    if start["cpus"] and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, start["cpus"])
    t = start["target"]
    target = Target(**t | {"folder": Path(t["folder"]), "results": Path(t["results"])})
    config = TrackingConfig.from_dict(start["config"], "tracking")
    items: queue.Queue = queue.Queue()  # unbounded: each backend's channel bounds its own rows

    def read() -> None:  # takes stdin as it comes, so the run's writes never wait on a slow tracker
        for line in sys.stdin:
            items.put(json.loads(line))
        items.put(("eof", None))
        # A last resort: the worker gives up on the trackers within close_limit of the end.
        timer = threading.Timer(config.close_limit + config.close_timeout + 30, os._exit, (0,))
        timer.daemon = True
        timer.start()

    def done(token, stopped: bool) -> None:
        answer = {"done": token, "stopped": stopped, "backends": worker.status(), "busy": worker.busy_seconds}
        with contextlib.suppress(OSError):
            answers.write(json.dumps(answer) + "\n")
            answers.flush()

    worker = Worker(target, config, start["system"], start["pid"], done)
    threading.Thread(target=read, name="hwsweep-tracking-stdin", daemon=True).start()
    _follow(target.folder / PID_FILE, config.close_limit)
    worker.run(lambda timeout: items.get(timeout=timeout))
    sys.stderr.flush()
    shutil.rmtree(start["tmp"], ignore_errors=True)  # the run's process may end before it sees this one end
    os._exit(0)  # every client closed or given up: a given-up client's thread does not keep the process
