"""The run's side: rank 0's Tracker, which the training thread feeds without ever waiting, and which starts the
tracker's process, hands it the rows and waits (bounded) for its answers."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.failure import warn
from hwsweep.run.tracking.process import SERVE
from hwsweep.run.tracking.target import Target, run_target
from hwsweep.run.tracking.worker import Worker, take

OWNER_FILE = "tracking.owner"  # written by hwsweep.runtime in the run folder: the runner of a command leaves it the tracking


class Tracker:
    """Rank 0's feed to the trackers. The training thread only puts plain floats into a bounded queue; the
    clients run in the tracker's process (process=False: on a thread of this one, as tests inject backends)."""

    def __init__(self, target: Target, config: TrackingConfig, system: bool = True, cpus=None, process: bool = True):
        self.target, self.config = target, config
        self.queue: queue.Queue = queue.Queue(maxsize=config.queue_size)
        self.dropped = 0  # rows this queue had no room for: lost to every backend
        self.backends: dict[str, dict] = {}  # each backend's status, as the clients' side last answered
        self.busy_seconds = 0.0  # CPU time the clients spent after opening (bench/)
        self._unanswered: str | None = None  # why the clients' side did not answer the last wait
        self._warned_late = False
        self._waiting: dict[int, threading.Event] = {}
        self._tokens = iter(range(1, 1 << 62))
        self._stopped = False
        self._gone = False  # the tracker's process ended: nothing waits for it any more
        if process:
            self.worker = None
            self._start_process(system, cpus)
            feed = self._feed
        else:
            self.worker = Worker(target, config, system, os.getpid(), self._answer_worker)
            feed = functools.partial(self.worker.run, self._get)
        self._thread = threading.Thread(target=feed, name="hwsweep-tracking", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, spec, run_dir, config: TrackingConfig, start_step: int = 0, gpu: int | str | None = None,
              system: bool = True, cpus=None) -> "Tracker | None":  # fmt: skip
        """The tracker of a run (`config`: its folder's, TrackingConfig.of_run), or None when it names no tracker.
        `cpus`: where its process runs (the CPUs the run's processes left spare); None: where the run does."""
        return cls(run_target(spec, run_dir, start_step, gpu), config, system, cpus) if config.on else None

    def _get(self, timeout: float | None):
        return self.queue.get(timeout=timeout)

    # -- the tracker's process ------------------------------------------------------------------------------
    def _start_process(self, system: bool, cpus) -> None:
        root = str(Path(__file__).resolve().parents[3])  # hwsweep's folder on the child's path, as on ours
        # Without the working folder on its path: a user's mlflow.py or wandb.py there is not the client.
        code = f"import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; {SERVE}"
        self._tmp = None
        try:
            # Its own temporary folder, removed once it ends: it ends with os._exit, so the clients' temporary
            # folders (W&B makes two at import) would otherwise stay behind in /tmp after every job.
            self._tmp = tempfile.mkdtemp(prefix="hwsweep-tracker-")
            env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
                                "TMPDIR": self._tmp}  # fmt: skip
            self._process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, env=env, text=True)  # fmt: skip
        except OSError as e:
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)
            self._process, self._gone = None, True
            self._end(f"the tracker's process did not start ({e})")
            return
        target = {k: str(v) if isinstance(v, Path) else v for k, v in self.target.__dict__.items()}
        start = {"target": target, "config": self.config.to_dict(), "system": system, "pid": os.getpid(),
                 "cpus": sorted(cpus) if cpus else None, "tmp": self._tmp}  # fmt: skip
        self._write([start])
        threading.Thread(target=self._read, name="hwsweep-tracking-answers", daemon=True).start()

    def _write(self, lines: list) -> bool:
        if self._process is None:
            return False
        try:
            self._process.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
            self._process.stdin.flush()
            return True
        except (OSError, ValueError):  # the tracker's process is gone: _read says so
            return False

    def _feed(self) -> None:
        """Queued items to the tracker's process, a batch of rows a write."""
        while True:
            items = take(self._get, None)
            self._write(items)
            if items[-1][0] == "stop":
                if self._process is not None:
                    with contextlib.suppress(OSError):
                        self._process.stdin.close()
                return

    def _read(self) -> None:
        """The tracker's process's answers; its end without a stop fails the backends that were still fine."""
        for line in self._process.stdout:
            answer = json.loads(line)
            self._stopped = self._stopped or answer["stopped"]
            self._answer(answer["done"], answer["backends"], answer["busy"])
        code = self._process.wait()
        shutil.rmtree(self._tmp, ignore_errors=True)  # it removes its own, unless it ended on its own
        self._gone = True
        if not self._stopped:
            self._end(f"the tracker's process ended with exit code {code}")
        for token in list(self._waiting):
            self._waiting.pop(token).set()

    def _end(self, why: str) -> None:
        """The tracker's process is gone before the stop: every backend still fine failed with it (one line)."""
        for name in self.config.backends:
            b = self.backends.get(name) or {"state": "ok", "why": None, "dropped": 0, "undelivered": 0}
            if b["state"] != "failed":
                self.backends[name] = b | {"state": "failed", "why": why}
        warn(f"tracking: {why}; the run goes on without the trackers")

    def _answer_worker(self, token, stopped: bool) -> None:
        self._answer(token, self.worker.status(), self.worker.busy_seconds)

    def _answer(self, token, backends: dict, busy: float) -> None:
        self.backends |= backends
        self.busy_seconds = busy
        event = self._waiting.pop(token, None)
        if event is not None:
            event.set()

    # -- the training thread's side: never waits ------------------------------------------------------
    def log(self, step: int, values: dict) -> None:
        """Curves at `step` (None values are left out). Dropped, and counted, when the queue is full."""
        row = {k: float(v) for k, v in values.items() if v is not None}
        if row:
            self._put(("log", (int(step), row)))

    def _put(self, item) -> bool:
        try:
            self.queue.put_nowait(item)
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def _wait(self, kind: str, timeout: float, failed: bool = False) -> bool:
        """Queue a mark (or the stop) and wait for the tracker to take everything before it, at most `timeout` s."""
        token, done = next(self._tokens), threading.Event()
        self._waiting[token] = done
        deadline = time.monotonic() + timeout
        if self._gone:  # checked after the token is in _waiting: _read sets _gone, then wakes every token
            return True
        try:
            self.queue.put((kind, (failed, token) if kind == "stop" else token), timeout=max(0.0, timeout))
        except queue.Full:
            return False
        return done.wait(max(0.0, deadline - time.monotonic()))

    def drain(self, timeout: float | None = None) -> dict:
        """Wait for what is queued to reach the trackers (each backend as long as it takes something within
        close_timeout, close_limit in all; `timeout`: the most this side waits for the answer); the status the
        record keeps (status())."""
        self._unanswered = None if self._wait("mark", self._timeout(timeout)) else self._late(self._timeout(timeout))
        return self.status()

    def status(self) -> dict:
        """The run's id, and per backend: state (ok: it took every row it was given; late: it still holds some;
        failed: it raised, was given up at the end, or its process ended), why (failed: the first line of why),
        the rows it lost to a full queue (dropped) and those it was given but never took (undelivered)."""
        backends = {}
        for name in self.config.backends:
            b = self.backends.get(name) or {"state": "late", "why": None, "dropped": 0, "undelivered": 0}
            if self._unanswered and b["state"] != "failed":
                b = b | {"state": "late", "why": self._unanswered}
            backends[name] = b | {"dropped": b["dropped"] + self.dropped}
        return {"id": self.target.run_id, "backends": backends}

    def final(self, step: int, values: dict) -> None:
        """A run's held-out evaluation (eval.json), at its last step: a scalar each in TensorBoard and MLflow,
        W&B's run summary."""
        self._put(("final", (int(step), {k: float(v) for k, v in values.items() if v is not None})))

    def close(self, artifacts=(), texts: dict | None = None, failed: bool = False, timeout: float | None = None) -> dict:
        """Hand over files (the record) and tables, close every tracked run, and wait as drain() does: a backend
        still holding rows then is given up (one warning line) and counted so."""
        for name, path in (texts or {}).items():
            self._put(("text", (name, str(path))))
        for path in artifacts:
            self._put(("artifact", str(path)))
        self._unanswered = None if self._wait("stop", self._timeout(timeout), failed) else self._late(self._timeout(timeout))
        return self.status()

    def _timeout(self, timeout: float | None) -> float:
        """The most this side waits for an answer: the clients' side answers within close_limit of the mark."""
        return self.config.close_limit + 30 if timeout is None else timeout

    def _late(self, timeout: float) -> str:
        """Why the clients' side did not answer (status() says it for each backend); one warning line per job."""
        if not self._warned_late:
            self._warned_late = True
            warn(f"tracking: the tracker's process did not answer within {timeout:g} s; the run goes on without waiting")
        return f"the tracker's process did not answer within {timeout:g} s"
