"""The runtime API: what a training script imports to train the way hwsweep's own trainer does.

    run = runtime.init()                            # the plan, from HWSWEEP_SPEC (or a spec.json path)
    loader = run.loader(dataset)                    # any map-style dataset: global batch k = same samples
    model = run.wrap(Net())                         # on run.device; DDP, strict reduction or FSDP; compiled
    optimizer = run.adamw(model.parameters())       # the recipe's AdamW and kernel (or any optimizer of yours)
    run.resume(model=model, optimizer=optimizer)    # newest checkpoint of this run, if any
    for step in run.steps():                        # from the resumed step; checkpoints, preemption
        for x, y in run.accumulate(loader):         # this step's micro-batches (no_sync but the last)
            with run.autocast():
                loss = F.cross_entropy(model(x), y)
            run.backward(loss)                      # scaled, reduced; the `loss` curve is its global mean
        run.optimizer_step(optimizer)
        run.log(val_acc=...)                        # any metric, at this step (metrics.jsonl, rank 0)
    run.finish()                                    # train.json (the RunRecord) and final.pt

Everything else is the plan's business: world size and rank, the micro-batch and accumulation,
precision and TF32, the reproducibility level, seeds, data-loader workers and their seeds,
checkpoint interval, SIGTERM/SIGUSR2 (checkpoint at a step all ranks agreed on, exit 75).
Host round trips are few: the loss stays on the device and is read, with the stop flag, in one
collective every `log_every` steps (and at checkpoints; a process alone makes no collective), and the
device is waited for at the end of the first step and where the steady window starts (steady_sync_step).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset, default_collate, get_worker_info
from tqdm import tqdm

from hwsweep.contracts import host, io
from hwsweep.contracts.catalog import device_peak
from hwsweep.contracts.guard import Guard
from hwsweep.contracts.metrics import observations, summarise
from hwsweep.contracts.records import RunRecord
from hwsweep.contracts.spec import CHECKPOINT_DIR, FINAL_CHECKPOINT, METRICS_FILE, TRAIN_RECORD, RunSpec
from hwsweep.contracts.target import curve_keys
from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run import data, lazy_dynamo, preempt, recompute, repro, shutdown, startup, tracking, weights
from hwsweep.run import device as devices
from hwsweep.run.checkpoint import CheckpointManager, Sharded, fingerprint, layout_fingerprint
from hwsweep.run.reduce import gather_in_order, ordered_sum, prepare
from hwsweep.run.startup import StartupClock, process_age

EXIT_PREEMPTED = preempt.EXIT_PREEMPTED  # the exit of a run stopped by a signal after its checkpoint
STEADY_STATE_SKIP = 0.1  # leave the first 10% of steps out of throughput (allocator, caches)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)  # SIGUSR1 is NCCL's
DEVICE_TABLE_FRACTION = 0.25  # a TensorDataset up to this share of a GPU's memory is kept on the GPU


def init(spec: str | os.PathLike | None = None, node_threads: int | None = None) -> "Run":
    """Read the RunSpec (a path, else $HWSWEEP_SPEC), start the process group and apply the plan:
    threads, device, precision/TF32, reproducibility level and the seed (same on every rank)."""
    path = spec or os.environ.get("HWSWEEP_SPEC")
    if not path:
        sys.exit("hwsweep.runtime: no spec; run under hwsweep (it sets HWSWEEP_SPEC) or pass a spec.json path")
    clock = StartupClock()
    # Under hwsweep the run directory comes absolute (HWSWEEP_RUN_DIR): a command may run in any working folder.
    run = Run(RunSpec.load(path), node_threads, clock, None if spec else os.environ.get("HWSWEEP_RUN_DIR"))
    clock.mark("process_group")
    return run


def steady_start(timed: int) -> int:
    """The index of the first step time of the steady window, of `timed` step times: the record's throughput."""
    return int(timed * STEADY_STATE_SKIP)


