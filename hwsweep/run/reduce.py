"""Gradient reduction: standard DDP, strict ordered reduction, or FSDP2's sharded reduce-scatter.

All present the same small interface to the trainer (`model`, `micro_step`, `backward`,
`finish`), so strict parity is a separate reduction path, not a fork of the training loop.

Strict: every micro-batch's gradient is kept separately, all of them are gathered, and they
are summed in global micro-batch order (j = rank * accumulation + k) on every rank. The sum
then has the same floating-point order at any world size, so world sizes 1, 2 and 4 at the
same micro-batch train bitwise alike. It costs memory (accumulation x parameters per rank)
and an all-gather instead of an all-reduce: fine for the models this is meant to audit.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - imported before any process group exists: see StandardReduction.release
from torch.nn.parallel import DistributedDataParallel

from hwsweep.run import recompute, weights
from hwsweep.run.device import AUTOCAST_DTYPE


def ordered_sum(parts: torch.Tensor) -> torch.Tensor:
    """Sum along dim 0 strictly left to right, so the rounding does not depend on how the
    rows were produced or how many processes held them."""
    total = parts[0].clone()
    for row in parts[1:]:
        total += row
    return total


def gather_in_order(local: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's rows in rank order: (world_size * rows, ...). A process alone has them all: no
    collective (on NCCL a run's first one creates the communicator, which would land in a timed step)."""
    if dist.get_world_size() == 1:
        return local
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local.contiguous())
    return torch.cat(parts)


def global_mean(local_values: list[torch.Tensor]) -> float:
    """Mean of one scalar per micro-batch over the whole global batch, in global order."""
    everything = gather_in_order(torch.stack([v.float() for v in local_values]))
    return (ordered_sum(everything) / len(everything)).item()


class StandardReduction:
    """torch DDP: bucketed all-reduce overlapped with the final micro-step's backward. The gradients are views
    of DDP's buckets, not a second copy of them, so a replica holds one set of gradients as the memory plan
    counts. A single process has nothing to reduce: the model goes unwrapped, which skips DDP's buckets and its
    all-reduce of one rank (dividing by one and summing one rank change no bit, so the gradients are the same)."""

    def __init__(self, model: torch.nn.Module, accumulation: int, device_ids):
        self.module = model
        alone = dist.get_world_size() == 1
        self.model = model if alone else DistributedDataParallel(model, device_ids=device_ids, gradient_as_bucket_view=True)
        self.accumulation = accumulation

    def micro_step(self, last: bool):
        # Skip the all-reduce on every micro-step but the last: gradients accumulate locally.
        return contextlib.nullcontext() if last or self.model is self.module else self.model.no_sync()

    def backward(self, loss: torch.Tensor, scaler) -> None:
        scaler.scale(loss / self.accumulation).backward()

    def finish(self) -> None:
        pass

    def release(self) -> None:
        """At the run's end, before the process group is destroyed: DDP lets go of the group, so that destroying
        it joins its worker threads (hwsweep.run.shutdown). DDP holds it in its reducer, its logger and an
        attribute (what its own pickling leaves out); torch.distributed.nn's functions would hold it in their
        default arguments had they been imported after the group was made (DDP imports them), hence the import
        at the top of this module. The wrapper then computes as the model it wraps: nothing is left to reduce."""
        if self.model is not self.module:
            for holder in ("reducer", "logger", "process_group"):
                vars(self.model).pop(holder, None)
            self.model.forward = self.module.forward


class StrictReduction:
    def __init__(self, model: torch.nn.Module, accumulation: int):
        self.module = self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        for p in model.parameters():  # start from rank 0's weights, as DDP would
            dist.broadcast(p.data, src=0)
        self.local: list[torch.Tensor] = []

    def micro_step(self, last: bool):
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, scaler) -> None:
        scaler.scale(loss).backward()
        self.local.append(torch.cat([p.grad.reshape(-1) for p in self.params]))
        for p in self.params:
            p.grad = None

    def finish(self) -> None:
        everything = gather_in_order(torch.stack(self.local))
        flat = ordered_sum(everything) / len(everything)
        self.local.clear()
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def release(self) -> None:
        pass  # the default group only, through torch.distributed's functions


def block_units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's blocks: every element of every ModuleList (the built-in families' blocks, and the layers of
    most models), outermost first and not looked into further. What activation checkpointing wraps, compile
    compiles one by one under FSDP, and FSDP shards first."""
    units = []
    for child in model.children():
        units += list(child) if isinstance(child, torch.nn.ModuleList) else block_units(child)
    return units


def shard_units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules FSDP shards one by one, in the order they are sharded: the blocks, then every other child of
    the root that holds parameters outside them (the embeddings, the output head, a final norm), so that a large
    vocabulary's embedding and head are gathered only while they run. The root holds the rest: its own
    parameters (e.g. learned positions), gathered for the whole step."""
    blocks = block_units(model)
    inside = {id(p) for b in blocks for p in b.parameters()}
    rest = [c for c in model.children() if not isinstance(c, torch.nn.ModuleList)
            and any(id(p) not in inside for p in c.parameters())]  # fmt: skip
    return blocks + rest


