"""Run's loop: run.steps() and what a step calls (accumulate, backward, optimizer_step, log), and what happens
between two steps (the flush, the checkpoint, the stop at a signal or at every target reached)."""

from __future__ import annotations

import signal
import time

import torch

from hwsweep.contracts import io
from hwsweep.run import preempt, shutdown, stops
from hwsweep.run.runtime import progress
from hwsweep.run.runtime.loader import Loader
from hwsweep.run.runtime.throughput import steady_sync_step
from hwsweep.run.startup import process_age

EXIT_PREEMPTED = preempt.EXIT_PREEMPTED  # the exit of a run stopped by a signal after its checkpoint


class Loop:
    """The part of Run (hwsweep.run.runtime.run) the training loop calls; its state is set up in Run.__init__."""

    def steps(self):
        """Optimizer step indices from the resumed step to the plan's last. Between two steps it
        reads the losses and the stop flag every log_every steps, checkpoints every
        checkpoint_every steps and at the end, and exits EXIT_PREEMPTED after a signal."""
        if self.start is None:
            self.resume()
        stops.check("loop")  # the last phase of start-up: from the first step on, a stop checkpoints first
        self.clock.mark("model")
        segment = {"start_step": self.start, "startup_seconds": process_age(), "startup_parts": self.clock.parts()}
        self._flushed = self.start
        if self.checkpoint.resharded_from is not None:  # a sharded checkpoint written at another world size
            segment["resharded_from_world_size"] = self.checkpoint.resharded_from
        self.history["segments"].append(segment)
        if self.master:
            self._start_tracking()
            print(progress.banner(self), flush=True)
        self._bar = progress.bar(self.plan.steps, self.start, shown=self.master)
        steady_sync = steady_sync_step(len(self.history["step_seconds"]), self.start, self.plan.steps)
        for step in range(self.start, self.plan.steps):
            if "stopped_at" in self.history:  # every target reached (also when resumed after that checkpoint)
                break
            self.step = step + 1
            t0 = time.perf_counter()
            yield step
            if step == self.start:  # the first step is startup (lazy initialisation), not training
                self._device.synchronize()
                self.clock.mark("first_step")
                segment |= {"startup_seconds": process_age(), "startup_parts": self.clock.parts()}
                t0 = None
            elif self.step == steady_sync:  # the steady window starts with the device idle (steady_sync_step)
                self._device.synchronize()
            try:
                self._end_step(self.step, t0)
            except io.StorageError as e:  # a checkpoint or log line the file system refused: one line, not torch's
                if self.tracker is not None:
                    self.tracker.close(failed=True)
                self._bar.close()  # the progress bar's line ends first: the reason is a line of its own in the log
                raise SystemExit(f"hwsweep: {e}") from None
        self._bar.close()

    def accumulate(self, loader: "Loader"):
        """This step's micro-batches on this rank; the gradient is synchronised after the last one."""
        n = self.plan.accumulation
        for i in range(n):
            with self._reduction.micro_step(last=i == n - 1):
                yield loader.next()
        self._reduction.finish()
        if self._micro_losses:
            self._pending.append(torch.stack(self._micro_losses))
            self._micro_losses = []

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of one micro-batch's mean loss, scaled for accumulation (and fp16)."""
        if self._reduction is None:
            raise RuntimeError("hwsweep.runtime: call run.wrap(model) before run.backward(loss)")
        self._reduction.backward(loss, self.scaler)
        self._micro_losses.append(loss.detach().float())

    def optimizer_step(self, optimizer, scheduler=None, grad_clip: float = 0.0) -> None:
        """Clip (grad_clip > 0), step, zero the gradients, step the scheduler."""
        if self.tracker is not None:
            self._lr = optimizer.param_groups[0]["lr"]  # a float the scheduler set: no device read
        if grad_clip > 0:
            self.scaler.unscale_(optimizer)
            # The total norm of the reduced gradients before clipping; read at the next log step (tracking).
            self._grad_norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), grad_clip)
        self.scaler.step(optimizer)
        self.scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if scheduler is not None:
            scheduler.step()

    def log(self, **values) -> None:
        """Record metrics at this step (numbers, 0-d tensors, or None for "does not exist"). Rank 0's
        values are written; they are read from the device when the losses are."""
        if self.step is None:  # nothing trained in this process (resumed at the end): a final value
            self._final.update(values)
        else:
            self._logged.setdefault(self.step, {}).update(values)

    # -- between steps ---------------------------------------------------------------------
    def _end_step(self, done: int, t0: float | None) -> None:
        logged = done % self.recipe.log_every == 0
        flush = logged or done % self.recipe.checkpoint_every == 0 or done == self.plan.steps
        stop, reached = self._flush(done) if flush else (False, False)
        if reached and done < self.plan.steps:  # before the checkpoint: a rerun after a kill stops here too
            self.history["stopped_at"] = done
            if self.master:
                print(f"hwsweep: every target reached; stopping at step {done} (schedule.stop_at: target)", flush=True)
        if t0 is not None:  # None: the segment's first step, counted in its startup
            self.history["step_seconds"].append(time.perf_counter() - t0)  # the device is waited for at flushes only
        self._bar.update(1)
        if self.master and logged:
            recent = self._throughput(self.history["step_seconds"][-self.recipe.log_every :])
            loss = next((line["loss"] for line in reversed(self.history["lines"]) if "loss" in line), None)
            shown = {"loss": loss, "samples/s/device": recent["samples_per_second_per_device"], "mfu": recent["mfu"]}
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in shown.items() if v is not None}, refresh=False)
            if self.tracker is not None:
                self._track_step(done, recent)
        if self.tracker is not None:
            self._send_tracked()
        if done % self.recipe.checkpoint_every == 0 or done == self.plan.steps or stop or reached:
            self.checkpoint.save(done)
        if stop and done < self.plan.steps and not reached:
            if self.master:
                received = ", ".join(signal.Signals(s).name for s in self._signalled) or "none here: another rank's"
                print(f"hwsweep: stop requested; checkpoint at step {done}, exiting {EXIT_PREEMPTED} (signals "
                      f"received: {received})", flush=True)  # fmt: skip
                if self.tracker is not None:  # the resumed run continues the same tracked run; the scheduler's
                    self.tracker.close(timeout=self.tracking.close_timeout)  # notice is for the checkpoint
            shutdown.leave(self._reduction)
            raise SystemExit(preempt.stopped_exit(done))  # 75, or 0 and a note for hwsweep's launcher