def steady_sync_step(timed_before: int, start: int, steps: int) -> int | None:
    """The step (1-based, as run.step) at whose end the device is waited for, so that the record's steady window
    (step_seconds after the first STEADY_STATE_SKIP of them) holds no device work queued by the steps it leaves
    out; None where none is needed. Step times are host times and the device is otherwise waited for only at the
    first step and at flushes: without this, the work a GPU still had queued from the left-out steps was charged
    to the steady steps (one step's time of a GPU-bound model in the H100 check of 2026-11-26: 1/11 of a 12-step
    run's throughput). `timed_before`: step times of earlier segments (a resumed run); the window is
    reckoned as if this segment runs to the plan's last step (a run that stops at a target starts it earlier)."""
    planned = timed_before + max(0, steps - start - 1)  # this segment's first step is startup, not timed
    skip = steady_start(planned)
    if skip <= timed_before:  # starts in an earlier segment, or at this segment's first timed step (the device
        return None  # was waited for at the end of the segment's first step)
    return start + 1 + skip - timed_before  # the step whose time is the window's last one left out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    def __init__(self, spec: RunSpec, node_threads: int | None, clock: StartupClock | None = None,
                 run_dir: str | None = None):
        self.clock = clock or StartupClock()  # this process's startup, in parts (hwsweep.run.startup)
        self.spec, self.recipe, self.plan, self.seed = spec, spec.recipe, spec.plan, spec.seed
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.master = self.rank == 0
        if self.world_size != self.plan.world_size:
            sys.exit(
                f"hwsweep: the plan needs {self.plan.world_size} processes but {self.world_size} were started; "
                f"launch with --nnodes {self.plan.nodes} --nproc_per_node {self.plan.devices_per_node}"
            )
        self.strict = self.recipe.reproducibility == "strict"
        self.sharded = self.recipe.parallel.sharded  # FSDP: every rank holds a shard; collectives on all ranks
        local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        # The train job passes the node's threads; a command gets OMP_NUM_THREADS per process from hwsweep.
        per_process = int(os.environ.get("OMP_NUM_THREADS", 1))
        if node_threads:
            per_process = max(1, node_threads // local_world_size)
        # Thread count changes reduction order inside kernels, so strict mode pins it.
        self.threads = 1 if self.strict else per_process
        # Read before pinning: cpus_allowed is what the run was given, not one rank's share.
        self._contention = host.contention() if self.master else None
        # Each rank's cores hold its threads and its data-loader workers (they inherit its affinity).
        cpus = self.threads + self.recipe.num_workers
        self._cpus_given = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None  # back at finish
        self.affinity = host.pin_cores(self.plan.accelerator, self.local_rank, local_world_size, cpus)
        torch.set_num_threads(self.threads)

        repro.prepare_environment(self.recipe.reproducibility)
        self._device = devices.select(self.plan.accelerator, self.local_rank)
        self.device = self._device.torch_device
        if not dist.is_initialized():
            if "MASTER_ADDR" in os.environ:
                dist.init_process_group(backend=self._device.backend)
            else:  # one process started plainly (trainer.launch auto): a group of one, on a free local port
                dist.init_process_group(backend=self._device.backend, init_method=f"tcp://127.0.0.1:{_free_port()}",
                                        rank=0, world_size=1)  # fmt: skip
        devices.lock_precision(self.plan.tf32)
        if not lazy_dynamo.needed(self.recipe, self.plan.world_size):
            lazy_dynamo.defer()  # not imported by every optimizer step and DDP's constructor for nothing
        repro.apply_level(self.recipe.reproducibility)
        repro.seed_everything(self.seed)  # same seed on every rank: identical initial weights

        self.run_dir = Path(run_dir or spec.run_dir)
        self.scaler = devices.grad_scaler(self._device, self.plan.precision)
        self.checkpoint = CheckpointManager(self.run_dir / CHECKPOINT_DIR, fingerprint(spec),
                                            layout=layout_fingerprint(spec) if self.sharded else None)
        self.checkpoint.register(scaler=self.scaler, run=self)
        self.flops_per_step = None
        self._spent = None  # this rank's FLOPs since the last flush (run.spend_flops); None: the script never says
        self._flops_batch = None  # a micro-batch to count the FLOPs on once a meta-built model has its weights
        self.optimizer_kernel = None  # the AdamW kernel run.adamw resolved; None: the script built its own
        self.peak_memory = None  # (GB, source) per device, max over ranks: read by run.finish() on every rank
        self.module = None  # the model as built (unwrapped): what checkpoints and evaluations see
        self.start = None
        self.step = None  # optimizer steps done once the current loop iteration ends
        self._reduction = None
        self._data_order = {"sampler": "script", "dataset_size": None, "num_workers": self.recipe.num_workers}
        self._micro_losses: list[torch.Tensor] = []
        self._pending: list[torch.Tensor] = []  # one row of micro-batch losses per step, not yet read
        self._logged: dict[int, dict] = {}  # step -> values logged by the script, not yet written
        self._final: dict = {}  # values without a step (run.finish(**metrics))
        self.tracker = None  # rank 0's feed to the trackers (config tracking), from run.steps() on
        self._to_track: dict[int, dict] = {}  # step -> values for the trackers, sent once per step (_send_tracked)
        self.tracking = TrackingConfig.of_run(self.run_dir)  # read by every rank: the step-time spread is collective
        self._lr = None  # the learning rate of the newest optimizer step, and its gradient norm before clipping
        self._grad_norm = None
        self._timed = 0  # step times already sent to the other ranks (tracking: the per-rank spread)
        self._spread = None  # the slowest rank's step time over the median rank's, since the last flush
        # What a resumed run carries on: every logged line, step times, one segment per start.
        # spent_flops: [steps flushed, FLOPs every rank spent in them together] once run.spend_flops was called.
        self.history = {"lines": [], "step_seconds": [], "segments": [], "checks": [], "spent_flops": None}
        self._flushed = 0  # the last step flushed
        self._guard = Guard(self.spec.guard)  # fed the all-reduced losses: every rank judges alike
        # schedule.stop_at: target: (target, the keys its metric's values are logged under, the metric's goal).
        by_name = {m.name: m for m in spec.metrics}
        self._targets = [(t, curve_keys(by_name[t.metric]), by_name[t.metric].goal) for t in spec.targets]
        self._hit: set[int] = set()  # the targets reached so far
        self._signalled: list[int] = []
        for sig in STOP_SIGNALS:  # only raise a flag: the decision is taken on the all-reduced value
            signal.signal(sig, lambda signum, frame: self._signalled.append(signum))

    # -- what the script builds -------------------------------------------------------
    def loader(self, dataset, **kwargs) -> "Loader":
        """This rank's micro-batches, step after step, moved to the device. Any map-style dataset;
        keyword arguments go to torch's DataLoader (collate_fn, pin_memory, ...), except the
        sampling and workers, which the plan fixes (workers: recipe.num_workers)."""
        fixed = {"batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "drop_last", "generator"}
        if fixed & set(kwargs):
            raise TypeError(f"run.loader: {sorted(fixed & set(kwargs))[0]} is fixed by the plan "
                            "(num_workers: recipe.num_workers, the same on every hardware)")  # fmt: skip
        workers = self.recipe.num_workers
        loader = Loader(self, dataset, kwargs)
        self._data_order = {"sampler": "global-order", "dataset_size": len(dataset), "num_workers": workers,
                            "placement": loader.placement}  # fmt: skip
        self.clock.mark("data")
        return loader

    def wrap(self, model: torch.nn.Module, init=None) -> torch.nn.Module:
        """Put `model` on the device and wrap it for the plan's gradient reduction (DDP, strict ordered reduction,
        or with recipe.parallel.strategy fsdp/hsdp FSDP2 sharding each block, then the embeddings and head, then
        the whole model, in place); with recipe.activation_checkpointing its blocks recompute their activations in
        the backward; with recipe.compile torch.compile the wrapped model (around DDP if any, so TorchDynamo
        splits the graph at DDP's buckets and no_sync still holds), or under FSDP each block before sharding it.

        A model built under torch.device("meta") (no memory yet) is sharded as it is, then each rank gives memory
        to its shards only and fills them: with `init(module)`, which fills the tensors a module holds itself, or
        else each module's reset_parameters(), one module at a time from the run's seed (hwsweep.run.weights), so
        the weights are the same at any world size, with or without FSDP. `init` given with a built model
        re-initialises it the same way. Call it before building the optimizer (under FSDP the parameters become
        shards); `run.module` stays the model as built."""
        self._reduction = prepare(model, self.recipe, self.plan, self._device, self.seed, init)
        self.module = model = self._reduction.module
        if self._flops_batch is not None:  # counted now that the weights exist (run.count_flops on a meta model)
            self.count_flops(model, self._flops_batch)
        compiled = self.recipe.compile and not self.sharded
        return torch.compile(self._reduction.model) if compiled else self._reduction.model

    def adamw(self, parameters) -> torch.optim.AdamW:
        """AdamW with the recipe's settings at the plan's lr, in the recipe's kernel resolved for this
        device (recipe.optimizer.kernel: auto is fused on CUDA, the for-loop elsewhere); recorded in provenance."""
        self.optimizer_kernel = self.recipe.optimizer.resolved_kernel(self.device.type)
        return devices.adamw(parameters, self.recipe.optimizer, self.plan.lr, self.device.type)

    def optimizer(self, parameters) -> torch.optim.Optimizer:
        """The recipe's optimizer (recipe.optimizer.name) at the plan's lr: AdamW as run.adamw, AdamATan2 (the
        original HRM's) or plain SGD (no state); the last two have one implementation each, recorded in provenance
        as the kernel by their name."""
        if self.recipe.optimizer.name == "adamw":
            return self.adamw(parameters)
        from hwsweep.run import optimizers

        self.optimizer_kernel = self.recipe.optimizer.name
        return optimizers.build(parameters, self.recipe.optimizer, self.plan.lr, self.device.type)

    def autocast(self):
        """The plan's precision for the forward pass (a no-op in fp32)."""
        return devices.autocast(self._device, self.plan.precision)

    def resume(self, **states) -> int:
        """Register what a checkpoint holds (model=, optimizer=, scheduler=, anything with a
        state_dict) and restore the newest checkpoint of this run. Returns the step resumed (0: fresh)."""
        states = {k: _unwrapped(v) if k == "model" else v for k, v in states.items()}
        if self.sharded and "model" in states:  # the model and its optimizers are saved in shards (DCP)
            # only optimizers of the model's parameters: the puzzle embedding's SignSGD steps a buffer, which the
            # model's state holds; its own state (lr, weight decay) is plain
            own = {id(p) for p in states["model"].parameters()}
            optimizers = {k: states.pop(k) for k in list(states) if isinstance(states[k], torch.optim.Optimizer)
                          and all(id(p) in own for g in states[k].param_groups for p in g["params"])}  # fmt: skip
            states["sharded"] = Sharded(states.pop("model"), optimizers)
        self.checkpoint.register(**states)
        self.start = self.checkpoint.load()
        if self.checkpoint.resharded_from is not None and self.master:
            print(f"hwsweep: resharded the checkpoint of step {self.start} from world size "
                  f"{self.checkpoint.resharded_from} to {self.world_size}", flush=True)  # fmt: skip
        if self.master and not self.start:  # a fresh start: an earlier attempt's lines are not this run's
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / METRICS_FILE).unlink(missing_ok=True)
        return self.start

    def count_flops(self, model: torch.nn.Module, batch) -> int | None:
        """FLOPs of one optimizer step over all devices, counted by torch on one real micro-batch
        (forward + backward of model.loss, see hwsweep.models.flops); call it before run.wrap(model). A model
        built on the meta device has no values to run yet: run.wrap counts it once it has (every rank takes
        part under FSDP). The count is of the model's own work: recomputed activations are not counted."""
        if weights.on_meta(model):
            self._flops_batch = batch
            return None
        from hwsweep.models import flops  # only runs that count pay for the import

        self._flops_batch = None
        with recompute.suspended(), lazy_dynamo.eager():
            per_micro_batch = flops.train_step_flops(model, batch)
        self.flops_per_step = per_micro_batch * self.plan.world_size * self.plan.accumulation
        return self.flops_per_step

    def spend_flops(self, flops: float) -> None:
        """The FLOPs this rank spent in the current step, for a model whose work varies from step to step (HRM's
        ACT halts samples early): from the next flush on, `flops_per_step` (the record's, behind TFLOP/s and MFU) is
        the mean over the steps run of every rank's sum, not count_flops's one step counted before training."""
        self._spent = (self._spent or 0.0) + float(flops)

    @property
    def evaluates(self) -> bool:
        """Whether this rank takes part in an evaluation during training: rank 0, or every rank of a sharded
        model (each forward gathers its blocks from all ranks); rank 0 logs the result."""
        return self.master or self.sharded

    def evaluate(self, fn, model: torch.nn.Module, *args, **kwargs):
        """fn(model, *args, **kwargs) in eval mode under no_grad, the training RNG streams untouched
        (on every rank where the model is sharded: see run.evaluates)."""
        was_training = model.training
        model.eval()
        cuda = [self.device] if self.device.type == "cuda" else []
        t0 = time.perf_counter()
        gathered = getattr(self._reduction, "gathered", contextlib.nullcontext)  # a sharded root: its weights whole
        with torch.no_grad(), torch.random.fork_rng(devices=cuda), gathered():
            out = fn(model, *args, **kwargs)
        model.train(was_training)
        # Periodic evaluation runs inside a step's timing: kept apart so time-to-target can exclude it (issue 23).
        self.history.setdefault("eval_seconds", []).append([self.step or 0, time.perf_counter() - t0])
        return out

    # -- the loop -----------------------------------------------------------------------
    def steps(self):
        """Optimizer step indices from the resumed step to the plan's last. Between two steps it
        reads the losses and the stop flag every log_every steps, checkpoints every
        checkpoint_every steps and at the end, and exits EXIT_PREEMPTED after a signal."""
        if self.start is None:
            self.resume()
        self.clock.mark("model")
        segment = {"start_step": self.start, "startup_seconds": process_age(), "startup_parts": self.clock.parts()}
        self._flushed = self.start
        if self.checkpoint.resharded_from is not None:  # a sharded checkpoint written at another world size
            segment["resharded_from_world_size"] = self.checkpoint.resharded_from
        self.history["segments"].append(segment)
        if self.master:
            self._start_tracking()
            print(self._banner(), flush=True)
        terminal = sys.stderr.isatty()
        self._bar = tqdm(total=self.plan.steps, initial=self.start, disable=not self.master, desc="train",
                         file=sys.stderr if terminal else LogLines(sys.stderr),
                         mininterval=1 if terminal else 10)  # fmt: skip
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
                if any(line.get(k) is not None and target.reached(_number(line[k]), goal) for k in keys)}  # fmt: skip

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

    def _throughput(self, seconds: list[float]) -> dict:
        """Per device over `seconds` (step times): samples/s, TFLOP/s and MFU (None where unknown)."""
        steps_per_second = len(seconds) / sum(seconds) if seconds and sum(seconds) > 0 else 0.0
        p = self.plan
        out = {"samples_per_second": p.global_batch * steps_per_second,
               "samples_per_second_per_device": p.global_batch * steps_per_second / p.world_size,
               "tflops_per_device": None, "mfu": None}  # fmt: skip
        if self.flops_per_step:
            achieved = self.flops_per_step * steps_per_second / p.world_size
            peak = device_peak(self.spec.hardware, p, self.threads)  # a CPU process: its threads' cores
            out |= {"tflops_per_device": achieved / 1e12, "mfu": achieved / peak if peak else None}
        return out

    def _write(self, losses: dict) -> list[dict]:
        """The losses and everything logged so far become lines of history and of metrics.jsonl."""
        lines = []
        for step in sorted(set(losses) | set(self._logged)):
            values = ({"loss": losses[step]} if step in losses else {}) | self._logged.pop(step, {})
            lines.append({"step": step} | {k: _number(v) for k, v in values.items()})
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

    # -- the trackers (rank 0) ------------------------------------------------------------------
    def _start_tracking(self) -> None:
        """Rank 0's tracker (config tracking), continuing the tracked run after a resume. The owner file tells
        the runner of a command that this script feeds the trackers itself."""
        gpu = devices.nvml_index(self.device) if self.device.type == "cuda" else None  # NVML's index, for GPU metrics
        spare = self.affinity.get("spare") or None  # pinned with CPUs to spare: the tracker's process there
        self.tracker = tracking.Tracker.start(self.spec, self.run_dir, self.tracking, self.start, gpu, cpus=spare)
        if self.tracker is not None:
            io.write_text(self.run_dir / tracking.OWNER_FILE, f"{os.getpid()}\n")

    def _track_step(self, done: int, recent: dict) -> None:
        """Throughput, learning rate, gradient norm, peak memory and the per-rank step-time spread at a log step
        (the device was just waited for by the loss read, so the norm's read costs no extra wait)."""
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            peak = host.peak_rss_bytes()
        norm = self._grad_norm.item() if isinstance(self._grad_norm, torch.Tensor) else self._grad_norm
        keys = ("samples_per_second_per_device", "tflops_per_device", "mfu")
        self._to_track.setdefault(done, {}).update({k: recent[k] for k in keys} | {
            "lr": self._lr, "grad_norm": norm, "peak_memory_gb": peak / 2**30, "rank_step_time_spread": self._spread})

    def _send_tracked(self) -> None:
        """One row per step to the trackers: a log step's loss and its throughput, lr and norm ride together."""
        for step in sorted(self._to_track):
            self.tracker.log(step, self._to_track[step])
        self._to_track = {}

    def _banner(self) -> str:
        s, p = self.spec, self.plan
        resumed = f"resumed from {self.checkpoint.last} (step {self.start})" if self.start else "fresh start"
        return "\n".join([
            "=" * 64,
            f"hwsweep {s.suite}/{s.variant} on {s.hardware_name}, seed {s.seed}",
            f"world size {self.world_size} = {p.nodes} node(s) x {p.devices_per_node} {self._device.name}",
            f"global batch {p.global_batch} = micro-batch {p.micro_batch} x {self.world_size} device(s) x "
            f"{p.accumulation} accumulation",
            f"strategy {self.recipe.parallel.strategy}, backend {self._device.backend}, precision {p.precision}, tf32 {p.tf32}, "
            f"reproducibility {self.recipe.reproducibility}, {self.threads} thread(s)/process",
            f"steps {p.steps} (warmup {p.warmup_steps}) = {p.epochs} epochs; {resumed}",
            "=" * 64,
        ])  # fmt: skip

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

    # -- the end ------------------------------------------------------------------------------
    def finish(self, **metrics) -> None:
        """Log the final metrics (no step), link final.pt to the last checkpoint and write
        train.json (rank 0, atomically). Fails, naming it, when a declared metric was never logged."""
        if self.start is None:
            raise RuntimeError("hwsweep.runtime: run.finish() before run.steps(); nothing was trained")
        refused = []  # rank 0's writes the file system refused (full, read-only): every rank fails with it below

        def write(what) -> None:
            try:
                what()
            except io.StorageError as e:
                refused.append(str(e))

        write(lambda: self._write({}))  # values logged after the last step
        self._judge(self._guard.finish())
        final = {k: _number(v) for k, v in (self._final | metrics).items()}
        self.peak_memory = self._peak_memory_gb()  # a collective: before rank 0 alone writes the record
        sharded = self.checkpoint.sharded
        if sharded is not None and self.checkpoint.last is not None:  # a collective: the model gathered whole
            write(lambda: self.checkpoint.consolidate(self.run_dir / FINAL_CHECKPOINT, self.plan.steps))
        if self.master and final and not refused:  # a line without a step: the run's value, not a point of a curve
            write(lambda: io.append_line(self.run_dir / METRICS_FILE, json.dumps(final)))
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, (f"{host.node_name()}:{self._device.name}", self.affinity["cpus"]))
        names = [name for name, _ in gathered]
        problem = [None]
        if self.master:
            if self.tracker is not None:
                if final:
                    self._to_track.setdefault(self.step or self.start, {}).update(final)
                self._send_tracked()
            status = self.tracker.drain() if self.tracker is not None else None
            try:
                if refused:
                    raise RuntimeError(refused[0])
                record = self._record(final, names, [cpus for _, cpus in gathered], status)
                if sharded is None:
                    self.checkpoint.link_final(self.run_dir / FINAL_CHECKPOINT)
                io.write_json(self.run_dir / TRAIN_RECORD, record.to_dict())
            except (RuntimeError, io.StorageError) as e:  # said once, by rank 0; every rank fails with it below
                problem = [str(e)]
                if self.tracker is not None:
                    self.tracker.close(failed=True)
            else:
                if self.tracker is not None:
                    tracking.close_recorded(self.tracker, self.run_dir / TRAIN_RECORD, status)
        dist.broadcast_object_list(problem, src=0)
        dist.barrier()
        shutdown.leave(self._reduction)  # its worker threads joined now, not at the interpreter's teardown
        if self.affinity["pinned"]:  # a process that goes on after the run (a notebook, a test) gets its CPUs back
            os.sched_setaffinity(0, self._cpus_given)
        if problem[0]:
            raise SystemExit(f"hwsweep: {problem[0]}")

    def _contention_seen(self, cpus_per_rank: list) -> dict:
        """What else ran on the node, at the start and now (the larger of each), and the CPUs of each rank."""
        now = host.contention()
        seen = self._contention | {k: max(v for v in (self._contention[k], now[k]) if v is not None)
                                   for k in ("other_runs", "load_1m") if now[k] is not None}  # fmt: skip
        pinned = {k: self.affinity[k] for k in ("pinned", "reason")}
        return seen | {"affinity": pinned | {"cpus_per_rank": cpus_per_rank}}

    def _record(self, final: dict, device_names: list[str], cpus_per_rank: list, tracked: dict | None = None) -> RunRecord:
        declared = self.spec.metrics_of("train")
        lines = self.history["lines"]
        found = [o for line in lines + [final] for o in observations(line, declared)]
        finals, _ = summarise(found, declared)
        missing = [m for m in declared if m.name not in finals]
        if missing:
            key = missing[0].json_key
            raise RuntimeError(f"metric {missing[0].name} is declared but was never logged; "
                               f"call run.log({key}=...) or run.finish({key}=...)")  # fmt: skip
        curves = {}
        for line in lines:
            for key, value in line.items():
                if key != "step":
                    curve = curves.setdefault(key, {})
                    curve[line["step"]] = value  # a step logged twice keeps the later value
        curves = {k: {"steps": sorted(c), "values": [c[s] for s in sorted(c)]} for k, c in curves.items()}
        segments = self.history["segments"]
        step_seconds = self.history["step_seconds"]
        steady = self._throughput(step_seconds[steady_start(len(step_seconds)) :])
        s = self.spec
        return RunRecord(
            status="complete", suite=s.suite, variant=s.variant, hardware=s.hardware_name, seed=s.seed,
            trainer=s.trainer.kind, spec=s.to_dict(), plan=self.plan.__dict__ | {"threads_per_process": self.threads},
            metrics=finals, curves=curves, train_seconds=sum(step_seconds),
            startup_seconds=sum(g["startup_seconds"] for g in segments), wall_seconds=process_age(),
            startup_parts=startup.total(segments),
            samples_per_second=steady["samples_per_second"],
            data_order=self._data_order, segments=segments, restarts=len(segments) - 1,
            resumed_from_step=segments[-1]["start_step"] or None,
            provenance=repro.provenance(device_names) | {"contention": self._contention_seen(cpus_per_rank),
                                                         "compile": self.recipe.compile,
                                                         "activation_checkpointing": self.recipe.activation_checkpointing,
                                                         "optimizer_kernel": self.optimizer_kernel},
            checkpoint=FINAL_CHECKPOINT, step_seconds=step_seconds, flops_per_step=self.flops_per_step,
            periodic_eval_seconds=self.history.get("eval_seconds", []), stopped_at_step=self.history.get("stopped_at"),
            samples_per_second_per_device=steady["samples_per_second_per_device"],
            tflops_per_device=steady["tflops_per_device"], mfu=steady["mfu"], checks=list(self.history["checks"]),
            seeded=True,  # init() seeded every rank from the run's seed
            planned_memory_gb=self.plan.est_memory_gb, peak_memory_gb=self.peak_memory[0],
            peak_memory_source=self.peak_memory[1], tracking=tracked,
        )  # fmt: skip

    def _peak_memory_gb(self) -> tuple[float, str]:
        """(peak GB, its source), the maximum over ranks: on CUDA what the allocator handed out (what the plan
        estimates, less the CUDA context); elsewhere the process's peak resident set, which holds the Python
        process and torch itself: not comparable to the plan's estimate."""
        if self.device.type == "cuda":
            peak, source = torch.cuda.max_memory_allocated(self.device), "cuda_max_memory_allocated"
        else:
            peak, source = host.peak_rss_bytes(), "host_rss"
        most = torch.tensor([float(peak)], device=self.device)
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        return most.item() / 2**30, source