def any_rank(flag: bool, device: torch.device) -> bool:
    """Whether `flag` is set on any rank (a collective: every rank calls it)."""
    t = torch.tensor([float(flag)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


class ShardedReduction:
    """FSDP2 (torch.distributed.fsdp.fully_shard): each unit (shard_units: the blocks, then the embeddings and
    head), then the root, keeps 1/N of its parameters, gradients and optimizer state per rank; a unit's weights
    are all-gathered just before it runs and its gradients reduce-scattered right after its backward. Every
    micro-batch's gradient is reduce-scattered (no no_sync): the gradients stay sharded, which is what a model
    too big for one device needs. The root keeps its own weights gathered from forward to backward (needed at
    once there, as torchtitan does).

    HSDP (`mesh_shape` (nodes, devices per node)): the same within a node, the shards replicated over the nodes,
    whose gradients are all-reduced. With `compile` each block is compiled before it is sharded (the
    collectives stay outside the compiled code, as torchtitan does). A model built on the meta device is
    sharded as it is and given memory and values afterwards (run.wrap, hwsweep.run.weights)."""

    def __init__(self, model: torch.nn.Module, accumulation: int, precision: str, reshard_after_forward: bool,
                 device: torch.device, mesh_shape: tuple[int, int] | None = None, compile: bool = False):  # fmt: skip
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        dtype = AUTOCAST_DTYPE[precision]  # the weights are gathered in autocast's type; gradients reduced in fp32
        policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None)
        # The run's device, not the model's: a model built on the meta device is sharded before it has memory.
        shape = mesh_shape or (dist.get_world_size(),)
        names = ("replicate", "shard") if mesh_shape else ("shard",)
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=names)
        if compile:
            for block in block_units(model):
                block.compile()  # in place: the block's names (and the checkpoints' keys) stay as they are
        for unit in shard_units(model):
            fully_shard(unit, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
        fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
        if hasattr(model, "lockstep"):  # a model whose number of block calls differs per rank (HRM's ACT)
            model.lockstep = functools.partial(any_rank, device=device)
        self.module = self.model = model
        self.accumulation = accumulation

    def micro_step(self, last: bool):
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, scaler) -> None:
        scaler.scale(loss / self.accumulation).backward()

    def finish(self) -> None:
        pass

    def release(self) -> None:
        pass  # FSDP's hold on its groups is inside torch: hwsweep.run.shutdown.exit_after ends such a process

    @contextlib.contextmanager
    def gathered(self):
        """The root's own weights gathered: FSDP2 hooks forward only, and an evaluator may call another method
        (predict, logits) that uses them directly; the blocks it calls gather themselves."""
        self.model.unshard()
        try:
            yield
        finally:
            self.model.reshard()


def make_reduction(level: str, model, accumulation: int, device, parallel=None, precision: str = "fp32",
                   mesh_shape: tuple[int, int] | None = None, compile: bool = False):  # fmt: skip
    """`parallel`: recipe.parallel (None: DDP); `mesh_shape`: (nodes, devices per node), read by HSDP;
    `compile`: compile each block before sharding it (FSDP; the caller compiles a DDP model whole)."""
    if parallel is not None and parallel.sharded:
        hsdp = mesh_shape if parallel.strategy == "hsdp" else None
        return ShardedReduction(model, accumulation, precision, parallel.reshard_after_forward, device.torch_device,
                                hsdp, compile)  # fmt: skip
    if level == "strict":
        return StrictReduction(model, accumulation)
    ids = [device.torch_device.index] if device.accelerator == "cuda" else None
    return StandardReduction(model, accumulation, ids)


def prepare(model: torch.nn.Module, recipe, plan, device, seed: int, init=None):
    """What run.wrap does, for any caller (the runtime, bench/fsdp.py): the recipe's activation checkpointing on
    the blocks; the model on `device` (a hwsweep device) and wrapped for the plan's reduction; a model built on
    the meta device given memory (under FSDP after sharding: each rank its shards only) and its values from
    `init` or each module's reset_parameters, seeded from `seed` (hwsweep.run.weights), as is a built one when
    `init` is given. Returns the reduction (`.model` to train, `.module` the model as built)."""
    meta, sharded = weights.on_meta(model), recipe.parallel.sharded
    recompute.apply(block_units(model), recipe.activation_checkpointing)
    if not meta:
        model = model.to(device.torch_device)
    elif not sharded:  # a whole replica per device: its memory now
        weights.materialise(model, device.torch_device)
    if not sharded and (meta or init is not None):  # the same values on every rank before DDP sees them
        weights.initialise(model, seed, init)
    reduction = make_reduction(recipe.reproducibility, model, plan.accumulation, device, recipe.parallel,
                               plan.precision, (plan.nodes, plan.devices_per_node), compile=recipe.compile and sharded)  # fmt: skip
    if sharded and meta:  # memory for this rank's shards only
        model.to_empty(device=device.torch_device)
    if sharded and (meta or init is not None):
        weights.initialise(model, seed, init)
    return reduction
