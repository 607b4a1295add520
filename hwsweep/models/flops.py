"""Training FLOPs counted from the real model, and the computational cost derived from them.

The count is torch's own FlopCounterMode over a real forward + backward (the model's loss),
so it follows the code instead of a formula that drifts from it: the no_grad cycles of HRM,
the halting of ACT and the Q-target segment are all in it, as they ran. Matrix products and
attention count as 2 FLOPs per multiply-add; elementwise work is not counted (torch's
convention). Attention on the CPU runs a kernel torch's counter does not know, so it is
registered here with torch's own attention formulas: the same model counts the same on
CPU and GPU.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten


def _cpu_attention(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query, key, value)


def _cpu_attention_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out, query, key, value)


CPU_ATTENTION = {
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_attention_backward,
}


class FusedAttentionOnMeta(TorchFunctionMode):
    """On the meta device (shapes only) F.scaled_dot_product_attention would take the math path
    (two bmm forward, four backward), while CPU and GPU run a fused kernel whose backward torch
    counts with the recomputed scores (2.5x the forward). Route it to the CPU fused kernel, which
    has a meta implementation, so a count on meta equals a count of the real step."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        plain = len(args) == 3 and kwargs.get("attn_mask") is None and not kwargs.get("enable_gqa", False)
        if func is F.scaled_dot_product_attention and plain and args[0].device.type == "meta":
            extra = {k: kwargs[k] for k in ("dropout_p", "is_causal", "scale") if k in kwargs}
            return aten._scaled_dot_product_flash_attention_for_cpu(*args, **extra)[0]
        return func(*args, **kwargs)


def counter() -> FlopCounterMode:
    return FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION)


@contextmanager
def counting():
    """Count the FLOPs of whatever runs inside, e.g. one real training step of the trainer:

        with counting() as flops:
            model(*batch).backward()
        flops.total  # available after the block
    """
    mode = counter()
    result = _Count()
    with mode:
        yield result
    result.total = mode.get_total_flops()


class _Count:
    total: int = 0


def train_step_flops(model: torch.nn.Module, batch) -> int:
    """FLOPs of one forward + backward of `model` on `batch`, the family contract's micro-batch:
    `model(*batch)` is its scalar loss. Runs outside the training run's state: gradients and
    the random streams (ACT exploration draws from them) are as they were before the call."""
    saved = {p: p.grad for p in model.parameters()}
    devices = [t.device for t in batch if t.device.type == "cuda"][:1]
    with torch.random.fork_rng(devices=devices):
        with counting() as flops, FusedAttentionOnMeta():
            model(*batch).backward()
    for p, grad in saved.items():
        p.grad = grad
    return flops.total


def computational_cost(train_flops: float, accuracy: float, samples: int) -> dict[str, float | None]:
    """computational_cost: training FLOPs per accuracy point (accuracy in [0, 1], a point is
    one percent); None where accuracy is 0 (no point was bought). flops_per_sample: training
    FLOPs per training sample seen (steps x global batch)."""
    points = accuracy * 100
    return {
        "computational_cost": train_flops / points if points > 0 and math.isfinite(points) else None,
        "flops_per_sample": train_flops / samples if samples > 0 else None,
    }