class LogLines:
    """The progress bar's stream where stderr is a log, not a terminal: each redraw on a line of its own (tqdm
    redraws in place, with a carriage return). What passes output on by whole lines (srun in a SLURM job, then
    the run's log) shows progress as it comes, not when the run ends."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        if text.startswith("\r"):
            self.stream.write(text[1:].rstrip(" ") + "\n")
        elif text != "\n":  # tqdm's line end when it closes: the last redraw already ended its line
            self.stream.write(text)

    def __getattr__(self, name):  # flush, encoding: the stream's
        return getattr(self.stream, name)


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The model as built, under torch.compile's and DDP's wrappers: what a checkpoint holds."""
    model = getattr(model, "_orig_mod", model)
    return getattr(model, "module", model)


def _number(value):
    if isinstance(value, torch.Tensor):
        value = value.item()
    return None if value is None else float(value)


def table_budget_bytes(device: torch.device) -> float:
    """How many bytes of tables the loader keeps on `device`: DEVICE_TABLE_FRACTION of a GPU's memory
    (the rest is the model's, its activations' and the optimizer's); on a CPU the tables already are
    in host memory, so any size."""
    if device.type == "cuda":
        return DEVICE_TABLE_FRACTION * torch.cuda.get_device_properties(device).total_memory
    return math.inf


