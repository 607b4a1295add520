"""Activation checkpointing (recipe.activation_checkpointing): a block keeps less of its forward for the
backward and recomputes the rest there, trading compute for activation memory.

- none: autograd keeps what every op saves (the default);
- full: a block keeps only its input; its whole forward runs again in the backward;
- selective: a block keeps the outputs of its matrix products and attention, the costly ops, and recomputes
  the cheap ones between them (norms, activations, residual additions).

It applies to the blocks (hwsweep.run.reduce.block_units), before FSDP shards them, as torchtitan does; the
module's names and state dict are unchanged (the block's forward is wrapped, not the block), so checkpoints
are the same with and without it. The memory plan counts what each mode keeps (hwsweep.models.footprint).
"""

from __future__ import annotations

import contextlib
import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

MODES = ("none", "full", "selective")

aten = torch.ops.aten
# What selective keeps: the products and attention (recomputing them would cost as much as the forward).
KEPT_OPS = {
    aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
    aten._scaled_dot_product_flash_attention.default, aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default, aten._scaled_dot_product_flash_attention_for_cpu.default,
}  # fmt: skip


def _policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in KEPT_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective():
    return create_selective_checkpoint_contexts(_policy)


def apply(blocks, mode: str) -> None:
    """Checkpoint every module of `blocks` in `mode` (one of MODES), in place."""
    if mode not in MODES:
        raise ValueError(f"recipe.activation_checkpointing: {mode!r}; use one of {MODES}")
    if mode == "none":
        return
    extra = {"context_fn": _selective} if mode == "selective" else {}
    for block in blocks:
        block.forward = functools.partial(_checkpointed, block.forward, extra)


def _checkpointed(forward, extra: dict, *args, **kwargs):
    if _SUSPENDED[0] or not torch.is_grad_enabled():  # no-grad (evaluation, HRM's cycles): nothing is kept anyway
        return forward(*args, **kwargs)
    return checkpoint(forward, *args, use_reentrant=False, **extra, **kwargs)


_SUSPENDED = [False]


@contextlib.contextmanager
def suspended():
    """Blocks run their forward as is inside (a FLOP count: the model's own work, without recomputation)."""
    _SUSPENDED[0] = True
    try:
        yield
    finally:
        _SUSPENDED[0] = False
