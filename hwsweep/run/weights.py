"""Initial weights that do not depend on how the model is laid out over devices.

A model built under `torch.device("meta")` has shapes and no storage; FSDP shards it as it is, and only then
are the parameters given memory (each rank its shards) and values. For those values to equal the unsharded
model's for the same seed, at any world size, they are drawn one module at a time, in full, on the CPU:

- a module's own parameters and buffers (not its children's) are made whole on the CPU, the global CPU RNG is
  seeded from (run seed, the module's qualified name), and the module's initialiser fills them: the `init`
  function given, else the module's own `reset_parameters()` (torch's layers all have one);
- each tensor is then copied into place: a sharded parameter (a DTensor) takes its rank's slice of it, any
  other tensor all of it.

So a rank holds at most one module's tensors whole beside its shards (the largest, in the built-in families,
is the embedding or the output head), the values are the same on every device type and world size, and the
training RNG streams are left as they were (the draws happen in a forked RNG state).
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode


class _NoDrawsOnMeta(TorchFunctionMode):
    """A normal draw into a meta tensor returns the tensor as it is: it holds no values to draw, and torch's meta
    version of `normal_` is a Python reference whose first call imports sympy (0.3-0.5 CPU-s of a one-process
    run). Every other call goes on as ever; the values come later, from `initialise`."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (nn.init.normal_, torch.Tensor.normal_):  # nn.init's passes the tensor by name
            tensor = args[0] if args else kwargs["tensor"]
            if tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


@contextlib.contextmanager
def meta_device() -> Iterator[None]:
    """`torch.device("meta")` for building a model whose values `initialise` gives later: shapes only, the
    layers' own initial draws skipped."""
    with torch.device("meta"), _NoDrawsOnMeta():
        yield


def on_meta(model: nn.Module) -> bool:
    """Whether any parameter or buffer of `model` is on the meta device (built without storage)."""
    return any(t.is_meta for t in (*model.parameters(), *model.buffers()))


def materialise(model: nn.Module, device: torch.device) -> None:
    """`model.to_empty(device=device)` for a model of plain tensors (not sharded): memory for each, its strides
    kept, no values. to_empty's `empty_like` of a meta tensor runs torch's Python reference, whose first call
    imports sympy (0.3-0.5 CPU-s of a one-process run)."""
    model._apply(lambda t: torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device))


def module_seed(seed: int, name: str) -> int:
    """The CPU RNG seed of one module's initialisation: the run's seed and the module's qualified name."""
    return int.from_bytes(hashlib.blake2b(f"{seed}/init/{name}".encode(), digest_size=8).digest(), "little") >> 1


def _own(module: nn.Module) -> dict[str, torch.Tensor]:
    return {n: t for n, t in (*module._parameters.items(), *module._buffers.items()) if t is not None}


def _place(value: torch.Tensor, target: torch.Tensor) -> None:
    """Copy the whole tensor `value` into `target`, or into its local shard when `target` is a DTensor."""
    dtensor = sys.modules.get("torch.distributed.tensor")  # none exists before its module is imported (0.2 CPU-s)
    if dtensor is not None and isinstance(target, dtensor.DTensor):
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        shape, offset = compute_local_shape_and_global_offset(target.shape, target.device_mesh, target.placements)
        part = value[tuple(slice(o, o + s) for o, s in zip(offset, shape))]
        target.to_local().copy_(part)
    else:
        target.copy_(value)


def initialise(model: nn.Module, seed: int, init: Callable[[nn.Module], None] | None = None) -> None:
    """Give every parameter and buffer of `model` (materialised, e.g. by `to_empty`; whole or sharded) its
    initial value, module by module (see the module's docstring). `init(module)` fills the tensors a module
    holds itself, as torch's `reset_parameters` does; without it each module's `reset_parameters()` is used.
    A module holding tensors with neither is refused, naming it."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        for name, module in model.named_modules():
            own = _own(module)
            if not own:
                continue
            if init is None and not callable(getattr(module, "reset_parameters", None)):
                where = f"{name}.{next(iter(own))}" if name else next(iter(own))
                raise TypeError(f"run.wrap: {where} ({type(module).__name__}) has no initialiser; give "
                                f"{type(module).__name__} a reset_parameters() or pass run.wrap(model, init=fn)")  # fmt: skip
            # A shallow copy whose own tensors are whole CPU ones: the initialiser sees the module's attributes
            # (and its children, which it must leave alone) and fills what it holds.
            whole = object.__new__(type(module))  # not copy.copy: FSDP's module classes run __init__ in __new__
            whole.__dict__ = dict(module.__dict__)
            whole._parameters = {n: None if p is None else nn.Parameter(torch.empty(p.shape, dtype=p.dtype),
                                                                      requires_grad=p.requires_grad)
                                 for n, p in module._parameters.items()}  # fmt: skip
            whole._buffers = {n: None if b is None else torch.empty(b.shape, dtype=b.dtype)
                              for n, b in module._buffers.items()}  # fmt: skip
            torch.manual_seed(module_seed(seed, name))
            if init is None:
                whole.reset_parameters()
            else:
                init(whole)
            for n, target in own.items():
                value = whole._parameters[n] if n in module._parameters else whole._buffers[n]
                _place(value.detach(), target)