def table_placement(dataset, num_workers: int, budget_bytes: float) -> str:
    """"device": a TensorDataset without workers whose tables fit the budget is indexed on the device;
    "host": anything else goes through a DataLoader and each micro-batch is copied to the device."""
    if not isinstance(dataset, TensorDataset) or num_workers:
        return "host"
    return "device" if sum(t.nbytes for t in dataset.tensors) <= budget_bytes else "host"


class Loader:
    """Micro-batches of a map-style dataset in the plan's global order, from the resumed step on.

    Random draws inside the dataset (augmentations) use RNGs seeded per (seed, step, micro-batch
    place in the global batch), so they are the same at any world size and any num_workers, and
    after a resume. A TensorDataset is indexed as a whole micro-batch (it draws nothing); when it fits
    (table_placement) its tables are copied to the device once and indexed there, without a DataLoader:
    the same micro-batches, bitwise, with no copy per micro-batch."""

    def __init__(self, run: Run, dataset, kwargs: dict, budget_bytes: float | None = None):
        self.run, self.dataset = run, dataset
        self._seeded = _Seeded(dataset, run.seed, kwargs.pop("collate_fn", default_collate))
        self.kwargs = kwargs
        self._it = None
        budget = table_budget_bytes(run.device) if budget_bytes is None else budget_bytes
        self.placement = table_placement(dataset, run.recipe.num_workers, budget)
        self._tables = tuple(t.to(run.device) for t in dataset.tensors) if self.placement == "device" else None

    def _sampler(self) -> data.GlobalBatchSampler:
        run = self.run
        on = run.device if self._tables is not None else None
        order = data.GlobalOrder(len(self.dataset), run.plan.global_batch, run.seed, device=on)
        return data.GlobalBatchSampler(order, run.rank, run.world_size, run.plan.micro_batch, run.start or 0,
                                       run.plan.steps)  # fmt: skip

    def peek(self):
        """The next micro-batch, without taking it (e.g. to count FLOPs on a real one)."""
        key = next(iter(self._sampler()))
        if self._tables is not None:
            return tuple(t[key[2]] for t in self._tables)
        return _to(self._seeded.__getitems__(key), self.run.device)

    def next(self):
        if self._tables is not None:
            if self._it is None:
                self._it = iter(self._sampler())
            _, _, indices = next(self._it)
            return tuple(t[indices] for t in self._tables)
        if self._it is None:
            loader = DataLoader(
                self._seeded, batch_sampler=self._sampler(), collate_fn=_identity,
                num_workers=self.run.recipe.num_workers, generator=torch.Generator().manual_seed(self.run.seed),
                **self.kwargs,
            )  # fmt: skip
            self._it = iter(loader)
        return _to(next(self._it), self.run.device)


class _Seeded(torch.utils.data.Dataset):
    def __init__(self, dataset, seed: int, collate):
        self.dataset, self.seed, self.collate = dataset, seed, collate

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, key):
        step, j, indices = key
        if isinstance(self.dataset, TensorDataset):
            return tuple(t[indices] for t in self.dataset.tensors)
        seed = int.from_bytes(hashlib.blake2b(f"{self.seed}/{step}/{j}".encode(), digest_size=8).digest(), "little")
        # A worker's RNGs are its own; in the training process the training streams are put back.
        saved = repro.rng_state() if get_worker_info() is None else None
        repro.seed_everything(seed >> 1)
        try:
            return self.collate([self.dataset[int(i)] for i in indices])
        finally:
            if saved is not None:
                repro.set_rng_state(saved)


def _identity(batch):
    return batch


def _to(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch
