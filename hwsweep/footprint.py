"""Memory footprint of the reference transformer, from its shape (torch-free, for the planner).

The activation term was fitted to, and is tested against, the bytes autograd actually saves
for the real model on CPU (tests/test_plan.py): a measurement, not a rule of thumb."""

from __future__ import annotations

FP32 = 4
ADAMW_STATE = 2  # exp_avg and exp_avg_sq, one float each per parameter
CUDA_CONTEXT_BYTES = 600 * 2**20  # context, allocator and NCCL buffers on a GPU


def parameter_count(model, task) -> int:
    w, r, v, n = model.width, model.mlp_ratio, task.vocab_size, task.length
    per_block = (4 + 2 * r) * w * w + (9 + r) * w
    return v * w + n * w + model.depth * per_block + 2 * w + w * v + v


def activation_bytes_per_sample(model, task) -> int:
    w, r, v, n = model.width, model.mlp_ratio, task.vocab_size, task.length
    floats = model.depth * (8 + 2 * r) * n * w + 3 * n * v + 2 * n * w
    return FP32 * floats


def device_bytes(model, task, micro_batch: int, accumulation: int, strict: bool, accelerator: str) -> int:
    """Estimated peak bytes on one device: weights, gradients, AdamW state, activations of one
    micro-batch, and in strict mode every micro-batch's gradient kept until the ordered sum."""
    p = parameter_count(model, task) * FP32
    kept_gradients = p * accumulation if strict else 0
    context = CUDA_CONTEXT_BYTES if accelerator == "cuda" else 0
    return p * (2 + ADAMW_STATE) + kept_gradients + micro_batch * activation_bytes_per_sample(model, task) + context
