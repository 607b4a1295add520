"""Memory footprint of the reference transformer, from its shape (torch-free, for the planner).

The activation terms were fitted to, and are tested against, the bytes autograd actually saves
for the real model on CPU, in fp32 and under autocast (tests/test_plan.py): a measurement, not a
rule of thumb. Under the -mixed precisions autocast keeps the fp32 weights, gradients and AdamW
state, but the matmul inputs it saves for backward (and what GELU and attention save) are 16-bit
copies; layer norms, the residual stream and the loss stay fp32."""

from __future__ import annotations

FP32 = 4
HALF = 2  # bf16 and fp16
ADAMW_STATE = 2  # exp_avg and exp_avg_sq, one float each per parameter
CUDA_CONTEXT_BYTES = 600 * 2**20  # context, allocator and NCCL buffers on a GPU


def parameter_count(model, task) -> int:
    w, r, v, n = model.width, model.mlp_ratio, task.vocab_size, task.length
    per_block = (4 + 2 * r) * w * w + (9 + r) * w
    return v * w + n * w + model.depth * per_block + 2 * w + w * v + v


def activation_bytes_per_sample(model, task, precision: str = "fp32") -> int:
    w, r, v, n = model.width, model.mlp_ratio, task.vocab_size, task.length
    if precision == "fp32":
        return FP32 * (model.depth * (8 + 2 * r) * n * w + 3 * n * v + 2 * n * w)
    # Per block: 16-bit inputs of qkv, proj and both MLP matmuls, GELU's input, q, k, v and the attention
    # output ((6 + 2r) n w); fp32 inputs of the two layer norms. Head: its 16-bit input, the fp32 input of
    # the final norm and the loss's fp32 log-probabilities.
    half = model.depth * (6 + 2 * r) * n * w + n * w
    full = model.depth * 2 * n * w + n * w + n * v
    return HALF * half + FP32 * full


def device_bytes(model, task, micro_batch: int, accumulation: int, strict: bool, accelerator: str,
                 precision: str = "fp32") -> int:  # fmt: skip
    """Estimated peak bytes on one device: weights, gradients, AdamW state (fp32 at every precision),
    autocast's 16-bit copies of the weights, activations of one micro-batch, and in strict mode every
    micro-batch's gradient kept until the ordered sum."""
    params = parameter_count(model, task)
    p = params * FP32
    kept_gradients = p * accumulation if strict else 0
    context = CUDA_CONTEXT_BYTES if accelerator == "cuda" else 0
    casts = 0 if precision == "fp32" else params * HALF
    activations = micro_batch * activation_bytes_per_sample(model, task, precision)
    return p * (2 + ADAMW_STATE) + kept_gradients + casts + activations + context
