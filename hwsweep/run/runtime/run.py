"""Run, the object a training script drives, and init(), which makes it: the process set up by the plan (ranks,
threads and cores, device, process group, precision/TF32, reproducibility level, seed) and what the script builds
with it (the loader, the wrapped model, the optimizer, autocast, the resumed state, the FLOP count, evaluations).
The loop, the history, the trackers and the end are Run's other parts (hwsweep.run.runtime's modules)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from hwsweep.contracts import host
from hwsweep.contracts.guard import Guard
from hwsweep.contracts.spec import CHECKPOINT_DIR, METRICS_FILE, RunSpec
from hwsweep.contracts.target import curve_keys
from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run import lazy_dynamo, rank_memory, recompute, repro, stops, weights
from hwsweep.run import device as devices
from hwsweep.run.checkpoint import CheckpointManager, Sharded, fingerprint, layout_fingerprint
from hwsweep.run.reduce import prepare
from hwsweep.run.runtime.finish import Finish
from hwsweep.run.runtime.history import History
from hwsweep.run.runtime.loader import Loader
from hwsweep.run.runtime.loop import Loop
from hwsweep.run.runtime.throughput import Throughput
from hwsweep.run.runtime.trackers import Trackers
from hwsweep.run.startup import StartupClock

STOP_SIGNALS = stops.STOP_SIGNALS  # SIGTERM, SIGINT, SIGHUP, SIGUSR2 (SIGUSR1 is NCCL's)


def init(spec: str | os.PathLike | None = None, node_threads: int | None = None) -> "Run":
    """Read the RunSpec (a path, else $HWSWEEP_SPEC), start the process group and apply the plan:
    threads, device, precision/TF32, reproducibility level and the seed (same on every rank)."""
    stops.catch()  # a script that did not catch them before its imports (the built-in trainer does)
    stops.check("imports")  # each phase of start-up a stop signal may end, before the loop's checkpointed stop
    path = spec or os.environ.get("HWSWEEP_SPEC")
    if not path:
        sys.exit("hwsweep.runtime: no spec; run under hwsweep (it sets HWSWEEP_SPEC) or pass a spec.json path")
    clock = StartupClock()
    # Under hwsweep the run directory comes absolute (HWSWEEP_RUN_DIR): a command may run in any working folder.
    run = Run(RunSpec.load(path), node_threads, clock, None if spec else os.environ.get("HWSWEEP_RUN_DIR"))
    clock.mark("process_group")
    stops.check("process_group")
    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run(Loop, History, Throughput, Trackers, Finish):
    """One training process's run, as init() sets it up from the plan: what the script builds with it (loader, wrap,
    optimizer, autocast, resume), the loop (steps, accumulate, backward, optimizer_step, log) and the end (finish)."""

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
            stops.check("rendezvous")
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
        self.rank_memory = None  # every rank's {peak_gb, baseline_gb}: gathered by run.finish() on every rank
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
        self._signalled = stops.received  # only a flag (stops.catch): the loop decides on the all-reduced value
        # What this rank holds before the model is built (interpreter, torch, process group): the plan counts what
        # grows above it; taken again once the data is loaded (run.loader), which the plan does not count either.
        self._memory_baseline = rank_memory.held_bytes(self.device)

    # -- what the script builds -------------------------------------------------------
    def loader(self, dataset, **kwargs) -> "Loader":
        """This rank's micro-batches, step after step, moved to the device. Any map-style dataset;
        keyword arguments go to torch's DataLoader (collate_fn, pin_memory, ...), except the
        sampling and workers, which the plan fixes (workers: recipe.num_workers)."""
        stops.check("data")
        fixed = {"batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "drop_last", "generator"}
        if fixed & set(kwargs):
            raise TypeError(f"run.loader: {sorted(fixed & set(kwargs))[0]} is fixed by the plan "
                            "(num_workers: recipe.num_workers, the same on every hardware)")  # fmt: skip
        workers = self.recipe.num_workers
        loader = Loader(self, dataset, kwargs)
        self._data_order = {"sampler": "global-order", "dataset_size": len(dataset), "num_workers": workers,
                            "placement": loader.placement}  # fmt: skip
        self.clock.mark("data")
        self._memory_baseline = rank_memory.held_bytes(self.device)
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
        stops.check("model")
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
        stops.check("resume")
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
        """FLOPs of one optimizer step over all devices, counted by torch on one micro-batch (forward + backward of
        model.loss, see hwsweep.models.flops); call it before run.wrap(model). A model built on the meta device is
        counted there, on a meta copy of the batch: shapes only, no memory, so the count never raises the run's peak
        above its training step's (activation checkpointing included). A model whose control flow reads values (HRM's
        ACT) cannot run on meta: run.wrap counts it on real weights once they exist (every rank takes part under
        FSDP), with its checkpointing suspended. The count is of the model's own work: recomputed activations are
        not counted."""
        from hwsweep.models import flops  # only runs that count pay for the import

        self._flops_batch = None
        # On meta only where the count's memory could raise the run's peak (sharded weights, or activations that
        # checkpointing keeps small): counting there imports sympy (torch's Python references), 0.3-0.5 CPU-s of a
        # small run's start-up; elsewhere the count waits for run.wrap's weights.
        meta_matters = self.sharded or self.recipe.activation_checkpointing != "none"
        if weights.on_meta(model) and not meta_matters:
            self._flops_batch = batch
            return None
        if weights.on_meta(model):
            try:
                with recompute.suspended(), lazy_dynamo.eager():
                    per_micro_batch = flops.train_step_flops(model, tuple(t.to("meta") for t in batch))
            except (RuntimeError, NotImplementedError):  # values read (data-dependent control flow)
                self._flops_batch = batch
                return None
        else:
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


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The model as built, under torch.compile's and DDP's wrappers: what a checkpoint holds."""
    model = getattr(model, "_orig_mod", model)
    return getattr(model, "module", model)
