"""The clients' side: the backends by name, and the worker that feeds each its Channel, samples system metrics, and
answers a mark or the stop once every backend took what came before it (or was given up)."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.channel import Channel
from hwsweep.run.tracking.mlflow_backend import Mlflow
from hwsweep.run.tracking.system import System
from hwsweep.run.tracking.target import Target
from hwsweep.run.tracking.tensorboard_backend import TensorBoard
from hwsweep.run.tracking.wandb_backend import Wandb

BATCH = 1000  # queued items a backend takes in one call

BACKENDS = {b.name: b for b in (TensorBoard, Mlflow, Wandb)}


def take(get, timeout: float | None) -> list:
    """What is queued, in order: the first item (waited for at most `timeout` s; None: until one comes; none
    in time: []), then the rows right behind it, up to BATCH, so that they go in one call (or one write)."""
    try:
        items = [get(timeout)]
    except queue.Empty:
        return []
    while items[-1][0] == "log" and len(items) < BATCH:
        try:
            items.append(get(0))
        except queue.Empty:
            break
    return items



class Worker:
    """Owns every client: a Channel (thread and queue) per backend, fed in order with rows, evaluations, tables
    and files, and system metrics sampled every system_every seconds from its start and once at the end. Items
    are JSON-able (kind, payload) pairs: they cross a pipe to the tracker's process. A mark (drain) or the stop
    is answered once every backend took what came before it, failed, or took nothing for close_timeout seconds,
    and at most close_limit seconds after it came; at the stop, a backend still holding rows is given up (one
    warning line; the status counts them undelivered)."""

    def __init__(self, target: Target, config: TrackingConfig, system: bool, pid: int, done):
        self.target, self.config = target, config
        self.changed = threading.Condition()
        self.channels = [Channel(BACKENDS[name](), self) for name in config.backends]
        # The newest step logged: system samples are put at it. After a resume, at the first step this attempt
        # owns: TensorBoard would read a lower one as a restart and drop the curves after it.
        self.step = target.start_step + 1 if target.start_step else 0
        self.seq = 0  # items given to the channels, numbered in order
        self._short: dict = {}  # the backends the last wait ended short of: since when they took nothing
        self._system, self._pid = system, pid
        self._done = done  # done(token, stopped): a mark or the stop was reached

    @property
    def busy_seconds(self) -> float:
        return sum(c.busy for c in self.channels)

    def status(self) -> dict:
        with self.changed:
            return {c.name: c.status() for c in self.channels}

    def _put(self, kind: str, payload=None) -> int:
        with self.changed:
            self.seq += 1
            for channel in self.channels:
                channel.put(self.seq, kind, payload)
            self.changed.notify_all()
            return self.seq

    def _wait(self, seq: int) -> list:
        """Wait while a backend that has not taken item `seq` yet still takes something within close_timeout,
        at most close_limit in all; the backends still short of it (too slow or stuck), with why. A backend short
        at the last wait too (the close after the record's drain) is timed from that one: a stuck backend costs
        the job close_timeout once, not per wait."""
        start, c = time.monotonic(), self.config
        with self.changed:
            while True:
                now = time.monotonic()
                short = [ch for ch in self.channels if ch.why is None and ch.taken < seq]
                since = {ch: max(ch.progress, self._short.get(ch, start)) for ch in short}
                moving = [ch for ch in short if now - since[ch] < c.close_timeout]
                if not moving or now - start >= c.close_limit:
                    self._short = since
                    if now - start >= c.close_limit:
                        return [(ch, f"still {ch.doing} after {c.close_limit:g} s (tracking.close_limit)") for ch in short]
                    return [(ch, f"took nothing for {c.close_timeout:g} s (tracking.close_timeout) while {ch.doing}")
                            for ch in short]  # fmt: skip
                wake = min([since[ch] + c.close_timeout for ch in moving] + [start + c.close_limit])
                self.changed.wait(max(0.01, wake - now))

    def _sample(self, system: "System", least: float = 0.0) -> None:
        values = system.sample(least)
        if values:
            self._put("log", [(self.step, values)])

    def run(self, get) -> None:
        """Take items from get(timeout) (which raises queue.Empty) until the stop, or the run's end ("eof": the
        run's process is gone without a stop; its tracked runs are closed as failed)."""
        for channel in self.channels:
            channel.thread.start()  # each opens now, on its own: sampling and rows do not wait for any open
        system = System(self.target.gpu, self._pid) if self._system else None
        # The first sample a second in (a CPU share needs an interval), whatever system_every: a run's start-up
        # and first steps are seen, as a short run's are.
        next_sample = time.monotonic() + min(1.0, self.config.system_every)
        while True:
            items = take(get, max(0.0, next_sample - time.monotonic()) if system else None)
            if system and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + self.config.system_every
                self._sample(system)
            rows = [tuple(payload) for kind, payload in items if kind == "log"]
            if rows:
                self.step = max(self.step, max(step for step, _ in rows))
                self._put("log", rows)
            for kind, payload in items:
                if kind == "text":
                    self._put("text", (payload[0], Path(payload[1])))
                elif kind == "final":
                    self._put("final", tuple(payload))
                elif kind == "artifact":
                    self._put("artifact", (Path(payload),))
                elif kind == "mark":
                    self._wait(self._put("mark"))
                    self._done(payload, False)
                elif kind in ("stop", "eof"):
                    failed, token = payload if kind == "stop" else (True, None)
                    if system:  # the run's last moments, whatever the interval (a fifth of a second at least)
                        self._sample(system, least=0.2)
                    late = self._wait(self._put("close", failed))
                    with self.changed:
                        for channel, why in late:
                            channel.fail(why)
                    self._done(token, True)
                    return
