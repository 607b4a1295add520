"""One backend's delivery: its own thread and queue, so that a slow or failing backend never delays or drops
another's rows; what it was given, took, dropped or never took."""

from __future__ import annotations

import collections
import threading
import time

from hwsweep.contracts.tracking import rows_text
from hwsweep.run.tracking.failure import first_line, warn

ONE_EACH = ("text", "final", "artifact")  # the kinds of item counted one each (a log item counts its rows)


class Channel:
    """One backend on a thread of its own, with its own queue: it opens, takes what is queued for it in order,
    and closes, whatever the others do, so a slow or failing backend never delays or drops another's rows. Its
    rows wait here until it took them or failed (at most queue_size of them: past it new ones are dropped for
    it and counted). Its fields are read and written under the worker's `changed` condition."""

    def __init__(self, backend, worker: "Worker"):
        self.backend, self.name, self.worker = backend, backend.name, worker
        self.items: collections.deque = collections.deque()  # (seq, kind, payload)
        self.rows = 0  # log rows waiting in items
        self.pending = 0  # what it was given and has not taken yet: a row, an evaluation, a table, a file each
        self.dropped = 0  # rows its full queue dropped
        self.undelivered = 0  # what it was given and never took: it failed, or was given up at the end
        self.why: str | None = None  # failed: why (the first line)
        self.doing = "opening"  # what its client is at: opening, sending, closing, closed
        self.taken = 0  # the sequence number of the last item it took (or passed over, failed)
        self.progress = time.monotonic()  # when its client last returned
        self.busy = 0.0  # CPU seconds its client spent after opening (bench/)
        self.thread = threading.Thread(target=self._run, name=f"hwsweep-tracking-{self.name}", daemon=True)

    def put(self, seq: int, kind: str, payload) -> None:
        """Queue an item for this backend (the worker's `changed` held)."""
        size = len(payload) if kind == "log" else int(kind in ONE_EACH)
        if self.why is not None:
            self.undelivered += size
            return
        if kind == "log" and self.rows + size > self.worker.config.queue_size:
            keep = max(0, self.worker.config.queue_size - self.rows)
            self.dropped += size - keep
            payload, size = payload[:keep], keep
            if not payload:
                return
        self.rows += size if kind == "log" else 0
        self.pending += size
        self.items.append((seq, kind, payload))

    def status(self) -> dict:
        state = "failed" if self.why is not None else "late" if self.pending else "ok"
        return {"state": state, "why": self.why, "dropped": self.dropped, "undelivered": self.undelivered + self.pending}

    def fail(self, why: str) -> None:
        """Drop this backend (the worker's `changed` held): what it holds is undelivered; one warning line."""
        if self.why is None:
            self.why = why
            self.undelivered += self.pending
            self.pending = self.rows = 0
            self.items.clear()
            lost = f"; {rows_text(self.undelivered)} undelivered" if self.undelivered else ""
            warn(f"tracking: {self.name} failed ({why}){lost}; the run goes on without it")

    def _call(self, method: str, *args) -> None:
        if self.why is None:
            try:
                getattr(self.backend, method)(*args)
            except Exception as e:  # any failure of a tracker is the tracker's, never the run's
                with self.worker.changed:
                    self.fail(first_line(e))
        with self.worker.changed:
            self.progress = time.monotonic()
            self.worker.changed.notify_all()

    def _run(self) -> None:
        changed = self.worker.changed
        self._call("open", self.worker.target, self.worker.config)
        cpu = time.thread_time()
        while True:
            with changed:
                while not self.items:
                    changed.wait()
                batch = [self.items.popleft()]
                while batch[-1][1] == "log" and self.items and self.items[0][1] == "log":
                    batch.append(self.items.popleft())
                seq, kind, payload = batch[-1]
                size = sum(len(p) for _, k, p in batch if k == "log")
                self.rows -= size
                size += int(kind in ONE_EACH)
                self.doing = "closing" if kind == "close" else "sending"
            if kind == "log":
                self._call("log", [row for _, _, rows in batch for row in rows])
            elif kind == "close":
                self._call("close", payload)
            elif kind != "mark":
                self._call(kind, *payload)
            with changed:
                if self.why is None:  # failed meanwhile: fail() counted these undelivered
                    self.pending -= size
                self.taken, self.busy = seq, time.thread_time() - cpu
                self.doing = "closed" if kind == "close" else self.doing
                changed.notify_all()
            if kind == "close":
                return
