"""Run's history: the one collective between steps (every rank's micro-batch losses, stop flag, targets reached
and FLOPs spent), the divergence guard's verdicts, the lines written to metrics.jsonl, and the history a
checkpoint carries (run.state_dict) so that a resumed run goes on as if never interrupted."""

from __future__ import annotations

import json
import math
import statistics

import torch

from hwsweep.contracts import io
from hwsweep.contracts.spec import METRICS_FILE
from hwsweep.run.reduce import gather_in_order, ordered_sum


class History:
    """The part of Run (hwsweep.run.runtime.run) that reads and keeps what the steps leave; its state is set up in
    Run.__init__."""

    def _flush(self, done: int) -> tuple[bool, bool]:
        """One collective for the steps since the last flush: every rank's micro-batch losses
        (the step loss is their sum in global order, so it is the same at any world size), every
        rank's stop flag and which targets its values logged since the last flush reached (schedule.stop_at:
        target; the evaluation may run on one rank, the losses are known to all after it), so every rank holds
        the same targets reached and all stop at the same step. Each rank's FLOPs spent since the last flush
        (run.spend_flops) and, with tracking on, its step seconds (the step-time spread) ride along first.
        Returns (stop, every target reached)."""
        mine = self._hits(self._logged.values())
        flags = [float(bool(self._signalled))] + [float(i in mine) for i in range(len(self._targets))]
        flags.append(float(self._spent is not None))
        timed = self.tracking.on  # the same on every rank
        per_rank = [self._spent or 0.0]
        if timed:
            per_rank.append(sum(self.history["step_seconds"][self._timed :]))
            self._timed = len(self.history["step_seconds"])
        tail = torch.tensor(per_rank + flags, device=self.device)
        local = torch.stack(self._pending).flatten() if self._pending else tail.new_empty(0)
        everything = gather_in_order(torch.cat([local, tail])).view(self.world_size, -1)
        seen = everything[:, -len(flags) :].amax(dim=0).tolist()
        stop = seen[0] > 0
        self._hit |= {i for i, hit in enumerate(seen[1:-1]) if hit > 0}
        if seen[-1] > 0:  # the script spends FLOPs step by step: the record's figure is their mean
            steps, spent = self.history["spent_flops"] or (0, 0.0)
            spent += float(everything[:, -len(tail)].double().sum())
            self.history["spent_flops"] = [steps + done - self._flushed, spent]
            self._spent = 0.0 if self._spent is not None else None
            self._use_spent()
        self._flushed = done
        if timed and self.world_size > 1:
            seconds = everything[:, -len(tail) + 1].tolist()
            median = statistics.median(seconds)
            self._spread = max(seconds) / median if median > 0 else None
        losses = {}
        if self._pending:
            n = len(self._pending)
            rows = everything[:, : -len(tail)].reshape(self.world_size, n, -1).transpose(0, 1).reshape(n, -1)
            means = (ordered_sum(rows.T) / rows.shape[1]).tolist()
            losses = dict(zip(range(done - n + 1, done + 1), means))
        self._pending = []
        for step, value in losses.items():
            self._judge(self._guard.feed(step, value), fatal=not math.isfinite(value))
        self._hit |= self._hits({"loss": value} for value in losses.values())  # the same on every rank
        self._write(losses)
        return stop, bool(self._targets) and len(self._hit) == len(self._targets)

    def _use_spent(self) -> None:
        """flops_per_step from the FLOPs spent so far (run.spend_flops), where the script said any."""
        spent = self.history.get("spent_flops")
        if spent and spent[0] > 0:
            self.flops_per_step = spent[1] / spent[0]

    def _hits(self, lines) -> set[int]:
        """The targets (their indices) that a value in `lines` (dicts of logged values) reached."""
        return {i for line in lines for i, (target, keys, goal) in enumerate(self._targets)
                if any(line.get(k) is not None and target.reached(number(line[k]), goal) for k in keys)}  # fmt: skip

    def _judge(self, verdict: str | None, fatal: bool = False) -> None:
        """The divergence guard's verdict: a non-finite loss always fails; otherwise guard.action decides
        (fail: no record; flag: the line goes into the record's checks; off: nothing)."""
        if verdict is None:
            return
        if fatal or self.spec.guard.action == "fail":
            raise FloatingPointError(verdict)
        if self.spec.guard.action == "flag":
            self.history["checks"].append(f"divergence: {verdict}")
            if self.master:
                print(f"hwsweep: flagged: {verdict}", flush=True)

    def _write(self, losses: dict) -> list[dict]:
        """The losses and everything logged so far become lines of history and of metrics.jsonl."""
        lines = []
        for step in sorted(set(losses) | set(self._logged)):
            values = ({"loss": losses[step]} if step in losses else {}) | self._logged.pop(step, {})
            lines.append({"step": step} | {k: number(v) for k, v in values.items()})
        self.history["lines"] += lines
        if self.master and lines:
            io.append_line(self.run_dir / METRICS_FILE, "\n".join(json.dumps(line) for line in lines))
            if self.tracker is not None:
                # The trackers get the loss of the flushed step only (every log_every steps, as the log does):
                # a tracker's cost is per row sent (W&B's most, docs/benchmarks.md); the record keeps every step.
                flushed = max(losses, default=None)
                for line in lines:
                    values = {k: v for k, v in line.items() if k != "step" and (k != "loss" or line["step"] == flushed)}
                    if values:
                        self._to_track.setdefault(line["step"], {}).update(values)
        return lines

    # -- checkpointed state of the run itself ---------------------------------------------
    def state_dict(self) -> dict:
        return {"history": self.history}

    def load_state_dict(self, state: dict) -> None:
        self.history = state["history"] | {k: state["history"].get(k, empty) for k, empty in
                                           (("checks", []), ("spent_flops", None))}  # fmt: skip
        self._use_spent()
        for line in self.history["lines"]:  # the guard sees the whole series, as if never interrupted
            if "loss" in line:
                self._guard.feed(line["step"], line["loss"])
        self._hit = self._hits(self.history["lines"])


def number(value):
    """A logged value as written: a float (a 0-d tensor read from the device), or None."""
    if isinstance(value, torch.Tensor):
        value = value.item()
    return None if value is None else float(value)
